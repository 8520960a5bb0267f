"""Merge per-rank records into one report, through files only: gputriage never issues a collective.

Protocol, for ranks that share `--out DIR` (one filesystem, or one folder per node merged later):
1. every rank writes `DIR/ranks/rank-NNNNN.json` atomically (write a temporary file, then rename);
2. a rank that then sees all `world_size` records merges them into `DIR/report.json` and the other report files;
   rank 0 also waits a few seconds for the others and, if some never come (killed hard), merges what is there;
3. merging is idempotent and guarded by a lock file; whoever releases the lock re-checks for records that arrived
   meanwhile, so the last record written always ends up in the report;
4. `gputriage report DIR [DIR2 ...]` merges again by hand (per-node folders without a shared filesystem).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gputriage.errors import InputError
from gputriage.findings import Finding, root_cause_order
from gputriage.record import Run, load_run, save_run
from gputriage.record.gpu import GpuSection
from gputriage.record.ranks import RANK_SECTIONS, RankInfo, RanksSection

if TYPE_CHECKING:
    from gputriage.diagnosis import Diagnosis

RANKS_DIR = "ranks"
RANK_FILE = re.compile(r"^rank-(\d+)\.json$")
MERGE_WAIT_ENV = "GPUTRIAGE_MERGE_WAIT_S"
# Rank 0 waits this long for the other ranks' records before merging what it has (a killed rank never writes).
DEFAULT_MERGE_WAIT_S = 5.0
POLL_S = 0.1
# A lock older than this was left by a merger that was killed; the next merger takes it over.
STALE_LOCK_S = 120.0
# A rank file older than the writer's own start by more than this belongs to an earlier job in the same folder.
STALE_RECORD_SLACK_S = 300.0
LOCK_NAME = ".merge.lock"


def rank_record_path(out_dir: Path, rank: int) -> Path:
    return out_dir / RANKS_DIR / f"rank-{rank:05d}.json"


def write_rank_record(run: Run, out_dir: Path) -> Path:
    """Write this rank's record atomically, so a reader never sees half a file."""
    if run.rank_info is None:
        raise ValueError("write_rank_record needs a run with rank_info")
    path = rank_record_path(out_dir, run.rank_info.rank)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    # The other GPUs of the node are recorded by the ranks that use them: 8 ranks need not write 8 copies each.
    with_sections = dataclasses.replace(run.rank_info, gpu=run.gpu)
    save_run(dataclasses.replace(run, gpu=_own_gpu_tracks(with_sections, keep_samples=True)), tmp)
    tmp.replace(path)
    return path


# --- the merge itself (pure: records in, one Run out) ----------------------------------------------------------------


def merge_runs(records: Sequence[Run], sources: Sequence[str] = ()) -> Run:
    """One Run for the whole job: the lowest rank's sections at the top, every rank's own in `ranks`.

    The top level stays a complete run (renderers and the ladder read it); the per-rank sections let the rules run
    again on each rank of a saved report.
    """
    ranked = sorted((r for r in records if r.rank_info is not None), key=_rank_of)
    if not ranked:
        raise InputError("no rank records to merge")
    return _assemble(ranked[0], [_rank_view(r) for r in ranked], sources)


def _rank_of(run: Run) -> int:
    return run.rank_info.rank if run.rank_info is not None else -1


def _rank_view(rec: Run) -> RankInfo:
    """The rank's info with its sections moved in, slimmed for the merged view."""
    assert rec.rank_info is not None
    info = dataclasses.replace(rec.rank_info)
    for name in RANK_SECTIONS:
        setattr(info, name, getattr(rec, name))
    info.gpu = _own_gpu_tracks(info)
    if info.steps is not None:
        for step in info.steps.steps:
            step.rank = info.rank
    return info


def _assemble(first: Run, infos: list[RankInfo], sources: Sequence[str]) -> Run:
    assert first.rank_info is not None
    merged = Run(
        command=first.command,
        created_at_s=first.created_at_s,
        argv=list(first.argv),
        expect_device=first.expect_device,
    )
    for name in RANK_SECTIONS:
        setattr(merged, name, getattr(first, name))
    for info in infos:
        # Ranks of one node report the same environment; keep it once, at the top level.
        if info.environment == merged.environment:
            info.environment = None
    world_size = max(i.world_size for i in infos)
    merged.ranks = RanksSection(
        world_size=world_size,
        ranks=sorted(infos, key=lambda i: i.rank),
        missing=sorted(set(range(world_size)) - {i.rank for i in infos}),
        job_id=first.rank_info.job_id,
        nodes=sorted({i.node for i in infos if i.node}),
        sources=list(sources),
    )
    return merged


