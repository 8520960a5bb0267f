"""Several traces at once: one process per rank file (bounded memory each), then the ranks compared."""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

import msgspec
import numpy as np

from gputriage import outdir
from gputriage.errors import InputError, NotATrace
from gputriage.record.trace import RankImbalance, RankTrace, TraceSection
from gputriage.stdlib import shlex
from gputriage.tracing.activity import Collectives
from gputriage.tracing.limits import DEFAULT_LIMITS, TraceLimits
from gputriage.tracing.pool import in_processes
from gputriage.tracing.reader import TraceHeader, events_start, parse_header_object
from gputriage.tracing.split import Begun
from gputriage.tracing.summary import analyse_trace_with_collectives, rank_from_filename

_TRACE_SUFFIXES = (".json", ".json.gz")
# tensorboard_trace_handler names each file "{worker}.{time in ms}.pt.trace.json", worker = "{hostname}_{pid}":
# the ranks of one job differ in the worker part, which can be any hostname.
_HANDLER_NAME = re.compile(r"^.+(\.\d+\.pt\.trace\.json(?:\.gz)?)$", re.IGNORECASE)
_SHOWN = 4  # files named in a refusal


def _is_trace_name(path: Path) -> bool:
    return path.name.lower().endswith(_TRACE_SUFFIXES) and not outdir.is_own_output(path)


def trace_files(paths: list[Path]) -> list[Path]:
    """Expand folders into the trace files directly inside them, keeping files as given.

    A folder is one job's traces side by side, as tensorboard_trace_handler and `run --trace` write them; its
    subfolders are other runs and are not entered.

    Raises:
        InputError: a path does not exist, or a folder holds no `.json`/`.json.gz` file.
    """
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            # not only regular files: a FIFO or a dangling link named like a rank's trace is then skipped with a
            # note (reading refuses it), where it was left out without a word and the job looked one rank short
            inside = sorted(p for p in path.iterdir() if _is_trace_name(p) and not p.is_dir())
            if not inside:
                raise InputError(_empty_folder(path))
            found.extend(inside)
        elif path.exists() or path.is_symlink():
            found.append(path)
        else:
            raise InputError(f"{path} does not exist")
    _no_file_twice(found)
    return found


def _no_file_twice(files: list[Path]) -> None:
    """The same file named twice (`trace a.json a.json`, or a file and its folder) is a slip, not two ranks."""
    seen: dict[Path, Path] = {}
    for path in files:
        try:
            key = path.resolve()
        except (OSError, RuntimeError):  # RuntimeError: a symlink loop, on Python before 3.13
            continue
        if key in seen:
            twice = f"{path}" if str(seen[key]) == str(path) else f"{seen[key]} (as {path})"
            raise InputError(f"{twice} is given twice: pass each trace once")
        seen[key] = path


def _empty_folder(path: Path) -> str:
    below = sorted({p.parent for p in path.glob("*/*") if _is_trace_name(p) and p.is_file()})
    own = sorted(p.name for p in path.iterdir() if p.name.lower().endswith(_TRACE_SUFFIXES) and outdir.is_own_output(p))
    if not below and own:
        return _only_own_files(path, own)
    if not below:
        return f"{path} holds no trace file (.json or .json.gz)"
    names = ", ".join(p.name for p in below[:_SHOWN]) + (", ..." if len(below) > _SHOWN else "")
    return f"{path} holds no trace file itself; its subfolders do ({names}): pass the folder of one job"


def _only_own_files(path: Path, own: list[str]) -> str:
    """A folder of gputriage's own --out files: what they are and the command that reads them, not "no trace file"."""
    names = ", ".join(own[:_SHOWN]) + (", ..." if len(own) > _SHOWN else "")
    said = f"{path} holds no profiler trace, only gputriage's own report files ({names})"
    report_dir = path.parent if path.name == outdir.RANKS_DIR else path
    if outdir.report_json(report_dir).is_file() or (report_dir / outdir.RANKS_DIR).is_dir():
        return f"{said}; read them with: gputriage report {shlex.quote(str(report_dir))}"
    return said


def name_pattern(name: str) -> str:
    """A file name with its numbers (and a tensorboard worker name) blanked: the same for every rank of one run,
    whether or not it was compressed (`rank-0.json` beside `rank-1.json.gz`)."""
    name = name[:-3] if name.lower().endswith(".gz") else name
    handler = _HANDLER_NAME.match(name)
    return re.sub(r"\d+", "#", "*" + handler.group(1) if handler else name)


class _Member(msgspec.Struct):
    path: Path
    rank: int | None
    world_size: int | None
    from_header: bool


def one_job(
    files: list[Path],
    limits: TraceLimits = DEFAULT_LIMITS,
    skippable: frozenset[Path] = frozenset(),
    skipped: list[str] | None = None,
) -> list[tuple[Path, int | None]]:
    """The files as the ranks of one job, each with its rank; refuse a set that is not one job's ranks.

    One job: the same world size, one file per rank, and (for files whose header does not say their rank) the
    file-naming pattern of one run. Three unrelated traces are not ranks 0, 1 and 2.

    Raises:
        InputError: the files are not the ranks of one job (the message names why and which files).
    """
    if len(files) == 1:
        return [(files[0], rank_from_filename(files[0]))]
    members = [m for f in files if (m := _identify(f, limits, f in skippable, skipped)) is not None]
    if not members:  # every file was skipped: say why of the first one
        _identify(files[0], limits)
    if len(members) == 1:
        return [(members[0].path, members[0].rank)]
    worlds = sorted({m.world_size for m in members if m.world_size is not None})
    if len(worlds) > 1:
        groups = "; ".join(f"world size {w}: {_names(m.path for m in members if m.world_size == w)}" for w in worlds)
        raise InputError(f"these traces come from jobs of different sizes ({groups}): pass the traces of one job")
    unnamed = [m for m in members if not m.from_header]
    patterns = sorted({name_pattern(m.path.name) for m in unnamed})
    if len(patterns) > 1:
        raise InputError(
            f"these traces are named after {len(patterns)} different runs ({', '.join(patterns[:_SHOWN])}) and do not "
            "say their rank: pass the traces of one job"
        )
    _check_ranks(members, worlds[0] if worlds else None)
    return [(m.path, m.rank) for m in members]


