"""timeline.json: the run as a Chrome/Perfetto trace (the JSON "Trace Event Format").

- each step is a complete ("X") slice on its rank's process, its phases nested inside it;
- each GPU's NVML samples are counter ("C") tracks: utilisation and memory;
- each finding is a global instant ("i") event at the time it was seen;
- "M" metadata events name the processes and threads.

Times are microseconds since the run started, the same clock as the Run record. The record keeps each phase's
duration but not where inside the step it happened, so the nested phase slices are laid out in the sequence diagram's
order (load data, send data, forward, sync, backward, optimizer, other); `otherData` says so.
"""

from __future__ import annotations

import math
from typing import Any

from gputriage.diagnosis import Diagnosis
from gputriage.findings import Finding
from gputriage.record import Run
from gputriage.record.steps import Step
from gputriage.report.views import all_steps, gpu_tracks, placeable_samples, rank_step_lists, run_end_s, run_start_s
from gputriage.textsafe import encode_safely

_US = 1e6
FINDINGS_PID = 0
_STEP_PID_BASE = 1  # rank r -> pid 1 + r (a single-process run is rank 0's pid)
GPU_PID_BASE = 1000  # NVML index i -> pid 1000 + i
_STEPS_TID = 1
_COLLECTIVES_TID = 2

_PHASE_NAMES = (
    ("data_wait_s", "load data (DataLoader wait)"),
    ("h2d_s", "send data (host to device)"),
    ("forward_s", "forward"),
    ("sync_s", "return results (host sync)"),
    ("backward_s", "backward"),
    ("optimizer_s", "optimizer step"),
    ("other_s", "other"),
)

PHASE_ORDER_NOTE = (
    "Phase slices show measured durations; their order inside a step follows the sequence diagram, "
    "because the record keeps durations, not positions."
)


def _us(seconds: float) -> float:
    return round(seconds * _US, 3)


def _shift(run: Run) -> float:
    """Seconds to add to every time so that none is negative (a sampler may start just before the run's clock)."""
    return max(0.0, -run_start_s(run))


def _meta(pid: int, name: str, tid: int | None = None, thread: str | None = None) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": pid}},
    ]
    if tid is not None and thread is not None:
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})
    return events


def _step_pid(rank: int | None) -> int:
    return _STEP_PID_BASE + (rank or 0)


def _step_events(step: Step, pid: int, shift_s: float) -> list[dict[str, Any]]:
    start_us, end_us = _us(step.start_s + shift_s), _us(step.start_s + shift_s + step.wall_s)
    events: list[dict[str, Any]] = [
        {
            "ph": "X",
            "cat": "step",
            "name": f"step {step.index}",
            "pid": pid,
            "tid": _STEPS_TID,
            "ts": start_us,
            "dur": round(end_us - start_us, 3),
            "args": {"step": step.index, "wall_s": step.wall_s},
        }
    ]
    cursor_s = step.start_s + shift_s
    for field_name, name in _PHASE_NAMES:
        phase_s = max(0.0, float(getattr(step, field_name)))  # a negative phase (a broken record) takes no room
        ts = _us(cursor_s)
        cursor_s += phase_s
        # Clamp to the step's end: float sums may overshoot by a nanosecond, and viewers need strict nesting.
        end = min(_us(cursor_s), end_us)
        if phase_s <= 0 or end <= ts:
            continue
        events.append(
            {
                "ph": "X",
                "cat": "phase",
                "name": name,
                "pid": pid,
                "tid": _STEPS_TID,
                "ts": ts,
                "dur": round(end - ts, 3),
                "args": {field_name: phase_s, "step": step.index},
            }
        )
    return events


def _steps_events(run: Run, shift_s: float) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for rank, steps in rank_step_lists(run):
        pid = _step_pid(rank)
        name = "training steps" if rank is None else f"rank {rank}: training steps"
        events.extend(_meta(pid, name, _STEPS_TID, "steps and phases"))
        for step in steps:
            events.extend(_step_events(step, pid, shift_s))
    return events


def _collective_events(run: Run, shift_s: float) -> list[dict[str, Any]]:
    """Each rank's host-timed waits in collectives, on a thread of its own next to its steps (stragglers show)."""
    if run.ranks is None:
        return []
    events: list[dict[str, Any]] = []
    for info in sorted(run.ranks.ranks, key=lambda i: i.rank):
        placed = [e for e in info.collectives.events if _finite_times(e.t_s, e.wait_s) and e.wait_s >= 0]
        if not placed:
            continue
        pid = _step_pid(info.rank)
        thread = {"name": "collectives (waiting)"}
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": _COLLECTIVES_TID, "args": thread})
        for event in sorted(placed, key=lambda e: e.t_s):
            events.append(
                {
                    "ph": "X",
                    "cat": "collective",
                    "name": event.op,
                    "pid": pid,
                    "tid": _COLLECTIVES_TID,
                    "ts": _us(event.t_s + shift_s),
                    "dur": _us(event.wait_s),
                    "args": {"wait_s": event.wait_s},
                }
            )
    return events


