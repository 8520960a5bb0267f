"""Checks only a real NVIDIA GPU can make: the same triage on cuda, and host syncs timed on the device."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_cases import Case, mark_line, run_case

pytestmark = pytest.mark.gpu


def test_item_every_step_on_cuda_is_a_host_sync(tmp_path: Path) -> None:
    r = run_case(Case(["item_each_step.py", "cuda"]), tmp_path, expect_device="cuda")
    assert r.returncode == 0, r.stderr
    finding = r.finding("host-sync-in-loop")
    assert finding["where"] == mark_line("item_each_step.py", "host-sync-in-loop")
    assert finding["evidence"]["syncs_per_step"] >= 1
    assert r.report["compute"]["ops_per_device"]["cuda"] > 0
    assert not [f for f in r.report["findings"] if f["rung"] in (2, 3) and f["severity"] == "critical"]


def test_model_left_on_cpu_next_to_cuda_data_is_explained(tmp_path: Path) -> None:
    r = run_case(Case(["model_not_moved.py"]), tmp_path, expect_device="cuda", env={"TRIAGE_DEVICE": "cuda"})
    assert r.returncode == 1
    assert "Expected all tensors to be on the same device" in r.stderr
    assert r.report["verdict"]["root_cause"] == "model-on-cpu"
