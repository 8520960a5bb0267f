"""The census counts a CPU op at what its thread computed, not at its wall time: on a loaded machine the OS takes the
core away mid-op, and a trial saw a 0.1 ms `torch.cat` of two batches take 11 ms on every call and become the root
cause (cpu-compute-in-step). An op that waits (here a custom op that sleeps) stands for the preempted one."""

from __future__ import annotations

import pytest
from run_cases import Case, Result, run_many


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    cases = {"waits": Case(["cpu_op_waits.py"]), "works": Case(["cpu_op_waits.py", "--work"])}
    return run_many(cases, tmp_path_factory.mktemp("census_cpu"), preflight=True)


def test_an_op_that_waits_is_no_cpu_work(runs: dict[str, Result]) -> None:
    r = runs["waits"]
    assert r.returncode == 0
    # the census's finding (the stack sampler's, by line and by wall time, is a note of its own)
    assert not [f for f in r.report["findings"] if "cpu_op_pct_of_step" in f["evidence"]]
    ops = {op["name"]: op for op in r.report["compute"]["top_cpu_ops"]}
    waited = ops["gputriage_test.waits"]
    assert waited["time_s"] < 0.002 * waited["count"]  # it slept 4 ms per call and computed next to nothing


def test_an_op_that_computes_still_is(runs: dict[str, Result]) -> None:
    r = runs["works"]
    finding = r.finding("cpu-compute-in-step")
    assert any(op.startswith("aten.sort") for op in finding["evidence"]["cpu_ops"])
