"""Merge per-rank records into one Run, through files only: gputriage never issues a collective.

Pure, apart from reading the records: records in, one Run out. Where the records are and how ranks take turns to
merge is the `--out` folder protocol (`gputriage.outdir`); who merges when is `gputriage.commands.rank_report`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import msgspec

from gputriage import outdir
from gputriage.errors import InputError
from gputriage.record.decode import load_rank_record
from gputriage.record.gpu import GpuSection
from gputriage.record.ranks import RankInfo, RanksSection
from gputriage.record.run import Run

# The merged report lists at most this many missing ranks by number; a world size read from a file never decides
# how much memory the merge takes.
MAX_LISTED_MISSING = 4096


def merge_runs(records: Sequence[Run], sources: Sequence[str] = ()) -> Run:
    """One Run for the whole job: the lowest rank's sections at the top, every rank's own in `ranks`.

    The top level stays a complete run (renderers and the ladder read it); the per-rank sections let the rules run
    again on each rank of a saved report.
    """
    ranked = sorted((r for r in records if r.rank_info is not None), key=_rank_of)
    if not ranked:
        raise InputError("no rank records to merge")
    return _assemble(ranked[0], [rank_view(r) for r in ranked], sources)


def _rank_of(run: Run) -> int:
    return run.rank_info.rank if run.rank_info is not None else -1


def rank_view(rec: Run) -> RankInfo:
    """The rank's info with its sections moved in, slimmed for the merged view."""
    assert rec.rank_info is not None
    info = msgspec.structs.replace(rec.rank_info)
    info.copy_sections_from(rec)
    info.gpu = own_gpu_tracks(info)
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
        resolved_device=first.resolved_device,
    )
    merged.copy_sections_from(first)
    for info in infos:
        # Ranks of one node report the same environment; keep it once, at the top level.
        if info.environment == merged.environment:
            info.environment = None
    world_size = max(i.world_size for i in infos)
    merged.ranks = RanksSection(
        world_size=world_size,
        ranks=sorted(infos, key=lambda i: i.rank),
        missing=missing_ranks(world_size, {i.rank for i in infos}),
        job_id=first.rank_info.job_id,
        nodes=sorted({i.node for i in infos if i.node}),
        sources=list(sources),
    )
    return merged


def missing_ranks(world_size: int, present: set[int]) -> list[int]:
    """The ranks below world_size that left no record, in order, listing at most MAX_LISTED_MISSING of them."""
    missing: list[int] = []
    rank = 0
    while rank < world_size and len(missing) < MAX_LISTED_MISSING:
        if rank not in present:
            missing.append(rank)
        rank += 1
    return missing


def own_gpu_tracks(info: RankInfo, keep_samples: bool = False) -> GpuSection | None:
    """The rank's share of its node's GPU tracks; without the display samples unless asked (rules read summaries).

    Every rank samples every GPU it can see, so the same 8 tracks would come from each of a node's 8 ranks. Each rank
    keeps its own device's track; local rank 0 also keeps the node's others (the idle GPUs are evidence too). The
    merged report's top level keeps the first rank's section, samples included, for the charts.
    """
    if info.gpu is None:
        return None
    keep_all = info.local_rank in (0, None)
    own_index = cuda_index(info.device)
    tracks = [
        track if keep_samples else msgspec.structs.replace(track, samples=[])
        for track in info.gpu.devices
        if keep_all
        or (info.device_uuid is not None and track.uuid == info.device_uuid)
        or (info.device_uuid is None and own_index is not None and track.cuda_index == own_index)
    ]
    return msgspec.structs.replace(info.gpu, devices=tracks)


def cuda_index(device: str | None) -> int | None:
    """1 for "cuda:1"; None for anything else, a malformed index included."""
    if device is None or not device.startswith("cuda:"):
        return None
    index = device.split(":", 1)[1]
    return int(index) if index.isdecimal() and len(index) <= 6 else None


