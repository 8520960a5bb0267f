"""The end of one rank of a torchrun job: write its record, and merge the job's report when the job is complete.

Protocol, for ranks that share `--out DIR` (one filesystem, or one folder per node merged later; names in
`gputriage.outdir`):
1. every rank writes `DIR/ranks/rank-NNNNN.json` atomically (write a temporary file, then rename);
2. a rank that then sees all `world_size` records merges them into `DIR/report.json` and the other report files,
   unless that report already holds every record as it is now (another rank merged after the last one was written:
   the job's report is shown once, by the rank that merged it); rank 0 also waits a few seconds for the others and,
   if some never come (killed hard), merges what is there;
3. merging is idempotent and guarded by a lock file; whoever releases the lock re-checks for records that arrived
   meanwhile, so the last record written always ends up in the report. A lock whose holder is dead (its pid, on this
   host) is taken over at once;
4. `gputriage report DIR` completes a merge nobody finished (every rank killed, or the merging one): it writes the
   merged report into DIR when DIR's report is missing or older than its rank records, the absent ranks listed as
   missing; `gputriage report DIR [DIR2 ...]` merges per-node folders without a shared filesystem.

Under `gputriage run` this runs in the report worker (see run_worker.py), which ignores torchrun's SIGTERM: a merge
that has started finishes even when the rank's own process is stopped.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import TextIO

import msgspec

from gputriage import envnames, outdir
from gputriage.diagnosis import Diagnosis, diagnose
from gputriage.record import Run
from gputriage.record.merge import load_job, own_gpu_tracks
from gputriage.record.run import encode_run
from gputriage.report.output import OutputOptions, emit, write_files

# Rank 0 waits this long for the other ranks' records before merging what it has (a killed rank never writes).
DEFAULT_MERGE_WAIT_S = 5.0
POLL_S = 0.1
# A rank file older than the writer's own start by more than this belongs to an earlier job in the same folder.
STALE_RECORD_SLACK_S = 300.0


def write_rank_record(run: Run, out_dir: Path) -> Path:
    """Write this rank's record atomically, so a reader never sees half a file."""
    if run.rank_info is None:
        raise ValueError("write_rank_record needs a run with rank_info")
    # The other GPUs of the node are recorded by the ranks that use them: 8 ranks need not write 8 copies each.
    with_sections = msgspec.structs.replace(run.rank_info, gpu=run.gpu)
    slim = msgspec.structs.replace(run, gpu=own_gpu_tracks(with_sections, keep_samples=True))
    return outdir.atomic_write(outdir.rank_record_path(out_dir, run.rank_info.rank), encode_run(slim))


class RankOutcome(msgspec.Struct):
    record_path: Path
    report_path: Path | None = None  # set when this rank wrote the merged report
    diagnosis: Diagnosis | None = None  # the merged job's, when this rank wrote it
    missing: list[int] = msgspec.field(default_factory=list)  # ranks absent from the report this rank wrote
    merged_by_another: bool = False  # the report already held every record: another rank merged and showed it


def finish_rank(run: Run, out_dir: Path, wait_s: float | None = None) -> RankOutcome:
    """Write this rank's record, and merge the job's report when all ranks have written theirs.

    Rank 0 waits up to `wait_s` (GPUTRIAGE_MERGE_WAIT_S) for the others, then merges what is there. A rank whose job
    ended abnormally (crash, signal) merges what is there at once: its peers may be blocked on it, so waiting would
    only delay them; they merge again when they write theirs.
    """
    info = run.rank_info
    if info is None:
        raise ValueError("finish_rank needs a run with rank_info")
    record = write_rank_record(run, out_dir)
    if wait_s is None:
        wait_s = float(os.environ.get(envnames.MERGE_WAIT_S) or DEFAULT_MERGE_WAIT_S)  # checked by commands/settings.py
    abnormal = run.process is not None and (bool(run.process.exit_code) or run.process.signal is not None)
    since_s = run.created_at_s - STALE_RECORD_SLACK_S
    deadline = time.monotonic() + (wait_s if info.rank == 0 and not abnormal else 0.0)
    present = _present(out_dir, since_s, info.world_size)
    while len(present) < info.world_size and time.monotonic() < deadline:
        time.sleep(POLL_S)
        present = _present(out_dir, since_s, info.world_size)
    if len(present) < info.world_size and info.rank != 0 and not abnormal:
        return RankOutcome(record)
    return _merge_until_settled(out_dir, record)


def report_rank(run: Run, out_dir: Path, stream: TextIO, verbose: bool = False) -> None:
    """`gputriage run` under torchrun: record this rank, merge when complete, and show the job's report once.

    The rank that writes the merged report renders it on its stderr; the others print one line. Nothing here may
    change the job's exit code, so a failure is one line on stderr too.
    """
    from gputriage.collectors.distributed import rank_from_env

    if run.rank_info is None:  # the distributed observer failed: its place in the job is still in the environment
        run.rank_info = rank_from_env()
    rank = run.rank_info.rank if run.rank_info is not None else "?"
    try:
        outcome = finish_rank(run, out_dir)
    except Exception as exc:  # a full disk or a broken record must not replace the job's own exit code
        print(f"gputriage: error: rank {rank} could not write its record into {out_dir}: {exc}", file=stream)
        return
    if outcome.diagnosis is None:
        written = f"gputriage: rank {rank}: record written to {outdir.shown_path(outcome.record_path)}"
        if outcome.merged_by_another:
            report = outdir.shown_path(outdir.report_json(out_dir))
            written += f"; the job's report, merged by another rank, is in {report}"
        print(written, file=stream)
        return
    emit(outcome.diagnosis, OutputOptions(terminal_stream=stream, verbose=verbose))
    absent = f"; ranks {outcome.missing} left no record (yet)" if outcome.missing else ""
    report = outdir.shown_path(outcome.report_path) if outcome.report_path is not None else "?"
    print(f"gputriage: rank {rank} merged the job's report into {report}{absent}", file=stream)


