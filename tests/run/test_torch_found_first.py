"""A library that asks for torch's spec before the job imports it (transformers does, on its own import) left the
probes waiting for an import they had already been consulted for: nothing was measured, and a preflight's job saw no
CUDA (trial 10)."""

from __future__ import annotations

from pathlib import Path

from run_cases import Case, mark_line, run_case


def test_a_preflight_simulates_cuda_after_a_find_spec_of_torch(tmp_path: Path) -> None:
    result = run_case(Case(["torch_found_first.py"]), tmp_path, preflight=True)
    assert "device cuda" in result.stdout
    finding = result.finding("data-on-cpu")
    assert finding["where"] == mark_line("torch_found_first.py", "call")


def test_a_plain_run_measures_after_a_find_spec_of_torch(tmp_path: Path) -> None:
    result = run_case(Case(["torch_found_first.py"]), tmp_path, expect_device="cpu")
    assert result.returncode == 0 and "done" in result.stdout
    assert result.report["steps"] is not None and len(result.report["steps"]["steps"]) >= 10
