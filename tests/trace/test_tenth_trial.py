"""What a tenth trial of real traces found misjudged: a first launch that sat 626 ms in cudaLaunchKernel (module
loading, cuDNN's set-up at first use) was called CPU ops, with the fix to create tensors on the device."""

from __future__ import annotations

from pathlib import Path

from builders import TraceBuilder


def _first_launch_stall(tmp_path: Path) -> Path:
    """Three 10 ms steps of kernels; the first convolution's launch takes 60 ms before its kernel runs."""
    b = TraceBuilder()
    t = 0.0
    for i in range(3):
        b.step(i, t, 10_000.0)
        for k in range(18):
            b.launch(t + 5 * k, t + 20 + 500 * k, 500.0)
        t += 10_000.0
    b.step(3, t, 70_000.0)
    b.op("aten::cudnn_convolution", t + 10, 60_500.0)
    b.launch(t + 20, t + 60_100, 800.0, "cudnn_conv_kernel", call_dur=60_000.0)
    return b.write(tmp_path / "stall.json")


def test_a_long_launch_is_runtime_time_not_a_cpu_op(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(_first_launch_stall(tmp_path))
    gaps = doc["trace"]["ranks"][0]["gaps"]
    assert max(gaps["by_activity_us"], key=lambda k: gaps["by_activity_us"][k]) == "runtime"
    assert gaps["by_activity_us"]["runtime"] >= 59_000.0
    finding = {f["code"]: f for f in doc["findings"]}.get("low-gpu-utilization")
    assert finding is not None and finding["evidence"]["main_thread_in_gaps"] == "runtime"
    assert "inside a kernel launch" in finding["fix"] and "create those tensors on the device" not in finding["fix"]


def _cpu_op_and_a_short_sync(tmp_path: Path) -> Path:
    """10 ms steps: kernels for 4 ms, a 3 ms CPU op the GPU waits on, 2.5 ms of kernels, then `.item()`; the GPU idles
    0.7 ms after the sync, until the next step's kernels."""
    b = TraceBuilder()
    for i in range(8):
        t = 10_000.0 * i
        b.step(i, t, 10_000.0)
        for k in range(8):
            b.launch(t + 2 * k, t + 300 + 470 * k, 460.0)
        b.op("aten::randn", t + 4_100, 3_000.0)
        for k in range(5):
            b.launch(t + 7_100 + 2 * k, t + 7_120 + 500 * k, 480.0)
        b.op("aten::item", t + 7_200, 2_430.0)
        b.runtime("cudaStreamSynchronize", t + 7_210, 2_410.0)
    return b.write(tmp_path / "both.json")


def test_the_host_side_cause_that_idles_the_gpu_most_leads(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """kernelforge's trace: CPU randn left the GPU idle 18.5% of each step, a sync 5.3%; the sync was the root
    cause because its rule was registered first."""
    _, doc = trace_json(_cpu_op_and_a_short_sync(tmp_path))
    found = {f["code"]: f for f in doc["findings"] if f["severity"] == "warning"}
    sync, cpu = found["host-sync-in-loop"], found["cpu-compute-in-step"]
    assert sync["evidence"]["idle_after_sync_pct"] < cpu["evidence"]["gpu_idle_during_pct"]
    codes = list(found)
    assert codes.index("cpu-compute-in-step") < codes.index("host-sync-in-loop")
    assert doc["verdict"]["root_cause"] == "cpu-compute-in-step"


def test_cuptis_overhead_events_are_not_device_events(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """flow_matching's trace: 7 "overhead" events (Activity Buffer Request, on pid -1) were "7 device events
    (kernels, copies or memsets) dropped"."""
    from builders import training_loop

    b = training_loop(steps=6)
    for i in range(3):
        b._x("overhead", "Activity Buffer Request", 100.0 * i, 5.0, -1, 0)
    _, doc = trace_json(b.write(tmp_path / "overhead.json"))
    rank = doc["trace"]["ranks"][0]
    assert not any("dropped" in n for n in rank["notes"]) and not rank.get("unread_events")


def test_a_window_with_no_op_and_no_kernel_measured_nothing(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """particle_transformer's small trace: an A100 named, a few runtime calls, no op, no kernel: it was HEALTHY, "no
    problem in where the ops run"."""
    b = TraceBuilder()
    b.meta["deviceProperties"] = [{"name": "NVIDIA A100-PCIE-40GB"}]
    b.runtime("cudaGetDeviceCount", 0.0, 3.0)
    b.runtime("cudaDeviceSynchronize", 10.0, 5.0)
    _, doc = trace_json(b.write(tmp_path / "nothing.json"))
    assert doc["verdict"]["status"] == "unknown"
    assert "no operator, no kernel launch and no device event" in doc["verdict"]["summary"]


def test_a_folder_skips_an_empty_file_as_it_skips_a_fifo(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """An empty `.json` beside rank0.json stopped the command, where a FIFO or a dangling link is skipped."""
    from builders import training_loop

    folder = tmp_path / "job"
    folder.mkdir()
    training_loop(steps=6).write(folder / "rank0.json")
    (folder / "empty.json").write_bytes(b"")
    code, doc = trace_json(folder)
    assert code == 0 and any("skipped empty.json" in s for s in doc["trace"]["skipped"])


def test_wide_text_without_a_byte_order_mark_is_named(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from gputriage.cli import main

    for encoding, name in (("utf-16-le", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32-le", "UTF-32")):
        path = tmp_path / f"{encoding}.json"
        path.write_bytes('{"traceEvents": []}'.encode(encoding))
        assert main(["trace", str(path)]) == 2
        assert f"is {name} text" in capsys.readouterr().err


def test_a_rank_outside_its_range_is_said_so(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from builders import training_loop

    from gputriage.cli import main

    for name, rank in (("a.json", -1), ("b.json", 1)):
        b = training_loop(steps=6)
        b.meta["distributedInfo"] = {"rank": rank, "world_size": 2, "backend": "nccl"}
        b.write(tmp_path / name)
    assert main(["trace", str(tmp_path)]) == 2
    assert "no distributedInfo with a valid rank" in capsys.readouterr().err


def test_a_lone_surrogate_in_the_header_keeps_the_header(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """A `\\ud800` escape in deviceProperties' name dropped the whole header (device name, distributedInfo): msgspec
    refuses what Python's json reads; a valid pair stays a character."""
    from builders import training_loop

    b = training_loop(steps=6)
    b.meta["deviceProperties"] = [{"name": "NVIDIA A100 \ud800 \ud83d\ude00"}]
    b.meta["distributedInfo"] = {"rank": 0, "world_size": 1, "backend": "nccl"}
    _, doc = trace_json(b.write(tmp_path / "surrogate.json"))
    rank = doc["trace"]["ranks"][0]
    assert rank["device"] == "NVIDIA A100 \ufffd \U0001f600"
    assert not any("header" in n for n in rank["notes"])


def test_a_python_thread_under_pid_0_is_not_the_main_thread(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """SwitchTransformers' A100 traces (trial 11): a logging thread's python_function events under pid 0 / tid 0 span
    the window; pid 0 == tid 0 made it "the process's main thread", and every gap, spent inside 20 ms kernel
    launches on the real one, was called "Python between the ops"."""
    b = TraceBuilder()
    for k in range(30):
        t = 25_000.0 * k
        b.op("aten::softmax", t, 20_300.0)
        b.launch(t + 10, t + 20_200, 4_000.0, call_dur=20_100.0)
    b._x("python_function", "threading.py(1016): _bootstrap", 0.0, 750_000.0, 0, 0)
    b._x("python_function", "loguru/_handler.py(300): _queued_writer", 1.0, 749_990.0, 0, 0)
    _, doc = trace_json(b.write(tmp_path / "pid0.json"))
    finding = {f["code"]: f for f in doc["findings"]}["low-gpu-utilization"]
    assert finding["evidence"]["main_thread_in_gaps"] == "runtime"
    gaps = doc["trace"]["ranks"][0]["gaps"]
    assert max(gaps["by_activity_us"], key=lambda k: gaps["by_activity_us"][k]) == "runtime"


def test_a_finding_that_explains_far_more_of_the_step_leads_a_lower_rungs(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """Trial 11: six pageable copies worth 3.5% of the window were the root cause over a DataLoader wait of 30% of
    each step (rung 4 before rung 5); a CPU op leaving the GPU idle 16.7% of the step, likewise."""
    from builders import training_loop

    for extra in ({"pageable_copy_us": 300.0}, {"cpu_op_us": 1_700.0}):
        _, doc = trace_json(training_loop(steps=6, loader_us=3_000.0, **extra).write(tmp_path / "t.json"))
        warnings = [f["code"] for f in doc["findings"] if f["severity"] == "warning"]
        assert warnings[0] == "input-pipeline-bound", warnings
        assert doc["verdict"]["root_cause"] == "input-pipeline-bound"


def test_a_lower_rung_finding_still_leads_what_it_explains_as_much_as() -> None:
    from gputriage.findings import Finding, Severity, root_cause_order

    sync = Finding("host-sync-in-loop", 4, Severity.WARNING, "t", evidence={"idle_after_sync_pct": 20.0})
    loader = Finding("input-pipeline-bound", 5, Severity.WARNING, "t", evidence={"dataloader_pct_of_step": 25.0})
    unsaid = Finding("cpu-compute-in-step", 4, Severity.WARNING, "t", evidence={})
    assert [f.code for f in root_cause_order([loader, sync])] == ["host-sync-in-loop", "input-pipeline-bound"]
    assert root_cause_order([loader, unsaid])[0] is unsaid  # a share not said: the causal order stands
    big = Finding("input-pipeline-bound", 5, Severity.WARNING, "t", evidence={"dataloader_pct_of_step": 31.0})
    assert root_cause_order([sync, big])[0] is big


def test_a_thin_leads_title_keeps_an_acronym(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """Trial 11: "From 2 steps only: cPU ops (aten::randn) run inside the step ..."."""
    from builders import training_loop

    _, doc = trace_json(training_loop(steps=2, cpu_op_us=3_000.0, busy_share=0.5).write(tmp_path / "two.json"))
    titles = [f["title"] for f in doc["findings"] if f["title"].startswith("From 2 steps only: ")]
    assert titles and not any("cPU" in t for t in titles)
    assert any("From 2 steps only: CPU ops" in t for t in titles), titles


def test_deepep_all_to_all_kernels_are_communication(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """DeepSeek's published DualPipe step (trial 11): its expert-parallel all-to-all kernels (DeepEP's dispatch and
    combine, namespace ep::internode) were compute, and the 64-rank job showed no communication."""
    b = TraceBuilder()
    for i in range(3):
        t = 10_000.0 * i
        b.step(i, t, 10_000.0)
        b.launch(t + 5, t + 10, 4_000.0, "void deep_ep::internode::dispatch<false, 8>(int4*, float*)")
        b.launch(t + 10, t + 4_020, 3_000.0)
        b.launch(t + 15, t + 7_030, 2_900.0, "void dpsk::ep::internode::combine<false, 8>(int4*, float*)")
    _, doc = trace_json(b.write(tmp_path / "ep.json"))
    comm = doc["trace"]["ranks"][0]["comm"]
    assert comm is not None and comm["kernels"] == 6