def _finite_times(*values: float) -> bool:
    return all(math.isfinite(v) and abs(v) <= 1e9 for v in values)


def _gpu_events(run: Run, shift_s: float) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for position, labelled in enumerate(gpu_tracks(run)):
        pid, track, label = GPU_PID_BASE + position, labelled.track, labelled.label
        events.extend(_meta(pid, f"{label} (NVML)" + (f": {track.name}" if track.name else "")))
        for sample in placeable_samples(track.samples):
            ts = _us(sample.t_s + shift_s)
            for key, name, value in (
                ("gpu_util_pct", "utilization", sample.gpu_util_pct),
                ("memory_used_bytes", "memory used", sample.memory_used_bytes),
                ("power_w", "power", sample.power_w),
                ("sm_clock_mhz", "SM clock", sample.sm_clock_mhz),
            ):
                if value is not None and math.isfinite(value):
                    events.append(_counter(pid, f"{label} {name}", ts, key, value))
    return events


def _counter(pid: int, name: str, ts: float, key: str, value: float) -> dict[str, Any]:
    return {"ph": "C", "cat": "nvml", "name": name, "pid": pid, "tid": 0, "ts": ts, "args": {key: value}}


def finding_time_s(finding: Finding, run: Run) -> float:
    """When a finding was seen, from its evidence where it says so, else from the rung's probe.

    Rung 1 is probed before the script starts; rungs 2-3 at the first step's forward; the rest are judged on the
    whole observed window, so they sit at its end.
    """
    evidence = finding.evidence
    t_s = evidence.get("t_s")
    if isinstance(t_s, (int, float)) and not isinstance(t_s, bool) and math.isfinite(t_s):
        return max(float(t_s), run_start_s(run))
    steps = all_steps(run)
    for key in ("step", "first_step", "step_index"):
        index = evidence.get(key)
        match = [s for s in steps if s.index == index and (finding.rank is None or s.rank == finding.rank)]
        if isinstance(index, int) and match:
            return match[0].start_s
    if finding.rung == 1:
        return 0.0
    if finding.rung in (2, 3) and steps:
        return min(s.start_s for s in steps)
    return run_end_s(run)


def _finding_events(diag: Diagnosis, shift_s: float) -> list[dict[str, Any]]:
    if not diag.findings:
        return []
    events = _meta(FINDINGS_PID, "gputriage findings", 0, "findings")
    for finding in diag.findings:
        events.append(
            {
                "ph": "i",
                "s": "g",
                "cat": "finding",
                "name": f"{finding.severity.value}: {finding.code}",
                "pid": FINDINGS_PID,
                "tid": 0,
                "ts": _us(finding_time_s(finding, diag.run) + shift_s),
                "args": {
                    "title": finding.title,
                    "rung": finding.rung,
                    "rank": finding.rank,
                    "where": finding.where,
                    "evidence": finding.evidence,
                },
            }
        )
    return events


def profiler_trace_paths(run: Run) -> list[str]:
    if run.trace is None:
        return []
    return [r.path for r in run.trace.ranks if r.path]


def build_timeline(diag: Diagnosis) -> dict[str, Any]:
    """The whole trace document; deterministic, so a re-render of report.json gives the same bytes."""
    shift_s = _shift(diag.run)
    run = diag.run
    events = (
        _finding_events(diag, shift_s)
        + _steps_events(run, shift_s)
        + _collective_events(run, shift_s)
        + _gpu_events(run, shift_s)
    )
    other: dict[str, Any] = {
        "generator": "gputriage",
        "verdict": diag.verdict.status,
        "root_cause": diag.verdict.root_cause,
        "label": diag.verdict.label,
        "time_origin": "the run's start (Run record clock), in microseconds",
        "time_shift_s": shift_s,  # added to every time when some came before the run's start
        "phase_order": PHASE_ORDER_NOTE,
    }
    traces = profiler_trace_paths(diag.run)
    if traces:
        other["profiler_traces"] = traces
        other["profiler_traces_note"] = OPEN_TOGETHER_NOTE
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other}


OPEN_TOGETHER_NOTE = (
    "The profiler traces keep their own clock (Kineto timestamps), so they are not merged into timeline.json: "
    "open timeline.json in one ui.perfetto.dev tab and each profiler trace in another, and read them side by side "
    "by step number (ProfilerStep#N there, 'step N' here)."
)


def encode_timeline(doc: dict[str, Any]) -> bytes:
    return encode_safely(doc) + b"\n"
