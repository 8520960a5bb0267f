"""The corpus's real training scripts and their expectations, as the preflight's test and benches use them: a view of
the one EXPECTED.tsv reader (tests/expected_cases.py), with a healthy control's root as None and the acceptable codes
without their "(info)" qualifier (a preflight's test accepts them at any severity, and checks `must_not` apart).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the benches import this file by its folder
from expected_cases import HEALTHY, Expected, corpus_scripts, read_expected, where_matches

__all__ = ["CorpusCase", "corpus_cases", "corpus_scripts", "where_matches"]


@dataclass(frozen=True)
class CorpusCase:
    name: str  # the case's folder, e.g. 09_nanogpt_pos_without_device
    argv: list[str]  # the script (relative to the corpus's scripts folder) and its arguments
    root: str | None  # the expected verdict.root_cause; None for a healthy control
    acceptable: frozenset[str]  # codes that may appear without the case failing
    must_not: frozenset[str]  # codes that would be a misdiagnosis as a warning or critical
    where: list[str]  # expected `where` alternatives, as paths relative to the scripts folder

    @classmethod
    def of(cls, case: Expected) -> CorpusCase:
        return cls(
            name=case.case,
            argv=list(case.args),
            root=None if case.root == HEALTHY else case.root,
            acceptable=frozenset(code.split("(")[0] for code in case.acceptable),
            must_not=case.must_not,
            where=list(case.where),
        )


def corpus_cases(folder: Path, prefixes: list[str] | None = None) -> list[CorpusCase]:
    cases = [CorpusCase.of(case) for case in read_expected(folder)]
    return [c for c in cases if not prefixes or any(c.name.startswith(p) for p in prefixes)]
