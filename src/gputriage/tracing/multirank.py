"""Several traces at once: one process per rank file (bounded memory each), then the ranks compared."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from gputriage.errors import InputError
from gputriage.merge import RANK_FILE, RANKS_DIR
from gputriage.record.trace import RankImbalance, RankTrace, TraceSection
from gputriage.tracing.activity import Collectives
from gputriage.tracing.pool import in_processes
from gputriage.tracing.summary import analyse_trace_with_collectives, rank_from_filename

_TRACE_SUFFIXES = (".json", ".json.gz")
# gputriage's own --out files, which may sit in the same folder as the traces they came from.
_OWN_OUTPUTS = frozenset({"report.json", "timeline.json"})


def _own_output(path: Path) -> bool:
    """gputriage's own --out files: the reports, and the per-rank run records under ranks/ (not traces)."""
    return path.name in _OWN_OUTPUTS or (path.parent.name == RANKS_DIR and RANK_FILE.match(path.name) is not None)


def trace_files(paths: list[Path]) -> list[Path]:
    """Expand folders into the trace files they hold (recursively), keeping files as given.

    Raises:
        InputError: a path does not exist, or a folder holds no `.json`/`.json.gz` file.
    """
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(
                p
                for p in path.rglob("*")
                if p.is_file() and p.name.lower().endswith(_TRACE_SUFFIXES) and not _own_output(p)
            )
            if not inside:
                raise InputError(f"{path} holds no trace file (.json or .json.gz)")
            found.extend(inside)
        elif path.exists():
            found.append(path)
        else:
            raise InputError(f"{path} does not exist")
    return found


def _analyse_one(job: tuple[Path, int | None]) -> tuple[RankTrace, Collectives]:
    return analyse_trace_with_collectives(*job, jobs=1)


def analyse_paths(paths: list[Path], jobs: int | None = None) -> TraceSection:
    """Analyse trace files and folders of per-rank traces; several files run in parallel processes.

    Args:
        paths: trace files, or folders of them (one file per rank).
        jobs: worker processes; default: one per CPU core (one per file; for a single large plain-JSON file,
            one per byte range).

    Raises:
        InputError: any file is not a readable trace (the message names it).
    """
    files = trace_files(paths)
    work = [(f, rank_from_filename(f)) for f in files]
    if len(work) == 1:  # one file: its byte ranges are what runs in parallel
        results = [analyse_trace_with_collectives(*work[0], jobs=jobs)]
    else:
        workers = max(1, min(jobs or os.cpu_count() or 1, len(work)))
        results = in_processes(_analyse_one, work, workers)
    for index, (rank, _) in enumerate(results):
        if rank.rank is None and len(results) > 1:
            rank.rank = index
    results.sort(key=lambda rc: rc[0].rank if rc[0].rank is not None else -1)
    section = TraceSection(ranks=[r for r, _ in results])
    if len(results) > 1:
        section.imbalance = imbalance([r for r, _ in results], [c for _, c in results])
    return section


def imbalance(ranks: list[RankTrace], collectives: list[Collectives]) -> RankImbalance:
    """Compare ranks: busy and step-time spread, and who arrives last at the collectives.

    Collectives are matched by order (the i-th communication kernel of every rank is the same collective). Clocks
    of different hosts disagree, but a collective ends at the same instant on every rank, so each rank's clock
    offset is the median difference of its collective end times; the aligned start times then say who was late.
    """
    busy = [r.busy_pct for r in ranks if r.busy_pct is not None]
    step = [r.step_time_us for r in ranks if r.step_time_us is not None]
    lag_us, compared = _collective_lag_us(collectives)
    straggler = lag_rank = None
    lag_pct = None
    if lag_us is not None:
        for r, lag in zip(ranks, lag_us, strict=True):
            r.collective_lag_us = round(float(lag), 3)
        worst = int(np.argmax(lag_us))
        straggler, lag_rank = ranks[worst].rank, round(float(lag_us[worst]), 3)
        if step:
            lag_pct = round(100.0 * lag_rank / float(np.median(step)), 3)
    return RankImbalance(
        ranks=len(ranks),
        busy_pct_min=min(busy) if busy else None,
        busy_pct_max=max(busy) if busy else None,
        busy_spread_pct=round(max(busy) - min(busy), 3) if busy else None,
        step_time_us_min=min(step) if step else None,
        step_time_us_max=max(step) if step else None,
        step_time_spread_pct=round(100.0 * (max(step) - min(step)) / min(step), 3) if step and min(step) > 0 else None,
        collectives_compared=compared,
        straggler_rank=straggler,
        straggler_lag_us=lag_rank,
        straggler_lag_pct_of_step=lag_pct,
    )


def _collective_lag_us(collectives: list[Collectives]) -> tuple[np.ndarray | None, int]:
    count = min(len(c.start_ns) for c in collectives)
    if count == 0:
        return None, 0
    starts = np.array([c.start_ns[:count] for c in collectives], dtype=np.int64)
    ends = np.array([c.end_ns[:count] for c in collectives], dtype=np.int64)
    offset = np.median(ends - ends[0], axis=1)
    aligned = starts - offset[:, None]
    lag = aligned - aligned.min(axis=0)
    return np.median(lag, axis=1) / 1000.0, count
