"""Read-only views of the Run record that several file renderers share: phase groups, per-rank steps, GPU summary.

Nothing here measures; it only regroups and summarises what the record holds. A value the record lacks stays None.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import msgspec

from gputriage.record import Run
from gputriage.record.gpu import GpuSample, GpuSection, GpuTrack
from gputriage.record.numbers import gpu_util_mean_pct, gpu_util_readings, step_numbers, window_of
from gputriage.record.placement import ModelInfo
from gputriage.record.steps import Step
from gputriage.wording import counted


class PhaseGroup(msgspec.Struct, frozen=True):
    """One band of the stacked step chart; `fields` are the Step attributes it adds up."""

    key: str
    label: str
    color: str
    fields: tuple[str, ...]


# Bottom to top of the stack, in the order the sequence diagram walks a step. Compute covers the three phases that
# run (or launch) work on the device; the chart keeps them together so the eye compares "working" against "waiting".
PHASE_GROUPS: tuple[PhaseGroup, ...] = (
    PhaseGroup("data_wait", "data wait", "#d9534f", ("data_wait_s",)),
    PhaseGroup("h2d", "send data", "#f0ad4e", ("h2d_s",)),
    PhaseGroup("compute", "compute", "#5cb85c", ("forward_s", "backward_s", "optimizer_s")),
    PhaseGroup("sync", "sync", "#5bc0de", ("sync_s",)),
    PhaseGroup("other", "other", "#9e9e9e", ("other_s",)),
)

STEP_PHASE_FIELDS = ("data_wait_s", "h2d_s", "forward_s", "sync_s", "backward_s", "optimizer_s", "other_s")


def group_s(step: Step, group: PhaseGroup) -> float:
    return sum(float(getattr(step, name)) for name in group.fields)


def rank_step_lists(run: Run) -> list[tuple[int | None, list[Step]]]:
    """Each rank's steps in time order, lowest rank first; one entry with rank None for a single-process run.

    A merged distributed report keeps every rank's own steps in `ranks.ranks[i].steps` (see gputriage.merge); a
    record that tags its steps with `Step.rank` instead is grouped by that tag.
    """
    if run.ranks is not None and any(info.steps is not None for info in run.ranks.ranks):
        return [
            (info.rank, _in_time_order(info.steps.steps))
            for info in sorted(run.ranks.ranks, key=lambda i: i.rank)
            if info.steps is not None and info.steps.steps
        ]
    if run.steps is None or not run.steps.steps:
        return []
    ranks = sorted({s.rank for s in run.steps.steps}, key=lambda r: -1 if r is None else r)
    return [(rank, _in_time_order([s for s in run.steps.steps if s.rank == rank])) for rank in ranks]


def _in_time_order(steps: Sequence[Step]) -> list[Step]:
    """The steps that can be placed on a time axis, in time order: not a NaN, infinite or negative wall time.

    A record with such a step fails its self_check, and the HTML report lists that problem.
    """
    placeable = [s for s in steps if s.wall_s >= 0 and all(_placeable_s(float(getattr(s, f))) for f in _TIME_FIELDS)]
    return sorted(placeable, key=lambda s: (s.start_s, s.index))


_TIME_FIELDS = ("start_s", "wall_s", *STEP_PHASE_FIELDS)
# No run lasts 30 years: a time beyond this is a corrupt record, and would overflow the microsecond axis.
_MAX_ABS_TIME_S = 1e9


def _placeable_s(t_s: float) -> bool:
    return math.isfinite(t_s) and abs(t_s) <= _MAX_ABS_TIME_S


def placeable_samples(samples: Sequence[GpuSample]) -> list[GpuSample]:
    return sorted((s for s in samples if _placeable_s(s.t_s)), key=lambda s: s.t_s)


def all_steps(run: Run) -> list[Step]:
    return [s for _rank, steps in rank_step_lists(run) for s in steps]


def primary_steps(run: Run) -> tuple[int | None, list[Step]]:
    """The steps the diagrams describe: the only rank, or rank 0 (the lowest) of a distributed run."""
    lists = rank_step_lists(run)
    return lists[0] if lists else (None, [])


class LabelledTrack(msgspec.Struct):
    label: str  # "GPU 0", or "node-a GPU 0" when the job spans several nodes
    track: GpuTrack


def gpu_tracks(run: Run) -> list[LabelledTrack]:
    """Every GPU the record sampled, once each: the top-level section, then other nodes' ranks' sections."""
    sections: list[tuple[str | None, GpuSection | None]] = []
    first_node = None
    if run.ranks is not None and run.ranks.ranks:
        first_node = min(run.ranks.ranks, key=lambda i: i.rank).node
    sections.append((first_node, run.gpu))
    if run.ranks is not None:
        sections.extend((info.node, info.gpu) for info in sorted(run.ranks.ranks, key=lambda i: i.rank))
    nodes = {node for node, section in sections if section is not None and section.devices}
    seen: set[tuple[str | None, str]] = set()
    out = []
    for node, section in sections:
        if section is None:
            continue
        for track in section.devices:
            key = (node, track.uuid or str(track.index))
            if key in seen:
                continue
            seen.add(key)
            prefix = f"{node} " if len(nodes) > 1 and node else ""
            out.append(LabelledTrack(f"{prefix}GPU {track.index}", track))
    return out


class RankStepSummary(msgspec.Struct):
    """One rank's step numbers (record/numbers.py), over its steps after warm-up."""

    rank: int | None
    node: str | None
    device: str | None  # the device the rank computes on, as it told torch
    step_count: int  # steps the numbers rest on (after warm-up)
    step_time_s: float | None  # mean per step
    data_wait_s: float | None  # mean per step
    data_wait_share_pct: float | None  # total data wait over total wall time


