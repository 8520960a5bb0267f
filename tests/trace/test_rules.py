"""One tiny synthetic training loop per finding, through the real CLI; a healthy loop yields nothing to fix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from builders import PID, TraceBuilder, training_loop

from contract import IDLE_BREAKDOWN_FIELDS, TRACE_RANK_FIELDS
from gputriage.cli import main


def _codes(doc: dict) -> dict[str, dict]:  # type: ignore[type-arg]
    return {f["code"]: f for f in doc["findings"]}


def test_healthy_loop_has_no_warning(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    code, doc = trace_json(training_loop().write(tmp_path / "healthy.json.gz"))
    rank = doc["trace"]["ranks"][0]
    assert rank["busy_pct"] >= 95
    assert [f for f in doc["findings"] if f["severity"] != "info"] == []
    assert (code, doc["verdict"]["status"]) == (0, "healthy")
    # Two rungs that share a reason take it once, in the plural.
    assert "rungs 2 and 3, `gputriage trace` does not measure them" in doc["verdict"]["summary"]


def test_contract_fields_of_the_trace_section(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(training_loop(loader_us=3000).write(tmp_path / "t.json"))
    rank = doc["trace"]["ranks"][0]
    for key in TRACE_RANK_FIELDS:
        assert key in rank
    assert set(rank["idle_breakdown"]) == set(IDLE_BREAKDOWN_FIELDS)
    assert (rank["device"], rank["steps"], rank["step_time_us"]) == ("FakeGPU", 5, 10000.0)
    assert rank["busy_pct"] + rank["idle_pct"] == pytest.approx(100)
    assert rank["compute_pct"] + rank["non_compute_pct"] == pytest.approx(rank["busy_pct"])
    assert rank["rank"] is None  # no distributedInfo: null, never a guess


def test_input_pipeline_bound(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(training_loop(loader_us=3000).write(tmp_path / "loader.json"))
    found = _codes(doc)["input-pipeline-bound"]
    assert found["evidence"]["dataloader_pct_of_step"] == pytest.approx(30.0)
    # The loop's Python frame names the line its function starts on, never the `for` over the loader: no where.
    assert found["severity"] == "warning" and found["where"] is None
    assert "num_workers" in found["fix"]
    assert doc["verdict"]["root_cause"] == "input-pipeline-bound"
    _, starved = trace_json(training_loop(loader_us=5000).write(tmp_path / "starved.json"))
    assert _codes(starved)["input-pipeline-bound"]["severity"] == "critical"


def test_host_sync_in_loop_names_the_line(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(training_loop(sync_idle_us=2500).write(tmp_path / "sync.json"))
    found = _codes(doc)["host-sync-in-loop"]
    assert found["where"] == "train.py:42"
    assert found["evidence"]["top_op"] == "aten::item"
    assert found["evidence"]["sync_calls_per_step"] == 1.0
    assert found["evidence"]["idle_after_sync_pct"] > 20


def test_a_sync_outside_every_step_is_no_cost_of_the_steps(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    # A fresh-clone tester found an MI300 trace's one hipDeviceSynchronize, after the last step, shown as 77.8% of
    # each step ("return results"). The steps' share counts only what lies inside them; the totals keep every call.
    b = training_loop(steps=5, sync_idle_us=2500)  # one 200 µs sync in each 10 ms step
    b.runtime("cudaDeviceSynchronize", 5 * 10_000 + 100, 40_000)  # after the last step: 40 ms
    _, doc = trace_json(b.write(tmp_path / "sync_after.json"))
    syncs = doc["trace"]["ranks"][0]["syncs"]
    assert syncs["calls"] == 6 and syncs["blocking_us"] == pytest.approx(5 * 200 + 40_000)
    assert syncs["calls_per_step"] == 1.0  # was 1.2
    assert syncs["blocking_pct_of_steps"] == pytest.approx(2.0)  # was (5 * 0.2 + 40) / 50 ms = 82%


def test_cpu_compute_in_step(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(training_loop(cpu_op_us=2500).write(tmp_path / "cpu.json"))
    found = _codes(doc)["cpu-compute-in-step"]
    assert found["evidence"]["top_ops"] == ["aten::mul"]
    assert found["evidence"]["gpu_idle_during_pct"] == pytest.approx(20.0, abs=0.5)


def test_pageable_memcpy(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, small = trace_json(training_loop(pageable_copy_us=100).write(tmp_path / "small.json"))
    assert _codes(small)["pageable-memcpy"]["severity"] == "info"
    _, big = trace_json(training_loop(pageable_copy_us=800, busy_share=0.9).write(tmp_path / "big.json"))
    found = _codes(big)["pageable-memcpy"]
    assert found["severity"] == "warning"
    assert found["evidence"]["pageable_h2d_count"] == 5
    assert found["evidence"]["pageable_h2d_bytes"] == 5 * (4 << 20)
    assert "pin_memory=True" in found["fix"]


def test_launch_bound(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    b = TraceBuilder()
    t = 0.0
    for _ in range(400):  # each 4 µs kernel is launched after the previous one ended: the CPU is the bottleneck
        b.launch(t, t + 8, 4.0, call_dur=10.0)
        t += 14.0
    _, doc = trace_json(b.write(tmp_path / "launch.json"))
    found = _codes(doc)["launch-bound"]
    assert found["evidence"]["host_wait_pct_of_idle"] == 100.0
    assert found["evidence"]["median_kernel_us"] == 4.0
    assert "torch.compile" in found["fix"]
    assert "low-gpu-utilization" not in _codes(doc)  # the lower finding explains the idle GPU


def test_launch_bound_from_one_marked_step_is_a_lead(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    # TraceLens's one-step H100 traces: one got "INCONCLUSIVE, too few steps", the other a confident launch-bound
    # warning from the same single (warm-up) step
    b = TraceBuilder()
    t = 0.0
    for _ in range(400):
        b.launch(t, t + 8, 4.0, call_dur=10.0)
        t += 14.0
    b.step(0, 0.0, t)
    _, doc = trace_json(b.write(tmp_path / "launch_one_step.json"))
    found = _codes(doc)["launch-bound"]
    assert found["severity"] == "info"
    assert found["title"].startswith("From 1 step only: the GPU waits for the CPU")
    assert doc["verdict"]["status"] == "inconclusive"


def test_a_long_wait_in_a_copy_back_to_the_host_is_a_sync_in_the_gap_with_that_copy_in_the_fix(
    tmp_path: Path,
    trace_json,  # type: ignore[no-untyped-def]
) -> None:
    # sglang's decode: 463 ms of the main thread in hipMemcpyWithStream (a D2H copy) was called "cpu-op" work in the
    # gap, with a fix to create tensors on the device; the syncs' own summary had the copy as the sync
    b = TraceBuilder()
    for i in range(10):
        b.launch(i * 200.0, i * 200.0 + 10, 100.0)
    b.op("aten::copy_", 2_100.0, 50_000.0)
    b.launch(
        2_101.0,
        52_090.0,
        5.0,
        "Memcpy DtoH (Device -> Host)",
        call="hipMemcpyWithStream",
        call_dur=49_995.0,
        cat="gpu_memcpy",
    )
    for i in range(10):
        b.launch(52_200.0 + i * 200.0, 52_210.0 + i * 200.0, 100.0)
    _, doc = trace_json(b.write(tmp_path / "copy_wait.json"))
    found = _codes(doc)["low-gpu-utilization"]
    assert found["evidence"]["main_thread_in_gaps"] == "sync"
    assert "copy back from the GPU (hipMemcpyWithStream in aten::copy_" in found["fix"]


def test_low_gpu_utilization_when_nothing_explains_it(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    b = TraceBuilder()
    for i in range(25):
        b.launch(i * 10_000, i * 10_000 + 10, 3000.0)  # 30% busy, long kernels, nothing on the CPU side
    _, doc = trace_json(b.write(tmp_path / "low.json"))
    found = _codes(doc)["low-gpu-utilization"]
    assert found["evidence"]["busy_pct"] == pytest.approx(100 * 75000 / 243000, abs=0.01)
    assert found["severity"] == "warning"
    # The fix no longer sends the user to a gap list only report.json holds: the longest gaps are in the evidence,
    # and with nothing on the CPU side in them the fix is the generic one.
    assert found["evidence"]["longest_gaps"] == [f"7.0 ms at +{t}.0 ms (python)" for t in (3, 13, 23)]
    assert found["fix"].startswith("# The host runs no recorded op while the GPU waits")


def test_low_gpu_utilization_fix_follows_what_the_main_thread_did_in_the_gaps(  # type: ignore[no-untyped-def]
    tmp_path: Path, trace_json
) -> None:
    """TraceLens's owlv2 trace: a single step, the DataLoader in every long gap; the fix was 'look at the gaps'."""
    b = TraceBuilder()
    b.step(0, 0, 60_000)
    for k in range(4):
        t = k * 15_000
        b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", t, 9_000)
        b.launch(t + 9_000, t + 9_010, 4_000.0)
    _, doc = trace_json(b.write(tmp_path / "loader_gaps.json"))
    found = _codes(doc)["low-gpu-utilization"]
    assert found["evidence"]["main_thread_in_gaps"] == "dataloader"
    assert "num_workers=8" in found["fix"] and "trace section" not in found["fix"]
    gaps = found["evidence"]["longest_gaps"]
    assert 1 <= len(gaps) <= 3 and all(g.endswith("(dataloader)") for g in gaps)