def rank_run(merged: Run, info: RankInfo) -> Run:
    """One rank's record rebuilt from the merged view, for the per-rank rules."""
    run = Run(
        command=merged.command,
        created_at_s=merged.created_at_s,
        argv=merged.argv,
        expect_device=merged.expect_device,
        resolved_device=merged.resolved_device,
        rank_info=info,
    )
    run.copy_sections_from(info)
    if run.environment is None:
        run.environment = merged.environment
    return run


# --- reading rank records from folders -------------------------------------------------------------------------------
class _Job(msgspec.Struct):
    """The records of one job seen so far while streaming rank files (memory: slim views, one full record)."""

    first: Run | None = None  # the lowest rank's full record: the merged report's top level
    views: dict[int, tuple[float, RankInfo]] = msgspec.field(default_factory=dict)
    newest_s: float = 0.0

    def add(self, run: Run) -> None:
        assert run.rank_info is not None
        rank = run.rank_info.rank
        kept = self.views.get(rank)
        if kept is not None and kept[0] >= run.created_at_s:
            return  # the same rank written twice (a restarted job): the newest record wins
        self.views[rank] = (run.created_at_s, rank_view(run))
        if self.first is None or rank <= _rank_of(self.first):
            self.first = run
        self.newest_s = max(self.newest_s, run.created_at_s)


def load_job(folders: Sequence[Path]) -> Run | None:
    """Merge the rank records found in these folders; None when none of them holds any.

    Records are read one at a time and slimmed at once, so memory grows with the merged report, not with the rank
    files. When records of several jobs share a folder, the newest job wins. A rank file that cannot be read (not a
    regular file, a symlink, broken JSON, a field out of range) is left out and named in `ranks.unreadable`, with its
    reason in `ranks.unreadable_reasons`; only when no rank file is readable is the folder refused.
    """
    jobs: dict[tuple[str | None, int], _Job] = {}
    unreadable: dict[str, str] = {}
    for folder in folders:
        for path in outdir.rank_files(folder):
            try:
                run = load_rank_record(path)
                check_rank_record(run, str(path))
            except InputError as exc:
                unreadable[str(path)] = str(exc)
                continue
            assert run.rank_info is not None
            jobs.setdefault((run.rank_info.job_id, run.rank_info.world_size), _Job()).add(run)
    if not jobs:
        if unreadable:
            first = next(iter(unreadable.values()))
            more = f" (and {len(unreadable) - 1} more unreadable rank files)" if len(unreadable) > 1 else ""
            raise InputError(f"no readable rank record: {first}{more}")
        return None
    job = max(jobs.values(), key=lambda j: j.newest_s)
    assert job.first is not None
    merged = _assemble(job.first, [view for _, view in job.views.values()], [str(f) for f in folders])
    assert merged.ranks is not None
    merged.ranks.unreadable = list(unreadable)
    merged.ranks.unreadable_reasons = unreadable
    merged.ranks.other_jobs = [_describe(key, other) for key, other in jobs.items() if other is not job][
        :MAX_OTHER_JOBS
    ]

    return merged


MAX_OTHER_JOBS = 8


def _describe(key: tuple[str | None, int], job: _Job) -> str:
    """One line for the records of a job that is not the one merged (the newest one is)."""
    job_id, world_size = key
    return (
        f"{len(job.views)} rank record(s) of another job (job id {job_id or 'unknown'}, world size {world_size}): "
        "left out: a report covers one job (the newest); name that job's folder alone to see it"
    )


def check_rank_record(run: Run, source: str) -> None:
    """A rank record names its rank, inside its job's world (the range check of every number is the decoder's).

    Raises:
        InputError: the record is not one rank of a job.
    """
    info = run.rank_info
    if info is None:
        raise InputError(f"{source} is not a rank record (it has no rank_info)")
    if info.world_size < 1:
        raise InputError(f"{source}: field rank_info.world_size is out of range ({info.world_size})")
    if not 0 <= info.rank < info.world_size:
        raise InputError(
            f"{source}: field rank_info.rank is out of range (rank {info.rank} of world size {info.world_size})"
        )
