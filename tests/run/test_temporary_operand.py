"""A device-mismatch crash whose CPU operand was a temporary (`rewards.detach()`): the variable it was made from is
found by its storage, and the fix moves it where it is made (trial 10: a generic `t = t.to(...)`)."""

from __future__ import annotations

from pathlib import Path

from run_cases import Case, mark_line, run_case

SCRIPT = "temporary_operand.py"


def test_the_crash_names_the_variable_behind_a_temporary(tmp_path: Path) -> None:
    result = run_case(Case([SCRIPT]), tmp_path, preflight=True)
    finding = result.finding("device-mismatch-error")
    assert finding["evidence"]["host_tensor"] == "rewards"
    assert finding["evidence"]["host_tensor_where"] == mark_line(SCRIPT, "made")
    assert "rewards = torch.tensor([float(i) for i in range(8)], device=device)" in finding["fix"]


def test_a_view_of_a_forwards_cpu_result_names_where_the_forward_made_it(tmp_path: Path) -> None:
    script = "forward_output_view.py"
    result = run_case(Case([script]), tmp_path, preflight=True)
    finding = result.finding("device-mismatch-error")
    assert finding["evidence"]["cpu_tensor_where"] == mark_line(script, "made")
    assert finding["where"] == mark_line(script, "made")
    assert "outputs = torch.zeros(src.shape[0], src.shape[1], 6, device=src.device)" in finding["fix"]