def test_no_gpu_compute(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    b = TraceBuilder()
    b.step(0, 0, 5000)
    b.op("aten::addmm", 10, 4000)
    _, doc = trace_json(b.write(tmp_path / "cpu.json"))
    found = _codes(doc)["no-gpu-compute"]
    assert (found["severity"], found["rung"]) == ("critical", 4)
    assert found["title"] == "The profiled steps ran no kernel on any accelerator"
    assert doc["verdict"]["status"] == "idle"
    rung5 = next(r for r in doc["ladder"] if r["rung"] == 5)  # no kernel: how busy a GPU is was not measured
    assert rung5["status"] == "skipped" and "no kernel on any accelerator" in rung5["reason"]
    # A job meant for the CPU says so: no kernel is then what was meant.
    code, quiet = trace_json(tmp_path / "cpu.json", "--expect-device", "cpu", "--fail-on", "critical")
    assert code == 0 and "no-gpu-compute" not in _codes(quiet)
    assert {r["rung"]: r["status"] for r in quiet["ladder"]}[4] == "skipped"
    assert main(["trace", str(tmp_path / "cpu.json"), "--json", "--fail-on", "critical"]) == 1


def _npu_like(tmp_path: Path, device_tasks: int) -> Path:
    """Steps of CPU ops and, on another process, device tasks as torch_npu writes them: no category, no stream
    (an Ascend trace_view.json), with the host-to-device flows that tie them to the ops."""
    b = TraceBuilder()
    for i in range(4):
        b.step(i, i * 10_000, 10_000)
        b.op("aten::addmm", i * 10_000 + 10, 9_000)
    start_us = b.base_ns // 1000
    for k in range(device_tasks):  # torch_npu writes times as strings
        ts = f"{start_us + 10 + k // 2}.{5 * (k % 2)}"
        b.events.append({"ph": "X", "name": "MatMulV2", "pid": 3170820512, "tid": 2, "ts": ts, "dur": 0.5, "args": {}})
        b.events.append({"ph": "s", "cat": "HostToDevice", "id": k, "name": "HostToDevice", "pid": PID, "tid": PID})
        b.events[-1]["ts"] = ts
    return b.write(tmp_path / "npu.json")


def test_device_work_in_a_form_not_read_is_not_called_a_cpu_only_trace(  # type: ignore[no-untyped-def]
    tmp_path: Path, trace_json
) -> None:
    """torch_npu's traces hold the NPU's tasks without category or stream: "no kernel ran" would be a false critical.
    Rungs 4 and 5 say "not measured", with the count and what to do instead."""
    code, doc = trace_json(_npu_like(tmp_path, device_tasks=200), "--fail-on", "critical")
    assert doc["trace"]["ranks"][0]["unread_events"] == 200
    assert "no-gpu-compute" not in _codes(doc)
    assert (code, doc["verdict"]["status"]) == (0, "unknown")
    rungs = {r["rung"]: r for r in doc["ladder"]}
    for rung in (4, 5):
        assert rungs[rung]["status"] == "skipped"
        assert "200 timed events with no category gputriage knows and no `stream` arg" in rungs[rung]["reason"]
    assert "torch_npu" in doc["verdict"]["summary"]


def test_a_few_unread_events_leave_a_cpu_only_trace_cpu_only(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    # Kineto's own bookkeeping ("overhead" events: 2-9 per trace in the corpus) is no sign of another device.
    _, doc = trace_json(_npu_like(tmp_path, device_tasks=12))
    assert doc["trace"]["ranks"][0]["unread_events"] == 12
    assert _codes(doc)["no-gpu-compute"]["severity"] == "critical"


def test_a_cpu_only_profile_without_steps_speaks_of_its_window(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    b = TraceBuilder()
    b.op("aten::addmm", 10, 4000)
    _, doc = trace_json(b.write(tmp_path / "ops.json"))
    assert _codes(doc)["no-gpu-compute"]["title"] == "The profiled window ran no kernel on any accelerator"


def test_launches_without_device_events_do_not_measure_where_the_ops_ran(  # type: ignore[no-untyped-def]
    tmp_path: Path, trace_json
) -> None:
    """The profiler recorded the CPU only (no ProfilerActivity.CUDA): the launches prove a GPU was used, and nothing
    says how. Before, rung 4 said "pass" and the verdict "healthy" (HTA's CUPTI-profiler trace in the corpus)."""
    b = TraceBuilder()
    for i in range(4):
        b.step(i, i * 10_000, 10_000)
        b.op("aten::addmm", i * 10_000 + 10, 900)
        b.runtime("cudaLaunchKernel", i * 10_000 + 20, 5)
    _, doc = trace_json(b.write(tmp_path / "cpu_activity_only.json"))
    assert doc["verdict"]["status"] == "unknown" and not _codes(doc)
    rungs = {r["rung"]: r for r in doc["ladder"]}
    assert rungs[4]["status"] == rungs[5]["status"] == "skipped"
    assert "4 kernel launches but no kernel, copy or memset" in rungs[4]["reason"]
    assert "ProfilerActivity.CUDA" in rungs[4]["reason"]


def test_gpu_idle_time_that_was_not_measured_is_null(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    # A long CPU op and a sync call, and no device event: how long the GPU idled meanwhile was never measured.
    b = TraceBuilder()
    for i in range(4):
        b.step(i, i * 10_000, 10_000)
        b.op("aten::mul", i * 10_000 + 10, 3000)
        b.runtime("cudaLaunchKernel", i * 10_000 + 3100, 5)
        b.runtime("cudaStreamSynchronize", i * 10_000 + 3200, 400)
    _, doc = trace_json(b.write(tmp_path / "cpu_activity_only.json"))
    rank = doc["trace"]["ranks"][0]
    assert rank["cpu_compute"]["cpu_compute_us"] > 0 and rank["syncs"]["calls"] == 4
    assert rank["cpu_compute"]["gpu_idle_during_us"] is None
    assert rank["cpu_compute"]["gpu_idle_during_pct_of_steps"] is None
    assert rank["syncs"]["idle_after_sync_us"] is None and rank["syncs"]["idle_after_sync_pct"] is None


def test_out_dir_writes_report_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = training_loop(loader_us=3000).write(tmp_path / "t.json")
    assert main(["trace", str(path), "--out", str(tmp_path / "out"), "--fail-on", "warning"]) == 1
    assert "input-pipeline-bound" in capsys.readouterr().out
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    assert doc["trace"]["ranks"][0]["dataloader_pct_of_step"] == pytest.approx(30.0)
    assert main(["report", str(tmp_path / "out"), "--json"]) == 0  # the saved report re-renders
    assert json.loads(capsys.readouterr().out)["findings"][0]["code"] == "input-pipeline-bound"


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_a_run_meant_for_no_accelerator_gets_no_gpu_findings_from_its_trace(tmp_path: Path, device: str) -> None:
    # `run --expect-device cpu --trace` captures a CPU-only trace: "no kernel ran" is then no finding at all.
    from gputriage.diagnosis import diagnose
    from gputriage.record import Run
    from gputriage.record.trace import TraceSection
    from gputriage.tracing import analyse_trace

    b = TraceBuilder()
    b.step(0, 0, 5000)
    b.op("aten::addmm", 10, 4000)
    rank = analyse_trace(b.write(tmp_path / "cpu.json"))
    section = TraceSection(ranks=[rank])
    assert "no-gpu-compute" in {f.code for f in diagnose(Run(command="run", trace=section)).findings}
    quiet = diagnose(Run(command="run", expect_device=device, trace=section))
    assert [f.code for f in quiet.findings] == (["cpu-run"] if device == "cpu" else [])  # cpu-run: info


def test_gputriage_frames_are_not_the_users_code() -> None:
    from gputriage.tracing import names

    own = str(Path(names.__file__).resolve().parents[1] / "collectors" / "probe" / "steps.py")
    assert names.user_frame(f"{own}(88): _on_step") is None
    assert names.user_frame("/home/me/train.py(42): main") == "/home/me/train.py:42"


def test_a_cpu_only_trace_never_speaks_of_the_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = TraceBuilder()
    for i in range(5):
        b.step(i, i * 10_000, 10_000)
        b.annotation("enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", i * 10_000, 4_750)
        b.op("aten::addmm", i * 10_000 + 5_000, 4_000)
    path = b.write(tmp_path / "cpu.json")
    assert main(["trace", str(path), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    loader = _codes(doc)["input-pipeline-bound"]
    assert loader["title"] == "Each step waits for the DataLoader 47.5% of its time"
    assert "GPU" not in loader["title"] + loader["fix"]
    assert "no-gpu-compute" in _codes(doc)


def test_busy_is_judged_over_the_steps_not_only_between_the_first_and_last_kernel(  # type: ignore[no-untyped-def]
    tmp_path: Path, trace_json
) -> None:
    """A video classifier: 218 ms of CPU preprocessing, then 160 ms of back-to-back kernels. 99% busy between the
    first and the last kernel is not a healthy step (TraceLens's timesformer trace)."""
    b = TraceBuilder()
    for i in range(3):
        t0 = i * 38_000
        b.step(i, t0, 38_000)
        b.op("preprocess", t0, 21_800)
        for k in range(16):
            b.launch(t0 + 22_000 + k * 1000, t0 + 22_000 + k * 1000 + 5, 1000.0)
    _, doc = trace_json(b.write(tmp_path / "pre.json"))
    rank = doc["trace"]["ranks"][0]
    assert rank["busy_pct_of_steps"] < 50 < rank["busy_pct"]
    found = _codes(doc)["low-gpu-utilization"]
    assert found["severity"] == "warning" and "of the steps' time" in found["title"]
    assert doc["verdict"]["status"] != "healthy"


def test_a_finding_that_explains_little_of_the_idle_time_does_not_hide_it(  # type: ignore[no-untyped-def]
    tmp_path: Path, trace_json
) -> None:
    """A sync after which the GPU idles ~9% does not explain a GPU idle ~70% of every step (kineto's 2021 autograd
    sample: first-iteration set-up was the idle time, and only the sync was reported)."""
    b = TraceBuilder()
    for i in range(5):
        t0 = i * 10_000
        b.step(i, t0, 10_000)
        b.launch(t0 + 10, t0 + 20, 2000.0)  # kernel A
        b.frame("train.py(42): train_step", t0 + 1900, 200)
        b.op("aten::item", t0 + 1950, 80)
        b.runtime("cudaStreamSynchronize", t0 + 1960, 100)  # the host waits for A, then the GPU idles 1 ms
        b.launch(t0 + 3000, t0 + 3020, 1000.0)  # kernel B; then 6 ms idle that no sync, op or loader explains
    _, doc = trace_json(b.write(tmp_path / "idle.json"))
    codes = _codes(doc)
    assert codes["host-sync-in-loop"]["severity"] == "warning"
    assert codes["host-sync-in-loop"]["evidence"]["idle_after_sync_pct"] < 35
    assert codes["low-gpu-utilization"]["severity"] == "warning"


def test_a_share_from_one_step_is_a_lead_not_a_finding(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(training_loop(steps=1, loader_us=3000).write(tmp_path / "one.json"))
    found = _codes(doc)["input-pipeline-bound"]
    assert found["severity"] == "info" and found["title"].startswith("From 1 step only: ")


def test_where_comes_from_the_line_that_ran(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    # A frame already running when the profiler started (it starts before the first op) names the line it was on
    # then, for the whole window: never a where. A call stack is taken when the event ran: its line is the where.
    b = training_loop(sync_idle_us=2500)
    b.frame("train.py(57): main", -1000, 60_000)  # the loop's own function, running since before the window
    for event in b.events:
        if event["name"] == "train.py(42): train_step":
            event["name"] = "loop.py(9): log"
    _, doc = trace_json(b.write(tmp_path / "sync.json"))
    assert _codes(doc)["host-sync-in-loop"]["where"] == "loop.py:9"  # entered while recording: its first line
    b.events = [e for e in b.events if e["cat"] != "python_function" or e["name"] == "train.py(57): main"]
    _, doc = trace_json(b.write(tmp_path / "sync2.json"))
    assert _codes(doc)["host-sync-in-loop"]["where"] is None  # only the already-running frame is left

    c = training_loop(loader_us=3000)
    for event in c.events:
        if event["name"].startswith("enumerate(DataLoader)"):
            event["args"]["Call stack"] = "torch/utils/data/dataloader.py(630): __next__;train.py(71): main"
    _, doc = trace_json(c.write(tmp_path / "loader.json"))
    assert _codes(doc)["input-pipeline-bound"]["where"] == "train.py:71"