def _present(out_dir: Path, since_s: float, world_size: int) -> set[int]:
    """Ranks of this job whose record is there. Names first: on a shared filesystem at 1,024 ranks, a stat per file
    per rank would be a million metadata calls, so files are only stat'ed (to skip an older job's) once enough
    names are there."""
    named = {rank: path for path in outdir.rank_files(out_dir) if (rank := outdir.rank_of_record(path)) is not None}
    named = {rank: path for rank, path in named.items() if rank < world_size}
    if len(named) < world_size:
        return set(named)
    ranks = set()
    for rank, path in named.items():
        with contextlib.suppress(OSError):
            if path.stat().st_mtime >= since_s:
                ranks.add(rank)
    return ranks


def _merge_until_settled(out_dir: Path, record: Path) -> RankOutcome:
    outcome = RankOutcome(record)
    while True:
        take_over_dead_lock(out_dir)
        with outdir.merge_lock(out_dir) as lock:
            if lock is None:  # another rank is merging; it re-checks for late records after releasing
                return msgspec.structs.replace(outcome, merged_by_another=outcome.diagnosis is None)
            before = _signature(out_dir)
            if _report_is_current(out_dir, before):
                return msgspec.structs.replace(outcome, merged_by_another=outcome.diagnosis is None)
            merged = load_job([out_dir])
            if merged is None or merged.ranks is None:
                return outcome
            diagnosis = write_merged(merged, out_dir)
            outcome = RankOutcome(record, outdir.report_json(out_dir), diagnosis, merged.ranks.missing)
        # A record written (or rewritten) while we merged, by a rank that found the lock taken: merge once more.
        if _signature(out_dir) == before:
            return outcome


class _MergedRank(msgspec.Struct):
    rank: int


class _MergedRanks(msgspec.Struct):
    ranks: list[_MergedRank] = []


class _MergedReport(msgspec.Struct):
    ranks: _MergedRanks | None = None


def _report_is_current(out_dir: Path, signature: set[tuple[str, int]]) -> bool:
    """Whether DIR/report.json merges every rank record there, each as it is now (`signature`, their names and
    mtimes, already read): written after the newest record, and listing exactly the ranks that have one. Anything
    unreadable or odd says no, and the rank merges again (the merge is idempotent: at worst the report is shown
    twice)."""
    if not signature:
        return False
    report = outdir.report_json(out_dir)
    try:
        report_ns = report.stat().st_mtime_ns
        doc = msgspec.json.decode(report.read_bytes(), type=_MergedReport)
    except (OSError, msgspec.DecodeError):
        return False
    if doc.ranks is None:
        return False
    recorded = {outdir.rank_of_record(Path(name)) for name, _ in signature}
    newest_ns = max(mtime_ns for _, mtime_ns in signature)
    return {r.rank for r in doc.ranks.ranks} == recorded and newest_ns <= report_ns


def take_over_dead_lock(out_dir: Path) -> None:
    """Remove the merge lock when the process that holds it is gone (a merging rank SIGKILLed by torchrun): waiting
    for the lock to go stale would leave the job without its report.

    The lock holds its pid, not its host: on a shared filesystem a live merger on another node whose pid is free
    here loses its lock, and both merges run, each writing the whole report atomically: the same report, twice.
    """
    lock = out_dir / outdir.LOCK_NAME
    try:
        pid = int(lock.read_text().strip() or "0")
    except (OSError, ValueError):
        return
    if pid <= 0 or pid == os.getpid() or _alive(pid):
        return
    with contextlib.suppress(OSError):
        lock.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, and is someone else's
        return True
    return True


def _signature(out_dir: Path) -> set[tuple[str, int]]:
    found = set()
    for path in outdir.rank_files(out_dir):
        with contextlib.suppress(OSError):
            found.add((path.name, path.stat().st_mtime_ns))
    return found


def complete_job_report(folder: Path) -> Path | None:
    """Write the merged report of the rank records in `folder` if no merge did (report.json missing, or older than
    the newest rank record). Returns the report's path when it wrote it."""
    records = outdir.rank_files(folder)
    if not records:
        return None
    report = outdir.report_json(folder)
    newest_s = max((p.stat().st_mtime for p in records if p.exists()), default=0.0)
    if report.exists() and report.stat().st_mtime >= newest_s:
        return None
    take_over_dead_lock(folder)
    with outdir.merge_lock(folder) as lock:
        if lock is None:
            return None  # a rank is merging right now
        merged = load_job([folder])
        if merged is None:
            return None
        write_merged(merged, folder)
    return report


def write_merged(merged: Run, out_dir: Path) -> Diagnosis:
    """Diagnose the merged run and write every report file, each one atomically."""
    diagnosis = diagnose(merged)
    write_files(diagnosis, out_dir)
    return diagnosis
