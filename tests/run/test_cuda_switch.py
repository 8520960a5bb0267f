"""A script that names no device but switches its `.cuda()` moves on a flag (`if args.cuda: model.cuda()`): the fix
moves the batch under that same switch, so the script's CPU runs still work, and moves the parts of a batch taken at
one index from parallel arrays together (trial 8: `torch.device("cuda")` was made up, and no patch was offered)."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_cases import Case, Result, mark_line, patched_findings, run_case

SCRIPT = "cuda_switch_batch.py"
SWITCHED = '"cuda" if args.cuda else "cpu"'


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return run_case(Case([SCRIPT]), tmp_path_factory.mktemp("switch"), preflight=True)


def test_the_fix_moves_the_batch_under_the_scripts_own_switch(run: Result) -> None:
    finding = run.finding("data-on-cpu")
    assert finding["where"] == mark_line(SCRIPT, "data-on-cpu")
    fix = finding["fix"].splitlines()
    assert f"data = data.to({SWITCHED}, non_blocking=True)" in fix
    assert f"target = target.to({SWITCHED}, non_blocking=True)" in fix
    assert not any("torch.device(" in line for line in fix)


def test_the_patched_script_runs_healthy(run: Result, tmp_path: Path) -> None:
    assert patched_findings(run.report, SCRIPT, tmp_path) == []
