"""torch.cuda.empty_cache() inside the loop waits for the device and makes the next step allocate again: a host sync
at its line, with the fix to take it out of the loop (trial 10: never mentioned, HEALTHY)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from run_cases import Case, mark_line, run_case

torch = pytest.importorskip("torch")


def test_a_preflight_names_empty_cache_in_the_loop(tmp_path: Path) -> None:
    result = run_case(Case(["empty_cache_each_step.py"]), tmp_path, preflight=True)
    finding = result.finding("host-sync-in-loop")
    assert finding["where"] == mark_line("empty_cache_each_step.py", "empty")
    assert "empty-cache" in finding["evidence"]["sites"][0]
    assert "Delete it from the loop" in finding["fix"]


def test_on_a_gpu_the_probe_times_empty_cache_as_a_sync(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real-GPU path, with CUDA's answers faked: each call in the census window is one sync at its line."""
    from gputriage.collectors.probe import RunProbe
    from gputriage.record import Run

    calls: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(1))
    probe = RunProbe("cuda")
    run = Run(command="run")
    probe.start(run)
    try:
        model = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(6):
            model(torch.randn(2, 4)).sum().backward()
            opt.step()
            torch.cuda.empty_cache()
    finally:
        probe.finish(run)
    assert len(calls) == 6  # the job's own calls all ran
    assert run.compute is not None
    sites: list[Any] = [s for s in run.compute.syncs if s.kind == "empty-cache"]
    assert len(sites) == 1 and sites[0].count == run.compute.window_steps
