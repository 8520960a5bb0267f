"""A tensor made on the CPU on a line next to others made alike (`mean` and `std` from one config) is fixed with them
in one round: the seventh trial's patch fixed `mean`, and the patched run died on `std`."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_cases import Case, Result, mark_line, patched_findings, run_case

SCRIPT = "norm_constants_on_cpu.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return run_case(Case([SCRIPT]), tmp_path_factory.mktemp("norm"), preflight=True)


def test_the_fix_makes_both_constants_on_the_device(run: Result) -> None:
    finding = run.finding("device-mismatch-error")
    assert finding["where"] == mark_line(SCRIPT, "made-here")
    fix = finding["fix"].splitlines()
    assert 'mean = torch.tensor(cfg["mean"], device=device)[None, :, None, None]' in fix
    assert 'std = torch.tensor(cfg["std"], device=device)[None, :, None, None]' in fix
    assert len(finding["evidence"]["edits"]) == 2


def test_the_patched_script_runs_healthy(run: Result, tmp_path: Path) -> None:
    assert patched_findings(run.report, SCRIPT, tmp_path) == []
