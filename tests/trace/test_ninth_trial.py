"""One process that drives several GPUs (`device_map="auto"`, a model split by hand): the busy share is the union over
all of them, so seven idle GPUs beside a busy one read "busy 60%, HEALTHY" (trial 9's P2). Each device's time is
kept, and a GPU that waits while another works is a finding."""

from __future__ import annotations

from pathlib import Path

from builders import GPU_PID, STREAM, training_loop


def _eight_gpus(tmp_path: Path, busy_others: bool) -> Path:
    b = training_loop(steps=6, kernel_us=1000)
    for device in range(1, 8):
        for i in range(6):
            dur = 1000 if busy_others else 5
            b._x("kernel", f"layer{device}", 2000.0 * i, dur, GPU_PID + device, STREAM, stream=STREAM, device=device)
    return b.write(tmp_path / f"eight_{busy_others}.json")


def test_idle_gpus_beside_a_busy_one_are_a_finding(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(_eight_gpus(tmp_path, busy_others=False))
    found = {f["code"]: f for f in doc["findings"]}
    finding = found["gpus-idle-in-process"]
    assert finding["severity"] == "warning" and doc["verdict"]["status"] != "healthy"
    assert finding["evidence"]["devices"] == 8 and finding["evidence"]["idle_devices"] == [str(d) for d in range(1, 8)]
    assert finding["title"].startswith("7 of the 8 devices this process drove")


def test_gpus_used_alike_are_a_note_and_one_gpu_is_nothing(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(_eight_gpus(tmp_path, busy_others=True))
    found = {f["code"]: f for f in doc["findings"]}
    assert found["gpus-idle-in-process"]["severity"] == "info"
    _, single = trace_json(training_loop(steps=6).write(tmp_path / "one.json"))
    assert "gpus-idle-in-process" not in {f["code"] for f in single["findings"]}


def test_both_decoders_and_every_split_count_the_same_devices(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from gputriage.tracing import analyse_trace, scan

    path = _eight_gpus(tmp_path, busy_others=False)
    fast = analyse_trace(path, jobs=1).devices
    assert len(fast) == 8 and fast[0].device == str(GPU_PID)
    assert analyse_trace(path, jobs=2).devices == fast
    monkeypatch.setattr(scan, "NATIVE", None)  # the typed msgspec decode, as without the compiled scanner
    assert analyse_trace(path, jobs=1).devices == fast


def test_gpus_taking_turns_are_judged_each_on_its_own_share(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """Trial 10's P1: two GPUs each busy 35% of the time, one after the other, pooled to "busy 70%, HEALTHY"."""
    b = training_loop(steps=8, step_us=10_000.0, kernel_us=500.0, busy_share=0.36)
    for i in range(8):
        for k in range(7):  # device 1 works while device 0 waits: 3.5 ms from 40% of each step
            b._x("kernel", "stage2", 10_000.0 * i + 4000 + 500 * k, 500, GPU_PID + 1, STREAM, stream=STREAM, device=1)
    _, doc = trace_json(b.write(tmp_path / "turns.json"))
    finding = {f["code"]: f for f in doc["findings"]}["gpus-idle-in-process"]
    assert finding["severity"] == "warning" and doc["verdict"]["status"] == "underused"
    own = finding["evidence"]["device_pct_of_window"]
    assert len(own) == 2 and max(own.values()) < 50.0 and finding["evidence"]["busy_pct"] > 50.0
    assert "each one's own kernels cover at most" in finding["title"]
