"""Distributed facts: which rank a record belongs to, what that rank saw, and the merged per-rank view.

A rank's own record (`DIR/ranks/rank-00003.json`) is a plain Run with `rank_info` set; its sections sit at the top
level as in any run. The merge (`gputriage.record.merge`) moves each rank's sections into its `RankInfo`, so the merged
report holds every rank's evidence and the rules can be re-run per rank on a saved report.
"""

from __future__ import annotations

import msgspec

from gputriage.record.sections import Sections


class NodeGpuProcess(msgspec.Struct):
    """One process that NVML lists on a GPU of this rank's node (nvmlDeviceGetComputeRunningProcesses)."""

    gpu_index: int  # NVML index (physical, not CUDA_VISIBLE_DEVICES-relative)
    pid: int
    gpu_uuid: str | None = None
    used_memory_bytes: int | None = None


class ModelWrap(msgspec.Struct):
    """How the model was wrapped for data parallelism, seen at the wrapper's constructor."""

    kind: str  # ddp | dataparallel
    module_class: str | None = None  # the wrapped model's class name
    device_ids: list[int] | None = None  # as given (DataParallel: None means every visible GPU)
    gpu_count: int | None = None  # GPUs the wrapper spreads over (DataParallel), 1 for single-device DDP
    param_device: str | None = None  # where the wrapped model's parameters were at wrap time
    where: str | None = None  # file:line of the wrapper's construction in the user's code


class RankLoader(msgspec.Struct):
    """A DataLoader this rank iterated, with the numbers that show whether it shards the dataset."""

    sampler_class: str | None = None
    dataset_class: str | None = None
    dataset_len: int | None = None
    samples_per_epoch: int | None = None  # len(sampler): what this rank iterates per epoch
    batch_size: int | None = None
    is_iterable_dataset: bool | None = None
    iterations: int = 0  # how many times it was iterated (epochs started)
    where: str | None = None  # file:line where the user's loop iterates it


class CollectiveEvent(msgspec.Struct):
    """One collective that this rank waited on, timed on the host (never issued by gputriage)."""

    op: str  # all_reduce | barrier | ... | ddp_allreduce (DDP's gradient buckets, last bucket of a backward)
    t_s: float  # when it started, seconds since the run started (same clock as Step.start_s)
    wait_s: float  # how long this rank was blocked in it


class CollectiveStats(msgspec.Struct):
    calls: int = 0  # every collective call seen, including async ones
    wait_s: float = 0.0  # total time blocked in synchronous collectives and in DDP's gradient all-reduce
    ddp_timed: bool = False  # DDP's gradient all-reduce was timed through a comm hook
    ddp_untimed_reason: str | None = None  # why it was not (e.g. the user registered their own comm hook)
    events: list[CollectiveEvent] = msgspec.field(default_factory=list)  # capped; the totals above are not
    events_dropped: int = 0


class RankInfo(Sections, kw_only=True):
    """One rank of a distributed job. Its evidence sections (see `Sections`) are filled only in the merged view:
    a rank's own record keeps them at the top level of its Run, and the merge moves them in here."""

    rank: int
    world_size: int
    local_rank: int | None = None
    local_world_size: int | None = None
    node: str | None = None  # hostname
    backend: str | None = None  # the process group backend: nccl | gloo | ...
    group_rank: int | None = None  # the node's rank (torchrun's GROUP_RANK)
    job_id: str | None = None  # TORCHELASTIC_RUN_ID or the scheduler's job id: records of one job share it
    pid: int | None = None
    backend_where: str | None = None  # file:line of init_process_group
    # The device this rank computes on ("cuda:1", "cpu"), how it was told, and where in the user's code.
    device: str | None = None
    device_source: str | None = None  # set_device | ddp | init_process_group | model | current_device
    device_where: str | None = None
    device_uuid: str | None = None  # the GPU's UUID as torch sees it, to match NVML
    cuda_device_count: int | None = None  # GPUs this rank can see
    cuda_visible_devices: str | None = None
    # torch's caching allocator: bytes reserved per device by this rank ("cuda:0" -> bytes).
    cuda_reserved_bytes: dict[str, int] = msgspec.field(default_factory=dict)
    # NVML: every compute process on this node's GPUs, read once when the rank finished.
    gpu_processes: list[NodeGpuProcess] | None = None
    gpu_processes_unavailable: str | None = None
    wrap: ModelWrap | None = None
    loaders: list[RankLoader] = msgspec.field(default_factory=list)
    collectives: CollectiveStats = msgspec.field(default_factory=CollectiveStats)
    # file:line of torch.load calls without map_location (they load tensors onto the device they were saved from).
    load_without_map_location: list[str] = msgspec.field(default_factory=list)


class RanksSection(msgspec.Struct):
    """The merged view of several rank records (filled by the merge step, never by a collective)."""

    world_size: int = 0
    ranks: list[RankInfo] = msgspec.field(default_factory=list)
    missing: list[int] = msgspec.field(default_factory=list)  # ranks of the job that left no record (killed hard)
    job_id: str | None = None
    nodes: list[str] = msgspec.field(default_factory=list)
    sources: list[str] = msgspec.field(default_factory=list)  # the folders the records were read from
    unreadable: list[str] = msgspec.field(
        default_factory=list
    )  # rank files that could not be read (named, not guessed)
    unreadable_reasons: dict[str, str] = msgspec.field(default_factory=dict)  # each of them -> why, in one line
    # records of other jobs found beside this one (a reused --out, or folders of two jobs named together): one line
    # each, never merged into this job's report
    other_jobs: list[str] = msgspec.field(default_factory=list)

    def measured_rungs(self) -> set[int]:
        return set()  # the merged view; its top level carries the first rank's sections

    def unmeasured_rungs(self) -> dict[int, str]:
        return {}

    def self_check(self) -> list[str]:
        seen = [r.rank for r in self.ranks]
        if len(set(seen)) != len(seen):
            return [f"ranks: duplicate rank numbers {seen}"]
        if set(seen) & set(self.missing):
            return [f"ranks: {sorted(set(seen) & set(self.missing))} are both present and missing"]
        return []
