"""The EXPECTED.tsv format, read in one place: the shared corpus's real scripts (../shared/corpus/scripts, or where
GPUTRIAGE_CORPUS points; read in place, never copied) and the project's own cases (tests/scripts). The columns are
the corpus README's: case, command args, expected root cause, acceptable codes, must-not-report codes, expected
where, notes. Used by the accuracy bench and tests, the preflight corpus test and bench, and the GPU check.
"""

from __future__ import annotations

import csv
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from corpus_path import CORPUS

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS_SCRIPTS = CORPUS / "scripts"
PROJECT_SCRIPTS = REPO_ROOT / "tests" / "scripts"
HEALTHY = "healthy"


def corpus_scripts() -> Path | None:
    """The corpus's scripts folder, or None where the corpus is absent (tests skip, benches say so)."""
    return CORPUS_SCRIPTS if (CORPUS_SCRIPTS / "EXPECTED.tsv").is_file() else None


@dataclass(frozen=True)
class Expected:
    """One row of an EXPECTED.tsv."""

    case: str
    args: tuple[str, ...]  # the script (relative to the set's folder) and its arguments
    root: str  # the expected verdict.root_cause, or "healthy"
    acceptable: frozenset[str]  # codes that may appear; "code(info)" only at info
    must_not: frozenset[str]
    where: tuple[str, ...]  # "path:line" alternatives, relative to the set's folder; empty: no line expected
    folder: Path

    def acceptable_at(self, code: str, severity: str) -> bool:
        if code in self.acceptable:
            return True
        return severity == "info" and f"{code}(info)" in self.acceptable


def read_expected(folder: Path) -> list[Expected]:
    path = folder / "EXPECTED.tsv"
    if not path.is_file():
        return []
    rows = []
    with path.open(newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh, delimiter="\t"):
            rows.append(
                Expected(
                    case=row["case"],
                    args=tuple(shlex.split(row["command args"])),
                    root=row["expected root cause"].strip(),
                    acceptable=_codes(row["acceptable codes"]),
                    must_not=_codes(row["must-not-report codes"]),
                    where=tuple(
                        _resolve_mark(folder, w.strip())
                        for w in row["expected where"].split("|")
                        if w.strip() not in ("", "-")
                    ),
                    folder=folder,
                )
            )
    return rows


def _resolve_mark(folder: Path, where: str) -> str:
    """`script.py:MARK name` is the line carrying `# MARK name` in that script, so an edit above it cannot stale the
    expectation; a plain `script.py:N` is kept as written (the shared corpus uses line numbers)."""
    path, _, line = where.partition(":")
    if not line.startswith("MARK "):
        return where
    marker = f"# {line}"
    for number, text in enumerate((folder / path).read_text(encoding="utf-8").splitlines(), start=1):
        if text.rstrip().endswith(marker):
            return f"{path}:{number}"
    raise ValueError(f"{folder / 'EXPECTED.tsv'}: no '{marker}' in {path}")


def _codes(cell: str) -> frozenset[str]:
    return frozenset(c.strip() for c in cell.split(",") if c.strip() and c.strip() != "-")


def where_matches(where: str | None, expected: Iterable[str]) -> bool:
    """A finding's `where` (absolute, or relative to the run's folder) matches `path:line` by path suffix and line."""
    if not where or ":" not in where:
        return False
    path, _, line = where.rpartition(":")
    for alternative in expected:
        exp_path, _, exp_line = alternative.rpartition(":")
        if line == exp_line and (path == exp_path or path.endswith("/" + exp_path)):
            return True
    return False
