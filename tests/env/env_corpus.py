"""The labelled rung-1 reports (tests/data/envs and the shared corpus) and how one is scored.

Shared by the accuracy test and `bench/env_accuracy.py` (which puts this folder on sys.path), so both count the same
way. See tests/data/envs/README.md for the file format.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from gputriage.errors import InputError

REPO_ROOT = Path(__file__).resolve().parents[2]
OWN_DIR = REPO_ROOT / "tests" / "data" / "envs"
SHARED_DIR = Path(os.environ.get("GPUTRIAGE_CORPUS") or REPO_ROOT.parent / "shared" / "corpus") / "envs"
SHARED_LABELS = OWN_DIR / "shared-labels.tsv"
NO_CAUSE = "none"  # the thread found that rung 1 was not the problem
# Only these keys are trailer lines; a "### Versions" heading inside a pasted issue is part of the paste.
# The shared corpus's "### note:" lines carry facts the thread gave later (a driver version): they stay in the paste.
_TRAILER = re.compile(r"^### (?:source|root cause|why|forms|category|resolution):")
_LABEL = re.compile(r"^### root cause:\s*([a-z-]+)", re.MULTILINE)
_SOURCE = re.compile(r"^### source:\s*(\S+)", re.MULTILINE)


@dataclass(frozen=True)
class Report:
    name: str  # "envs/012.txt" or "shared/016.txt"
    path: Path
    expected: str  # a finding code, or "none"
    source: str | None


@dataclass(frozen=True)
class Outcome:
    root_cause: str | None  # verdict.root_cause; None when no rung-1 cause was named
    status: str  # verdict.status, or "refused" when the text was rejected as input
    detail: str  # the verdict summary or the refusal message

    def predicted(self) -> str:
        return self.root_cause or NO_CAUSE

    def healthy_on_a_problem(self, expected: str) -> bool:
        return expected != NO_CAUSE and self.status == "healthy"


def pasted_text(path: Path) -> str:
    """The report as a maintainer pastes it: everything but our trailer."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not _TRAILER.match(line)) + "\n"


def own_reports(folder: Path = OWN_DIR) -> list[Report]:
    reports = []
    for path in sorted(folder.glob("*.txt")):
        text = path.read_text(encoding="utf-8")
        label, source = _LABEL.search(text), _SOURCE.search(text)
        if label is None:
            raise ValueError(f"{path} has no '### root cause:' line")
        reports.append(Report(f"envs/{path.name}", path, label.group(1), source.group(1) if source else None))
    return reports


def shared_reports(folder: Path = SHARED_DIR) -> list[Report]:
    """The shared corpus's reports that have a label in shared-labels.tsv; empty where the corpus is absent."""
    if not folder.is_dir():
        return []
    labels = {}
    for line in SHARED_LABELS.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, code = line.split("\t")[:2]
            labels[name] = code.strip()
    return [
        Report(f"shared/{p.name}", p, labels[p.name], None) for p in sorted(folder.glob("*.txt")) if p.name in labels
    ]


def all_reports(shared: Path = SHARED_DIR) -> list[Report]:
    return own_reports() + shared_reports(shared)


def diagnose_report(report: Report) -> Outcome:
    """What `gputriage env --from FILE` concludes for the report (in-process, no terminal)."""
    from gputriage.commands.env import diagnose_text

    try:
        diag = diagnose_text(pasted_text(report.path))
    except InputError as exc:
        return Outcome(None, "refused", str(exc))
    return Outcome(diag.verdict.root_cause, diag.verdict.status, diag.verdict.summary)