def rank_summaries(run: Run) -> list[RankStepSummary]:
    infos = {info.rank: info for info in run.ranks.ranks} if run.ranks is not None else {}
    out = []
    for rank, steps in rank_step_lists(run):
        numbers = step_numbers(steps)
        wait = numbers.part("data_wait") if numbers is not None else None
        info = infos.get(rank) if rank is not None else None
        out.append(
            RankStepSummary(
                rank=rank,
                node=info.node if info is not None else None,
                device=info.device if info is not None else None,
                step_count=window_of(steps).count,
                step_time_s=numbers.step_time_s if numbers is not None else None,
                data_wait_s=wait.time_s if wait is not None else None,
                data_wait_share_pct=wait.share_pct if wait is not None else None,
            )
        )
    return out


class StepBucket(msgspec.Struct):
    """One row of the step table or one point of the chart: a single step, or the mean of consecutive steps."""

    first_index: int
    last_index: int
    count: int
    start_s: float
    wall_s: float
    phases_s: dict[str, float]  # PhaseGroup.key -> seconds (mean over the bucket)
    fields_s: dict[str, float]  # Step phase field -> seconds (mean over the bucket)
    rank: int | None


def bucket_steps(steps: Sequence[Step], max_buckets: int) -> list[StepBucket]:
    """Group consecutive steps into at most `max_buckets` means, so a 10,000-step run stays a small file."""
    if not steps:
        return []
    per_bucket = -(-len(steps) // max_buckets)  # ceil division
    buckets = []
    for first in range(0, len(steps), per_bucket):
        chunk = steps[first : first + per_bucket]
        n = len(chunk)
        buckets.append(
            StepBucket(
                first_index=chunk[0].index,
                last_index=chunk[-1].index,
                count=n,
                start_s=chunk[0].start_s,
                wall_s=sum(s.wall_s for s in chunk) / n,
                phases_s={g.key: sum(group_s(s, g) for s in chunk) / n for g in PHASE_GROUPS},
                fields_s={f: sum(float(getattr(s, f)) for s in chunk) / n for f in STEP_PHASE_FIELDS},
                rank=chunk[0].rank,
            )
        )
    return buckets


class GpuPoint(msgspec.Struct):
    t_s: float
    gpu_util_pct: float | None  # mean of the bucket's samples
    memory_used_bytes: float | None  # peak of the bucket's samples: memory pressure is about the peak


def bucket_samples(samples: Sequence[GpuSample], max_points: int) -> list[GpuPoint]:
    ordered = placeable_samples(samples)
    if not ordered:
        return []
    per_bucket = -(-len(ordered) // max_points)
    points = []
    for first in range(0, len(ordered), per_bucket):
        chunk = ordered[first : first + per_bucket]
        utils = [s.gpu_util_pct for s in chunk if s.gpu_util_pct is not None and math.isfinite(s.gpu_util_pct)]
        mems = [s.memory_used_bytes for s in chunk if s.memory_used_bytes is not None]
        points.append(
            GpuPoint(
                t_s=chunk[0].t_s,
                gpu_util_pct=sum(utils) / len(utils) if utils else None,
                memory_used_bytes=float(max(mems)) if mems else None,
            )
        )
    return points


class GpuSummary(msgspec.Struct):
    """What the relationship diagram's GPU box says."""

    label: str | None  # "GPU 0: NVIDIA A100-SXM4-80GB"
    util_mean_pct: float | None
    util_source: str | None  # "NVML, 120 samples" | "profiler trace, busy time"
    memory_peak_bytes: int | None
    memory_total_bytes: int | None
    other_devices: int  # how many more GPUs the record has (shown as "+N more")


def model_device(model: ModelInfo | None) -> str | None:
    """The device holding most of the model's elements."""
    if model is None or not model.devices:
        return None
    return max(model.devices.items(), key=lambda kv: kv[1])[0]


def _track_for_device(tracks: Sequence[LabelledTrack], device: str | None) -> LabelledTrack:
    if device is not None and device.startswith("cuda:"):
        wanted = device.split(":", 1)[1]
        # The CUDA index (after CUDA_VISIBLE_DEVICES) when the sampler recorded it, else the NVML index.
        by_cuda = [t for t in tracks if str(t.track.cuda_index) == wanted]
        by_nvml = [t for t in tracks if str(t.track.index) == wanted]
        if by_cuda or by_nvml:
            return (by_cuda or by_nvml)[0]
    # No device named: the busiest GPU is the one the job ran on.
    return max(tracks, key=lambda t: gpu_util_mean_pct(t.track) or 0.0)


def track_memory_peak_bytes(track: GpuTrack) -> int | None:
    if track.summary.memory_used_max_bytes is not None:
        return track.summary.memory_used_max_bytes
    mems = [s.memory_used_bytes for s in track.samples if s.memory_used_bytes is not None]
    return max(mems) if mems else None


def gpu_summary(run: Run, device: str | None) -> GpuSummary:
    tracks = gpu_tracks(run)
    if tracks:
        chosen = _track_for_device(tracks, device)
        track = chosen.track
        util = gpu_util_mean_pct(track)
        state = " (lost)" if track.lost else f" ({track.error})" if track.error else ""
        return GpuSummary(
            label=chosen.label + (f": {track.name}" if track.name else "") + state,
            util_mean_pct=util,
            util_source=f"NVML, {counted(gpu_util_readings(track), 'reading')}" if util is not None else None,
            memory_peak_bytes=track_memory_peak_bytes(track),
            memory_total_bytes=track.memory_total_bytes,
            other_devices=len(tracks) - 1,
        )
    if run.trace is not None and run.trace.ranks:
        first = run.trace.ranks[0]
        return GpuSummary(
            label=first.device,
            util_mean_pct=first.busy_pct,
            util_source="profiler trace, busy time" if first.busy_pct is not None else None,
            memory_peak_bytes=None,
            memory_total_bytes=None,
            other_devices=len(run.trace.ranks) - 1,
        )
    label = None
    total = None
    if run.environment is not None and run.environment.driver.devices:
        dev = run.environment.driver.devices[0]
        label, total = f"GPU {dev.index}: {dev.name}", dev.memory_total_bytes
    return GpuSummary(label, None, None, None, total, 0)


def run_end_s(run: Run) -> float:
    """The last time the record saw anything: the end of the last step, or the last GPU sample."""
    ends = [0.0]
    ends.extend(s.start_s + s.wall_s for s in all_steps(run))
    ends.extend(s.t_s for t in gpu_tracks(run) for s in placeable_samples(t.track.samples))
    return max(ends)


def run_start_s(run: Run) -> float:
    starts = [s.start_s for s in all_steps(run)]
    starts.extend(s.t_s for t in gpu_tracks(run) for s in placeable_samples(t.track.samples))
    return min(starts, default=0.0)
