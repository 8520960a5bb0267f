"""What a trace's verdict may claim: never "healthy" from too few steps, never "computation" for time spent waiting on
collectives, never a GPU rule silenced by a device flag the trace contradicts (each from a fresh-clone tester)."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import TraceBuilder, training_loop

from gputriage.cli import main
from gputriage.diagnosis import diagnose
from gputriage.record import Run
from gputriage.report.diagrams import build_sequence
from gputriage.tracing.multirank import analyse_paths

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _codes(doc: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {f["code"]: f for f in doc["findings"]}


def _rung(doc: dict, n: int) -> dict:  # type: ignore[type-arg]
    return next(r for r in doc["ladder"] if r["rung"] == n)


# ---- too few steps: rung 5 is inconclusive, with the command that records enough


@pytest.mark.parametrize("steps", [1, 2])
def test_a_trace_of_too_few_steps_is_inconclusive_not_healthy(tmp_path: Path, trace_json, steps: int) -> None:  # type: ignore[no-untyped-def]
    code, doc = trace_json(training_loop(steps=steps, busy_share=0.6).write(tmp_path / "few.json"))
    assert code == 0
    assert doc["verdict"]["status"] == "inconclusive"
    summary = doc["verdict"]["summary"]
    assert f"marks only {steps} step" in summary and "schedule(wait=1, warmup=2, active=5)" in summary
    rung5 = _rung(doc, 5)
    assert rung5["status"] == "skipped" and rung5["reason"].startswith("too few steps to judge")
    assert _rung(doc, 4)["status"] == "pass"


def test_the_same_loop_with_enough_steps_is_judged(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(training_loop(steps=3).write(tmp_path / "enough.json"))
    assert doc["verdict"]["status"] == "healthy"
    assert _rung(doc, 5)["status"] == "pass"


def test_low_utilization_from_one_step_is_a_lead_named_in_the_verdict(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(training_loop(steps=1, busy_share=0.2).write(tmp_path / "one.json"))
    low = _codes(doc)["low-gpu-utilization"]
    assert low["severity"] == "info" and low["title"].startswith("From 1 step only: the GPU runs kernels only")
    assert doc["verdict"]["status"] == "inconclusive" and doc["verdict"]["root_cause"] is None
    assert f"What it shows: {low['title']}." in doc["verdict"]["summary"]


def test_a_few_kernels_without_step_marks_are_too_little_to_judge(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """3 kernels in a 19.6 ms window (HTA's event-sync example) got a confident UNDERUSED."""
    b = TraceBuilder()
    for k in range(3):
        b.launch(k * 6_000, k * 6_000 + 5, 100.0)
    _, doc = trace_json(b.write(tmp_path / "three.json"))
    assert doc["verdict"]["status"] == "inconclusive"
    assert _rung(doc, 5)["reason"].startswith("too little to judge: the trace marks no step and holds only 3 kernels")
    assert _codes(doc)["low-gpu-utilization"]["title"].startswith("From 3 kernels, copies or memsets only: ")


def test_a_trace_without_step_marks_is_judged_on_its_window(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    b = TraceBuilder()
    for k in range(200):
        b.launch(k * 2_000, k * 2_000 + 5, 400.0)  # busy 20% of the window, no ProfilerStep
    _, doc = trace_json(b.write(tmp_path / "window.json"))
    assert doc["verdict"]["status"] == "underused"
    assert _codes(doc)["low-gpu-utilization"]["severity"] == "warning"


# ---- communication with no compute beside it


def _comm_loop(comm_us: float, steps: int = 5, step_us: float = 10_000.0) -> TraceBuilder:
    """Each step: compute kernels for 5 ms, then an all-reduce of `comm_us` that nothing overlaps, on rank 0 of 8."""
    b = TraceBuilder()
    b.meta["distributedInfo"] = {"rank": 0, "world_size": 8, "backend": "nccl"}
    for i in range(steps):
        t0 = i * step_us
        b.step(i, t0, step_us)
        for k in range(10):
            b.launch(t0 + k * 5, t0 + 20 + k * 500, 500.0)
        b.launch(t0 + 60, t0 + 5_020, comm_us, NCCL)
    return b


def test_exposed_communication_is_the_root_cause_not_healthy(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(_comm_loop(comm_us=4_500).write(tmp_path / "comm.json"))
    rank = doc["trace"]["ranks"][0]
    assert rank["busy_pct_of_steps"] > 90  # GPU "busy": the collectives count as busy time
    assert rank["step_breakdown"]["comm_pct"] == pytest.approx(45.0, abs=0.5)
    assert doc["verdict"]["root_cause"] == "communication-bound"
    found = _codes(doc)["communication-bound"]
    assert found["severity"] == "warning"
    assert found["evidence"]["exposed_comm_pct_of_steps"] == rank["step_breakdown"]["comm_pct"]  # one number
    assert "NCCL_DEBUG=INFO" in found["fix"] and f"gputriage trace {tmp_path}" in found["fix"]


def test_communication_overlapped_or_small_is_at_most_a_note(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(_comm_loop(comm_us=1_500).write(tmp_path / "some.json"))
    assert _codes(doc)["communication-bound"]["severity"] == "info"
    _, doc = trace_json(_comm_loop(comm_us=500).write(tmp_path / "little.json"))
    assert "communication-bound" not in _codes(doc)


def test_the_step_sequence_says_how_much_of_the_computation_is_communication(tmp_path: Path) -> None:
    section = analyse_paths([_comm_loop(comm_us=4_500).write(tmp_path / "comm.json")])
    diagram = build_sequence(Run(command="trace", trace=section))
    compute = diagram.messages[2]
    assert compute.action == "perform computation"
    assert compute.caveat == "of which communication with no compute beside it: 45.0% of the step"
    # The partition's rest has its own row, so the shares add up to the step.
    shown = [m.share_pct or 0.0 for i, m in enumerate(diagram.messages) if i != 3]
    assert sum(shown) + (diagram.unattributed_pct or 0.0) == pytest.approx(100.0, abs=0.01)


def test_the_mi300_job_waits_on_its_collectives(traces: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """TraceLens's 8-rank MI300X ResNet: 97% busy, and TraceLens measured 67.8% exposed communication. It was
    called healthy, with 92.6% of the step on "perform computation"."""
    _, doc = trace_json(traces / "tracelens/mi300/resnet_act_checkpoint.json.gz")
    assert doc["verdict"]["root_cause"] == "communication-bound"
    share = _codes(doc)["communication-bound"]["evidence"]["exposed_comm_pct_of_steps"]
    assert 60 < share < 70


# ---- a device flag the trace contradicts


def test_expect_device_cpu_on_a_gpu_trace_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = training_loop(loader_us=4_000).write(tmp_path / "gpu.json")
    assert main(["trace", str(path), "--expect-device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert "--expect-device cpu, but the trace ran" in err and "on FakeGPU" in err
    assert len(err.strip().splitlines()) == 1


def test_another_accelerator_on_an_nvidia_trace_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = training_loop()
    b.meta["deviceProperties"] = [{"name": "Tesla V100-SXM2-32GB"}]
    path = b.write(tmp_path / "v100.json")
    assert main(["trace", str(path), "--expect-device", "mps"]) == 2
    err = capsys.readouterr().err
    assert "on Tesla V100-SXM2-32GB (torch calls it cuda)" in err
    assert main(["trace", str(path), "--expect-device", "cuda:1"]) == 0
    # A device gputriage cannot place (no NVIDIA or AMD name) may be what ran: judged as asked.
    assert main(["trace", str(training_loop().write(tmp_path / "other.json")), "--expect-device", "xpu"]) == 0


# ---- launches but no kernel: the device was not recorded, so nothing is said about the GPU's waits


def test_launches_without_kernels_leave_the_loader_share_a_note(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    b = training_loop(loader_us=3_000)
    b.events = [e for e in b.events if e["cat"] not in ("kernel", "gpu_memcpy", "gpu_memset")]
    _, doc = trace_json(b.write(tmp_path / "cpu_side.json"))
    assert doc["verdict"]["status"] == "unknown"
    assert _codes(doc)["input-pipeline-bound"]["severity"] == "info"


def test_the_verdict_of_one_step_never_says_healthy_through_the_api(tmp_path: Path) -> None:
    section = analyse_paths([training_loop(steps=1).write(tmp_path / "one.json")])
    diag = diagnose(Run(command="trace", trace=section))
    assert diag.verdict.status == "inconclusive"


def test_an_inconclusive_short_report_shows_what_there_was(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = training_loop(steps=1, busy_share=0.6).write(tmp_path / "one.json")
    assert main(["trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert "verdict: INCONCLUSIVE" in out
    assert "What was measured" in out and "3. perform computation" in out
    assert "-v shows what was measured" not in out  # it is shown already


def test_a_copy_of_one_rank_in_another_folder_is_named_by_its_path(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    b = training_loop()
    b.meta["distributedInfo"] = {"rank": 1, "world_size": 2, "backend": "nccl"}
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        b.write(tmp_path / folder / "rank1.json")
    assert main(["trace", str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err
    assert f"({tmp_path / 'a' / 'rank1.json'}, {tmp_path / 'b' / 'rank1.json'})" in err and "or a copy" in err


def test_ddp_buffer_broadcast_gets_its_own_fix(traces: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """HTA's ResNet DDP trace: aten::unflatten_dense_tensors inside DistributedDataParallel.forward, right after
    nccl:broadcast, is DDP unpacking its buffers; "create these tensors on the GPU" could not be applied."""
    _, doc = trace_json(traces / "hta/nccl_parser_config/nccl_data.json.gz")
    for code in ("cpu-compute-in-step", "low-gpu-utilization"):
        assert "broadcast_buffers=False" in _codes(doc)[code]["fix"]


def test_a_folder_s_other_json_is_skipped_with_a_note_a_broken_trace_is_not(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], trace_json
) -> None:  # type: ignore[no-untyped-def]
    for rank in (0, 1):
        b = training_loop()
        b.meta["distributedInfo"] = {"rank": rank, "world_size": 2, "backend": "nccl"}
        b.write(tmp_path / f"rank{rank}.json")
    (tmp_path / "config.json").write_text('{"lr": 0.1}')
    code, doc = trace_json(tmp_path)
    assert code == 0 and len(doc["trace"]["ranks"]) == 2
    assert doc["trace"]["skipped"] == [
        "skipped config.json: is not a PyTorch profiler trace (no traceEvents list found)"
    ]
    assert main(["trace", str(tmp_path)]) == 0
    assert "gputriage: note: skipped config.json" in capsys.readouterr().err
    # Named on the command line, it is an error; a broken trace in the folder is one too.
    assert main(["trace", str(tmp_path / "config.json"), str(tmp_path / "rank0.json")]) == 2
    (tmp_path / "config.json").unlink()
    (tmp_path / "rank2.json").write_text('{"traceEvents": [')
    assert main(["trace", str(tmp_path)]) == 2