def _check_ranks(members: list[_Member], world: int | None) -> None:
    unknown = [m.path for m in members if m.rank is None]
    if unknown:
        raise InputError(
            f"cannot tell which rank {_names(unknown)} is (no distributedInfo with a valid rank, no rank in the file "
            "name): pass one trace, or the traces of one job"
        )
    by_rank: dict[int, list[Path]] = {}
    for m in members:
        assert m.rank is not None
        by_rank.setdefault(m.rank, []).append(m.path)
    for rank, paths in sorted(by_rank.items()):
        if len(paths) > 1:
            raise InputError(
                f"rank {rank} appears in {len(paths)} traces ({_names(paths)}): they are not the ranks of one job "
                "(several profiling windows, several runs, or a copy); pass one of them"
            )
        if world is not None and rank >= world:
            raise InputError(f"{_names(paths)} says rank {rank}, outside its job's world size {world}")


def _identify(
    path: Path, limits: TraceLimits, skippable: bool = False, skipped: list[str] | None = None
) -> _Member | None:
    """The file's rank and world size; None for a file found in a folder that is not a trace at all (config.json
    beside the rank traces): it is skipped, and `skipped` says so."""
    try:
        header = events_start(path, limits).header
    except NotATrace as exc:
        if not skippable:
            raise
        if skipped is not None:
            skipped.append(f"skipped {path.name}: {str(exc).removeprefix(str(path)).strip()}")
        return None
    if header.rank is None and not path.name.lower().endswith(".gz"):
        header.fill_from(_tail_header(path))  # `json.dump` of a loaded trace puts distributedInfo after the events
    if header.rank is not None:
        return _Member(path, header.rank, header.world_size, from_header=True)
    return _Member(path, rank_from_filename(path), header.world_size, from_header=False)


_TAIL_BYTES = 64 << 10  # the end of a plain trace read for a distributedInfo written after the events
_TRAILING_INFO = re.compile(rb'"distributedInfo"\s*:\s*(\{[^{}]{0,4096}\})')


def _tail_header(path: Path) -> TraceHeader:
    """The distributedInfo among the keys after the events, from the file's last 64 KiB; empty when there is none
    (a compressed file's end is not read: the analysis reads its tail, and the rank comes from its name)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - _TAIL_BYTES))
            end = f.read(_TAIL_BYTES)
    except OSError:
        return TraceHeader()
    found = list(_TRAILING_INFO.finditer(end))
    if not found:
        return TraceHeader()
    return parse_header_object(b'{"distributedInfo":' + found[-1].group(1) + b"}", "distributedInfo unreadable")


def _names(paths: Iterable[Path]) -> str:
    """The files by name, or by path where two share a name (a copy of one rank's trace in another folder)."""
    paths = list(paths)
    by_name = [p.name for p in paths]
    names = by_name if len(set(by_name)) == len(by_name) else [str(p) for p in paths]
    return ", ".join(names[:_SHOWN]) + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _analyse_one(job: tuple[Path, int | None, TraceLimits]) -> tuple[RankTrace, Collectives]:
    path, rank, limits = job
    return analyse_trace_with_collectives(path, rank, jobs=1, limits=limits)


def analyse_paths(
    paths: list[Path], jobs: int | None = None, limits: TraceLimits = DEFAULT_LIMITS, begun: Begun | None = None
) -> TraceSection:
    """Analyse trace files and folders of per-rank traces; several files run in parallel processes.

    Args:
        paths: trace files, or folders of them (one file per rank of one job).
        jobs: worker processes; default: one per CPU core (one per file; for a single large plain-JSON file,
            one per byte range).
        limits: the bounds on what one file may cost (limits.py).
        begun: pass one over a single file, already started (split.begin()); unused for several files.

    Raises:
        InputError: any file is not a readable trace, or the files are not the ranks of one job.
    """
    files = trace_files(paths)
    skipped: list[str] = []
    work = one_job(files, limits, skippable=frozenset(f for f in files if f not in paths), skipped=skipped)
    if len(work) == 1:  # one file: its byte ranges are what runs in parallel
        results = [analyse_trace_with_collectives(work[0][0], work[0][1], jobs=jobs, limits=limits, begun=begun)]
    else:
        workers = max(1, min(jobs or os.cpu_count() or 1, len(work)))
        results = in_processes(_analyse_one, [(p, r, limits) for p, r in work], workers)
    results.sort(key=lambda rc: rc[0].rank if rc[0].rank is not None else -1)
    section = TraceSection(ranks=[r for r, _ in results], skipped=skipped)
    models = sorted({r.device for r, _ in results if r.device})
    if len(models) > 1:
        # a job's ranks share one GPU model: these are traces of different jobs or machines, and one rank being
        # slower than another says nothing of the job (no straggler is named)
        section.ranks[0].notes.append(
            f"the ranks ran on different GPU models ({', '.join(models)}): the traces of one job share one, so they "
            "are not compared with each other (no rank is named a straggler)"
        )
    elif len(results) > 1:
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
