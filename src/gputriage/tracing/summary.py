"""One trace file -> one RankTrace (docs/contract.md's fields plus the evidence the rules read)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from gputriage import outdir
from gputriage.record.trace import RankTrace
from gputriage.tracing import activity, analysis
from gputriage.tracing.collect import COMM
from gputriage.tracing.prepared import DATALOADER_RE, Prepared
from gputriage.tracing.split import collect

_MAX_STEP_TIMES = 1000


@dataclass
class Collectives:
    """A rank's communication kernels (start, end) in time order, in ns: what multi-rank straggler checks need."""

    start_ns: list[int] = field(default_factory=list)
    end_ns: list[int] = field(default_factory=list)


def analyse_trace(path: Path, rank_hint: int | None = None, jobs: int | None = 1) -> RankTrace:
    """Analyse one Kineto trace file (`.json` or `.json.gz`); see analyse_trace_with_collectives."""
    return analyse_trace_with_collectives(path, rank_hint, jobs)[0]


def analyse_trace_with_collectives(
    path: Path, rank_hint: int | None = None, jobs: int | None = 1
) -> tuple[RankTrace, Collectives]:
    """Analyse one Kineto trace file (`.json` or `.json.gz`) in one streaming pass.

    This is the entry point for `gputriage trace` and for `run --trace`. Memory holds a few integers per GPU, runtime
    and CPU event, never the JSON.

    Args:
        path: the trace file.
        rank_hint: the rank to report when the trace has no distributedInfo (e.g. from a folder of rank files).
        jobs: processes for one large plain-JSON file (None: one per CPU core; 1: this process only).

    Raises:
        InputError: the file cannot be read as a PyTorch profiler trace.
    """
    columns, meta = collect(path, jobs)
    prepared = Prepared(columns)
    return summarise(prepared, meta, path, rank_hint), _collectives(prepared)


def _collectives(p: Prepared) -> Collectives:
    g = p.col.gpu
    rows = np.flatnonzero(p.gpu_kind == COMM)
    rows = rows[np.argsort(g.ts[rows], kind="stable")]
    return Collectives(g.ts[rows].tolist(), g.end[rows].tolist())


def summarise(p: Prepared, meta: dict[str, Any], path: Path, rank_hint: int | None = None) -> RankTrace:
    dist = meta.get("distributedInfo") if isinstance(meta.get("distributedInfo"), dict) else {}
    rank = _int(dist.get("rank")) if dist else None
    out = RankTrace(
        rank=rank if rank is not None else rank_hint,
        device=_device_name(meta),
        path=str(path),
        world_size=_int(dist.get("world_size")) if dist else None,
        backend=str(dist["backend"]) if dist and dist.get("backend") is not None else None,
        events=p.col.events_total,
        events_dropped=p.col.events_dropped,
        gpu_events=len(p.col.gpu),
        cpu_ops=p.cpu_op_count,
        launch_calls=len(p.launch_durations_ns),
    )
    _fill_temporal(p, out)
    steps = analysis.steps(p)
    step_count = len(steps.spans) if steps is not None else 0
    if steps is not None:
        out.steps = step_count
        out.step_time_us = round(steps.step_time_us, 3)
        out.step_times_us = [
            round(float(e - s) / 1000, 3) for s, e in zip(steps.spans.start, steps.spans.end, strict=True)
        ][:_MAX_STEP_TIMES]
        out.step_breakdown = steps.breakdown
        out.busy_pct_of_steps = steps.kernel_pct if len(p.col.gpu) else None
        out.dataloader_pct_of_step = steps.dataloader_pct
        out.dataloader_us_per_step = round(steps.dataloader_us_per_step, 3)
    out.dataloader_where = _dataloader_where(p)
    spans = steps.spans if steps is not None else None
    out.syncs = activity.syncs(p, spans)
    out.copies = activity.copies(p)
    out.launches = activity.launches(p, step_count)
    out.graphs = activity.graphs(p) if len(p.col.gpu) else None
    out.comm = activity.comm(p)
    out.cpu_compute = activity.cpu_compute(p, spans)
    out.gaps = activity.gaps(p, spans)
    return out


def _fill_temporal(p: Prepared, out: RankTrace) -> None:
    t = analysis.temporal(p)
    if t is None:
        return
    out.window_us = round(t.window_ns / 1000, 3)
    out.busy_pct = analysis.pct(t.busy_ns, t.window_ns)
    idle = analysis.pct(t.window_ns - t.busy_ns, t.window_ns)
    out.idle_pct = round(100.0 - out.busy_pct, 3) if out.busy_pct is not None else idle
    out.compute_pct = analysis.pct(t.compute_ns, t.window_ns)
    if out.busy_pct is not None and out.compute_pct is not None:
        out.non_compute_pct = round(out.busy_pct - out.compute_pct, 3)
    out.comm_pct = analysis.pct(t.comm_ns, t.window_ns)
    out.memory_pct = analysis.pct(t.memory_ns, t.window_ns)
    out.idle_breakdown, out.streams = analysis.idle_breakdown(p)


def _dataloader_where(p: Prepared) -> str | None:
    loader = p.cpu_named(DATALOADER_RE, main_only=True)
    if not len(loader):
        return None
    return p.where_at(int(loader.lane[0]), int(loader.ts[0]), int(loader.end[0]))


def _device_name(meta: dict[str, Any]) -> str | None:
    props = meta.get("deviceProperties")
    if isinstance(props, list):
        names = [str(d["name"]) for d in props if isinstance(d, dict) and d.get("name")]
        if names:
            return names[0]
    return None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None


def rank_from_filename(path: Path) -> int | None:
    return outdir.trace_rank(path)