def _own_gpu_tracks(info: RankInfo, keep_samples: bool = False) -> GpuSection | None:
    """The rank's share of its node's GPU tracks; without the display samples unless asked (rules read summaries).

    Every rank samples every GPU it can see, so the same 8 tracks would come from each of a node's 8 ranks. Each rank
    keeps its own device's track; local rank 0 also keeps the node's others (the idle GPUs are evidence too). The
    merged report's top level keeps the first rank's section, samples included, for the charts.
    """
    if info.gpu is None:
        return None
    keep_all = info.local_rank in (0, None)
    own_index = _cuda_index(info.device)
    tracks = [
        track if keep_samples else dataclasses.replace(track, samples=[])
        for track in info.gpu.devices
        if keep_all
        or (info.device_uuid is not None and track.uuid == info.device_uuid)
        or (info.device_uuid is None and own_index is not None and track.cuda_index == own_index)
    ]
    return dataclasses.replace(info.gpu, devices=tracks)


def _cuda_index(device: str | None) -> int | None:
    if device is None or not device.startswith("cuda:"):
        return None
    return int(device.split(":", 1)[1])


def rank_run(merged: Run, info: RankInfo) -> Run:
    """One rank's record rebuilt from the merged view, for the per-rank rules."""
    run = Run(
        command=merged.command,
        created_at_s=merged.created_at_s,
        argv=merged.argv,
        expect_device=merged.expect_device,
        rank_info=info,
    )
    for name in RANK_SECTIONS:
        setattr(run, name, getattr(info, name))
    if run.environment is None:
        run.environment = merged.environment
    return run


def evaluate_job(run: Run) -> list[Finding]:
    """Findings for a single run, a rank's record, or a merged job (each rank evaluated and tagged with `rank`).

    In a merged job the same finding on many ranks is reported once, on its lowest rank, with `on_ranks` in its
    evidence: 1,024 copies of one input-pipeline-bound would bury the one that differs.
    """
    from gputriage import rules
    from gputriage.rules.distributed import CROSS_RANK_RULES

    if run.ranks is None or not run.ranks.ranks:
        found = rules.evaluate(run)
        if run.rank_info is not None and run.rank_info.world_size > 1:
            for f in found:
                f.rank = run.rank_info.rank
        return found
    per_rank: list[Finding] = []
    for info in run.ranks.ranks:
        for f in rules.evaluate(rank_run(run, info)):
            f.rank = info.rank
            per_rank.append(f)
    return root_cause_order(_collapse(per_rank) + rules.evaluate(run, CROSS_RANK_RULES))


def _collapse(findings: Iterable[Finding]) -> list[Finding]:
    groups: dict[tuple[str, str | None], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.code, f.where), []).append(f)
    out = []
    for group in groups.values():
        first = min(group, key=lambda f: (f.severity.weight, f.rank if f.rank is not None else -1))
        ranks = sorted({f.rank for f in group if f.rank is not None})
        out.append(dataclasses.replace(first, evidence={**first.evidence, "on_ranks": ranks}))
    return out


# --- reading rank records from folders -------------------------------------------------------------------------------


def rank_files(folder: Path) -> list[Path]:
    """The rank records in an --out folder (its ranks/ subfolder) or in a ranks/ folder itself."""
    base = folder / RANKS_DIR if (folder / RANKS_DIR).is_dir() else folder
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if RANK_FILE.match(p.name))


@dataclasses.dataclass
class _Job:
    """The records of one job seen so far while streaming rank files (memory: slim views, one full record)."""

    first: Run | None = None  # the lowest rank's full record: the merged report's top level
    views: dict[int, tuple[float, RankInfo]] = dataclasses.field(default_factory=dict)
    newest_s: float = 0.0

    def add(self, run: Run) -> None:
        assert run.rank_info is not None
        rank = run.rank_info.rank
        kept = self.views.get(rank)
        if kept is not None and kept[0] >= run.created_at_s:
            return  # the same rank written twice (a restarted job): the newest record wins
        self.views[rank] = (run.created_at_s, _rank_view(run))
        if self.first is None or rank <= _rank_of(self.first):
            self.first = run
        self.newest_s = max(self.newest_s, run.created_at_s)


