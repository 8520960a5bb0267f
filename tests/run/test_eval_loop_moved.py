"""The same unmoved batch in a second loop of the file (an evaluation's `output = model(data)`): the fix and the
patch move it there too, each loop in its own names, so that the patched script runs to its end on a GPU (trial 8:
the patch moved the batch in `train()` only, and the patched MNIST died in `test()`)."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_cases import Case, Result, mark_line, patched_findings, run_case

SCRIPT = "eval_loop_unmoved.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return run_case(Case([SCRIPT]), tmp_path_factory.mktemp("evalloop"), preflight=True)


def test_the_fix_moves_the_batch_in_both_loops(run: Result) -> None:
    finding = run.finding("data-on-cpu")
    assert finding["where"] == mark_line(SCRIPT, "data-on-cpu")
    fix = finding["fix"].splitlines()
    test_line = mark_line(SCRIPT, "test-call").split(":")[1]
    assert f"# before line {test_line}: output = model(data)" in fix
    after_test = fix[fix.index(f"# before line {test_line}: output = model(data)") + 1 :]
    assert after_test[:2] == [
        "data = data.to(device, non_blocking=True)",
        "target = target.to(device, non_blocking=True)",
    ]


def test_the_patched_script_runs_to_its_end_healthy(run: Result, tmp_path: Path) -> None:
    # patched_findings asserts the patched run's exit code 0: a crash in test() would fail it
    assert patched_findings(run.report, SCRIPT, tmp_path) == []
