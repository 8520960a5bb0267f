"""timeline.json against the Chrome trace event format: phases, required fields, nesting, monotonic counters."""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from report_records import (
    crashed_run,
    diagnosis_with,
    distributed_run,
    injected_finding,
    no_gpu_run,
    starvation_finding,
    starved_run,
    trace_only_run,
)

from gputriage.findings import Finding, Severity
from gputriage.record.ranks import CollectiveEvent
from gputriage.report.timeline import build_timeline, encode_timeline

_PHASES = {"X", "C", "i", "M"}
_METADATA = {"process_name", "thread_name", "process_sort_index"}


def check_trace_event_format(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Fail on anything ui.perfetto.dev or chrome://tracing would reject or misdraw; return the events."""
    assert set(doc) >= {"traceEvents"}
    events = doc["traceEvents"]
    assert isinstance(events, list)
    counters: dict[tuple[int, str], list[float]] = defaultdict(list)
    slices: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for event in events:
        assert event["ph"] in _PHASES, event
        assert isinstance(event["name"], str) and event["name"], event
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int), event
        if event["ph"] == "M":
            assert event["name"] in _METADATA, event
            assert isinstance(event["args"], dict)
            continue
        assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0, event
        if event["ph"] == "X":
            assert isinstance(event["dur"], (int, float)) and event["dur"] >= 0, event
            slices[(event["pid"], event["tid"])].append((event["ts"], event["ts"] + event["dur"]))
        elif event["ph"] == "C":
            assert event["args"] and all(isinstance(v, (int, float)) for v in event["args"].values()), event
            counters[(event["pid"], event["name"])].append(event["ts"])
        elif event["ph"] == "i":
            assert event["s"] in {"g", "p", "t"}, event
    for track, times in counters.items():
        assert times == sorted(times), f"counter {track} is not monotonic in time"
    for thread, spans in slices.items():
        _check_nesting(thread, spans)
    return list(events)


def _check_nesting(thread: tuple[int, int], spans: list[tuple[float, float]]) -> None:
    """Slices on one thread nest strictly (a child ends before its parent), as the viewers require."""
    open_ends: list[float] = []
    for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        assert not open_ends or end <= open_ends[-1] + 1e-6, f"slice {start}-{end} overlaps its parent on {thread}"
        open_ends.append(end)


def names(events: list[dict[str, Any]], ph: str) -> list[str]:
    return [e["name"] for e in events if e["ph"] == ph]