def load_job(folders: Sequence[Path]) -> Run | None:
    """Merge the rank records found in these folders; None when none of them holds any.

    Records are read one at a time and slimmed at once, so memory grows with the merged report, not with the rank
    files. When records of several jobs share a folder, the newest job wins.
    """
    jobs: dict[tuple[str | None, int], _Job] = {}
    unreadable: list[str] = []
    for folder in folders:
        for path in rank_files(folder):
            try:
                run = load_run(path)
            except InputError:
                unreadable.append(str(path))
                continue
            if run.rank_info is not None:
                jobs.setdefault((run.rank_info.job_id, run.rank_info.world_size), _Job()).add(run)
    if not jobs:
        if unreadable:
            raise InputError(f"no readable rank record: {', '.join(unreadable[:3])}")
        return None
    job = max(jobs.values(), key=lambda j: j.newest_s)
    assert job.first is not None
    merged = _assemble(job.first, [view for _, view in job.views.values()], [str(f) for f in folders])
    assert merged.ranks is not None
    merged.ranks.unreadable = unreadable
    return merged


# --- the end of a rank: write, then merge when the job is complete ---------------------------------------------------


@dataclasses.dataclass
class RankOutcome:
    record_path: Path
    report_path: Path | None = None  # set when this rank wrote the merged report
    diagnosis: Diagnosis | None = None  # the merged job's, when this rank wrote it
    missing: list[int] = dataclasses.field(default_factory=list)  # ranks absent from the report this rank wrote


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
        wait_s = float(os.environ.get(MERGE_WAIT_ENV, DEFAULT_MERGE_WAIT_S))
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


def report_rank(run: Run, out_dir: Path, stream: TextIO) -> None:
    """`gputriage run` under torchrun: record this rank, merge when complete, and show the job's report once.

    The rank that writes the merged report renders it on its stderr; the others print one line. Nothing here may
    change the job's exit code, so a failure is one line on stderr too.
    """
    from gputriage.collectors.distributed import rank_from_env
    from gputriage.report.output import OutputOptions, emit

    if run.rank_info is None:  # the distributed observer failed: its place in the job is still in the environment
        run.rank_info = rank_from_env()
    rank = run.rank_info.rank if run.rank_info is not None else "?"
    try:
        outcome = finish_rank(run, out_dir)
    except Exception as exc:  # a full disk or a broken record must not replace the job's own exit code
        print(f"gputriage: error: rank {rank} could not write its record into {out_dir}: {exc}", file=stream)
        return
    if outcome.diagnosis is None:
        print(f"gputriage: rank {rank}: record written to {outcome.record_path}", file=stream)
        return
    emit(outcome.diagnosis, OutputOptions(terminal_stream=stream))
    absent = f"; ranks {outcome.missing} left no record (yet)" if outcome.missing else ""
    print(f"gputriage: rank {rank} merged the job's report into {outcome.report_path}{absent}", file=stream)


def _present(out_dir: Path, since_s: float, world_size: int) -> set[int]:
    """Ranks of this job whose record is there. Names first: on a shared filesystem at 1,024 ranks, a stat per file
    per rank would be a million metadata calls, so files are only stat'ed (to skip an older job's) once enough
    names are there."""
    named = {int(m.group(1)): path for path in rank_files(out_dir) if (m := RANK_FILE.match(path.name))}
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
        lock = _acquire_lock(out_dir)
        if lock is None:
            return outcome  # another rank is merging; it re-checks for late records after releasing
        try:
            before = _signature(out_dir)
            merged = load_job([out_dir])
            if merged is None or merged.ranks is None:
                return outcome
            diagnosis = write_merged(merged, out_dir)
            outcome = RankOutcome(record, out_dir / "report.json", diagnosis, merged.ranks.missing)
        finally:
            _release_lock(lock)
        # A record written (or rewritten) while we merged, by a rank that found the lock taken: merge once more.
        if _signature(out_dir) == before:
            return outcome


def _signature(out_dir: Path) -> set[tuple[str, int]]:
    found = set()
    for path in rank_files(out_dir):
        with contextlib.suppress(OSError):
            found.add((path.name, path.stat().st_mtime_ns))
    return found


def _acquire_lock(out_dir: Path) -> Path | None:
    lock = out_dir / LOCK_NAME
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            with contextlib.suppress(OSError):
                if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
                    lock.unlink()
                    continue
            return None
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return lock
    return None


def _release_lock(lock: Path) -> None:
    with contextlib.suppress(OSError):
        lock.unlink()


def write_merged(merged: Run, out_dir: Path) -> Diagnosis:
    """Diagnose the merged run and write every report file, each one atomically (build aside, then rename)."""
    from gputriage.diagnosis import diagnose
    from gputriage.report.output import write_files

    diagnosis = diagnose(merged)
    staging = out_dir / f".merge-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    try:
        write_files(diagnosis, staging)
        for path in staging.iterdir():
            target = out_dir / path.name
            if path.is_dir():
                shutil.rmtree(target, ignore_errors=True)
            path.replace(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return diagnosis
