"""A tensor made once before the loop and given to the model at every step (a whole graph, a mask): the fix and
the patch move it where it is made, once, and the finding points there; a factory gets `device=` (trial 8: the
fix copied the whole graph to the device at every step, before the call)."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_cases import Case, Result, mark_line, patched_findings, run_case

SCRIPT = "graph_made_once.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return run_case(Case([SCRIPT]), tmp_path_factory.mktemp("madeonce"), preflight=True)


def test_the_finding_points_where_the_tensor_is_made(run: Result) -> None:
    finding = run.finding("data-on-cpu")
    assert finding["where"] == mark_line(SCRIPT, "made")
    assert finding["evidence"]["host_tensor_made_where"] == mark_line(SCRIPT, "made")
    assert any(mark_line(SCRIPT, "call") in t for t in finding["evidence"]["tensors"])


def test_the_fix_moves_each_once_where_it_is_made(run: Result) -> None:
    fix = run.finding("data-on-cpu")["fix"].splitlines()
    made, mask = (mark_line(SCRIPT, m).split(":")[1] for m in ("made", "mask-made"))
    assert fix[fix.index(f"# after line {made}: features, labels = load_graph(64)") + 2] == (
        "features = features.to(device, non_blocking=True)"
    )
    assert fix[fix.index(f"# instead of line {mask}: mask = torch.ones(64, 1)") + 2] == (
        "mask = torch.ones(64, 1, device=device)"
    )
    call = mark_line(SCRIPT, "call").split(":")[1]
    assert not any(line.startswith(f"# before line {call}") for line in fix)  # nothing copied at every step


def test_the_patched_script_runs_healthy(run: Result, tmp_path: Path) -> None:
    assert patched_findings(run.report, SCRIPT, tmp_path) == []
