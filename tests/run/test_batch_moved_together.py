"""A fix that moves the inputs of a batch the loop unpacks moves its other tensors with them, and nothing that is not
a tensor. The script dies at the model's call, so the labels are never seen off the device; the sixth trial's Fabric
example got a patch that moved `data` and then died on `target` one line below."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_cases import Case, Result, mark_line, patched_findings, run_case

SCRIPT = "batch_not_moved.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return run_case(Case([SCRIPT]), tmp_path_factory.mktemp("batch"), preflight=True)


def test_the_batch_structure_is_recorded(run: Result) -> None:
    assert run.report["placement"]["batch_tensors"] == [True, True, False]


def test_the_fix_moves_the_labels_with_the_inputs_and_not_the_names(run: Result) -> None:
    finding = run.finding("data-on-cpu")
    assert finding["where"] == mark_line(SCRIPT, "data-on-cpu")
    fix = finding["fix"].splitlines()
    assert "data = data.to(device, non_blocking=True)" in fix
    assert "target = target.to(device, non_blocking=True)" in fix
    assert not any(line.startswith("names =") for line in fix)
    (edit,) = finding["evidence"]["edits"]
    assert [line.strip() for line in edit["new"][:-1]] == [
        "data = data.to(device, non_blocking=True)",
        "target = target.to(device, non_blocking=True)",
    ]


def test_the_patched_script_runs_healthy(run: Result, tmp_path: Path) -> None:
    assert patched_findings(run.report, SCRIPT, tmp_path) == []
