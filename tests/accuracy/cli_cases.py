"""Run a set of EXPECTED.tsv cases through the real `gputriage run`, a few at a time, and score them."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_accuracy as accuracy  # bench/accuracy.py, loaded by conftest.py

# How the cases run here: on the meta stand-in. The corpus runs under `run --preflight` in
# tests/preflight/test_corpus_preflight.py and the project's scenarios in tests/run/test_run_preflight.py;
# bench/accuracy.py defaults to preflight.
MODE = os.environ.get("GPUTRIAGE_ACCURACY_MODE", "meta")
PARALLEL_RUNS = 2


@dataclass
class Outcome:
    score: accuracy.Score
    report: dict[str, Any]  # report.json ({} when none was written)


def run_and_score(cases: list[accuracy.Expected], work: Path) -> dict[str, Outcome]:
    with ThreadPoolExecutor(PARALLEL_RUNS) as pool:
        reports = list(pool.map(lambda c: accuracy.run_case(MODE, c, work / c.case), cases))
    return {
        case.case: Outcome(accuracy.score(case, report), report) for case, report in zip(cases, reports, strict=True)
    }