def test_steps_phases_counters_and_findings() -> None:
    doc = build_timeline(diagnosis_with(starved_run(step_count=3, sample_count=5), [starvation_finding()]))
    events = check_trace_event_format(doc)

    slices = [e for e in events if e["ph"] == "X"]
    assert [e["name"] for e in slices if e["cat"] == "step"] == ["step 0", "step 1", "step 2"]
    step0 = [e for e in slices if e["args"].get("step") == 0]
    assert [e["name"] for e in step0] == [
        "step 0",
        "load data (DataLoader wait)",
        "send data (host to device)",
        "forward",
        "return results (host sync)",
        "backward",
        "optimizer step",
        "other",
    ]
    assert step0[0]["ts"] == 1_000_000.0 and step0[0]["dur"] == pytest.approx(100_000.0)
    assert step0[1]["dur"] == pytest.approx(60_000.0)

    assert names(events, "C").count("GPU 0 utilization") == 5
    assert names(events, "C").count("GPU 0 memory used") == 5
    instant = [e for e in events if e["ph"] == "i"]
    assert [e["name"] for e in instant] == ["critical: input-pipeline-bound"]
    # Rung 5 is judged over the whole observed window: the instant sits at its end (last NVML sample, 0.4 s,
    # is before the last step's end, 1.3 s).
    assert instant[0]["ts"] == pytest.approx(1_300_000.0)
    assert instant[0]["args"]["where"] == "train.py:31"

    processes = {e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert processes == {"gputriage findings", "training steps", "GPU 0 (NVML): NVIDIA A100-SXM4-80GB"}
    json.loads(encode_timeline(doc))  # valid JSON on disk


def test_findings_sit_at_the_time_their_evidence_names() -> None:
    run = starved_run(step_count=5)
    placed = Finding("data-on-cpu", 2, Severity.CRITICAL, "Inputs reach the model on the CPU")
    at_step = Finding("host-sync-in-loop", 4, Severity.WARNING, "The step blocks", evidence={"step": 3})
    at_time = Finding("gpu-throttled", 5, Severity.INFO, "The GPU throttles", evidence={"t_s": 2.5})
    env = Finding("cpu-only-build", 1, Severity.CRITICAL, "torch has no CUDA")
    doc = build_timeline(diagnosis_with(run, [placed, at_step, at_time, env]))
    when = {e["name"].split(": ")[1]: e["ts"] for e in doc["traceEvents"] if e["ph"] == "i"}
    assert when == {
        "cpu-only-build": 0.0,
        "data-on-cpu": 1_000_000.0,  # the first step, where placement is observed
        "host-sync-in-loop": pytest.approx(1_300_000.0),  # step 3 starts at 1.0 + 3 * 0.1 s
        "gpu-throttled": 2_500_000.0,
    }


def test_distributed_run_has_one_process_per_rank_and_per_gpu() -> None:
    events = check_trace_event_format(build_timeline(diagnosis_with(distributed_run(world_size=3), [])))
    processes = sorted(e["args"]["name"] for e in events if e["name"] == "process_name")
    assert processes[:3] == [
        "GPU 0 (NVML): NVIDIA H100 80GB HBM3",
        "GPU 1 (NVML): NVIDIA H100 80GB HBM3",
        "GPU 2 (NVML): NVIDIA H100 80GB HBM3",
    ]
    assert processes[3:] == ["rank 0: training steps", "rank 1: training steps", "rank 2: training steps"]
    pids = {e["pid"] for e in events if e["ph"] == "X"}
    assert len(pids) == 3


def test_runs_without_steps_or_gpu_still_give_a_valid_trace() -> None:
    for run in (no_gpu_run(), crashed_run(), trace_only_run()):
        check_trace_event_format(build_timeline(diagnosis_with(run, [injected_finding()])))


def test_a_profiler_trace_is_named_with_how_to_open_it_alongside() -> None:
    doc = build_timeline(diagnosis_with(trace_only_run(), []))
    assert doc["otherData"]["profiler_traces"] == ["traces/rank0.pt.trace.json"]
    assert "ui.perfetto.dev" in doc["otherData"]["profiler_traces_note"]


def test_phase_slices_never_overshoot_their_step() -> None:
    run = starved_run(step_count=1, sample_count=0)
    assert run.steps is not None
    step = run.steps.steps[0]
    step.other_s += 2e-9  # within the record's tolerance, but past the step's end in microseconds
    events = check_trace_event_format(build_timeline(diagnosis_with(run, [])))
    parent = next(e for e in events if e.get("cat") == "step")
    last = [e for e in events if e.get("cat") == "phase"][-1]
    assert last["ts"] + last["dur"] <= parent["ts"] + parent["dur"]


def test_each_ranks_collective_waits_sit_beside_its_steps() -> None:
    run = distributed_run(world_size=2)
    assert run.ranks is not None
    run.ranks.ranks[1].collectives.events = [
        CollectiveEvent(op="ddp_allreduce", t_s=1.05, wait_s=0.02),
        CollectiveEvent(op="barrier", t_s=float("nan"), wait_s=0.01),  # a broken reading is left out
    ]
    events = check_trace_event_format(build_timeline(diagnosis_with(run, [])))

    collectives = [e for e in events if e.get("cat") == "collective"]
    assert [(e["name"], e["ts"], e["dur"]) for e in collectives] == [("ddp_allreduce", 1_050_000.0, 20_000.0)]
    rank1_steps = {e["pid"] for e in events if e.get("cat") == "step" and e["args"]["step"] == 0}
    assert collectives[0]["pid"] in rank1_steps and collectives[0]["tid"] != 1
    threads = [e["args"]["name"] for e in events if e["name"] == "thread_name" and e["pid"] == collectives[0]["pid"]]
    assert sorted(threads) == ["collectives (waiting)", "steps and phases"]
