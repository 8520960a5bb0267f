"""The corpus's real training scripts and their expectations (EXPECTED.tsv), read once for the tests and benches.

The corpus lives next to the checkout (../shared/corpus/scripts), or where GPUTRIAGE_CORPUS points (a git worktree
has no ../shared); it is never copied into the project.
"""

from __future__ import annotations

import csv
import os
import shlex
from dataclasses import dataclass
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class CorpusCase:
    name: str  # the case's folder, e.g. 09_nanogpt_pos_without_device
    argv: list[str]  # the script (relative to the corpus's scripts folder) and its arguments
    root: str | None  # the expected verdict.root_cause; None for a healthy control
    acceptable: frozenset[str]  # codes that may appear without the case failing ("code(info)" read as "code")
    must_not: frozenset[str]  # codes that would be a misdiagnosis as a warning or critical
    where: list[str]  # expected `where` alternatives, as paths relative to the scripts folder


def corpus_scripts() -> Path | None:
    root = Path(os.environ.get("GPUTRIAGE_CORPUS") or REPO_ROOT.parent / "shared" / "corpus")
    folder = root / "scripts"
    return folder if (folder / "EXPECTED.tsv").is_file() else None


def corpus_cases(folder: Path, prefixes: list[str] | None = None) -> list[CorpusCase]:
    cases = []
    for row in csv.DictReader((folder / "EXPECTED.tsv").read_text().splitlines(), delimiter="\t"):
        if prefixes and not any(row["case"].startswith(p) for p in prefixes):
            continue
        root = row["expected root cause"]
        cases.append(
            CorpusCase(
                name=row["case"],
                argv=shlex.split(row["command args"]),
                root=None if root == "healthy" else root,
                acceptable=frozenset(_codes(row["acceptable codes"], strip_severity=True)),
                must_not=frozenset(_codes(row["must-not-report codes"])),
                where=[w for w in row["expected where"].split("|") if w and w != "-"],
            )
        )
    return cases


def where_matches(where: str | None, expected: list[str]) -> bool:
    """A finding's `where` names an expected line: matched by path suffix and line, as the corpus's README says."""
    return where is not None and any(where.endswith(e) for e in expected)


def _codes(text: str, strip_severity: bool = False) -> list[str]:
    codes = [c.strip() for c in text.split(",") if c.strip() and c.strip() != "-"]
    return [c.split("(")[0] for c in codes] if strip_severity else codes
