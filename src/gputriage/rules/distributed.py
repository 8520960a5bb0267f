"""Rules for the distributed part of the ladder (see docs/contract.md's finding catalogue).

Two kinds of rule live here. Per-rank rules read one rank's own facts (`run.rank_info`): they fire on a rank's
record, and on each rank of a merged report (the merge evaluates every rank and tags the findings with `rank`).
Cross-rank rules read the merged view (`run.ranks`): which ranks share a GPU, and which rank the others wait for.
"""

from __future__ import annotations

import ast
import math
from collections import defaultdict
from collections.abc import Iterator

from gputriage.findings import Finding, Severity, root_cause_order
from gputriage.record import Run
from gputriage.record.device import is_preflight
from gputriage.record.ranks import ModelWrap, RankInfo, RankLoader
from gputriage.record.steps import Step
from gputriage.rules import codefix, edits
from gputriage.rules.registry import job_rule, rule
from gputriage.stdlib import statistics

# A rank holding less than this on another rank's GPU is noise (the allocator's first block is 2 MiB).
STRAY_MIN_BYTES = 8 * 1024**2
# Straggler: the late rank's own work per step exceeds the others' median by at least this share of the step, and the
# others spend at least STRAGGLER_WAIT_SHARE of that lateness blocked in collectives (so the lateness costs them).
STRAGGLER_LATE_SHARE = 0.2
STRAGGLER_WAIT_SHARE = 0.5
# ...and by at least this much: two or three scheduler time slices, below which a busy host's noise decides who is late.
STRAGGLER_MIN_LATE_S = 0.010
# The straggler's cause is the step phase that exceeds the others' by at least this share of its lateness.
CAUSE_PHASE_SHARE = 0.5
# Below this many steps, the first step (warm-up: allocator, autotuning, worker start) is kept.
WARMUP_DROP_MIN_STEPS = 3

PHASES = ("data_wait_s", "h2d_s", "forward_s", "sync_s", "backward_s", "optimizer_s", "other_s")
PHASE_WORDS = {
    "data_wait_s": "waiting for its DataLoader",
    "h2d_s": "copying batches to the device",
    "forward_s": "in forward",
    "sync_s": "blocked on host-device syncs",
    "backward_s": "in backward",
    "optimizer_s": "in the optimizer step",
    "other_s": "outside the measured phases",
}
# Which of the rank's own findings explain a slow phase, most specific first.
PHASE_CAUSES = {
    "data_wait_s": ("input-pipeline-bound",),
    "h2d_s": ("pageable-memcpy", "data-on-cpu"),
    "sync_s": ("host-sync-in-loop",),
    "forward_s": ("model-on-cpu", "model-partly-on-cpu", "cpu-compute-in-step", "launch-bound", "gpu-throttled"),
    "backward_s": ("model-on-cpu", "model-partly-on-cpu", "cpu-compute-in-step", "launch-bound", "gpu-throttled"),
    "optimizer_s": ("model-partly-on-cpu", "cpu-compute-in-step", "launch-bound"),
    "other_s": ("cpu-compute-in-step", "host-sync-in-loop", "other-process-on-gpu"),
}

SET_DEVICE_FIX = (
    'local_rank = int(os.environ["LOCAL_RANK"])\n'
    "torch.cuda.set_device(local_rank)  # before any other CUDA call\n"
    'device = torch.device("cuda", local_rank)\n'
    "model = DDP(model.to(device), device_ids=[local_rank])"
)


# --- per-rank rules --------------------------------------------------------------------------------------------------


@rule
def gloo_with_cuda(run: Run) -> Iterator[Finding]:
    """gloo moves CUDA tensors through host memory; nccl is the backend meant for NVIDIA GPUs."""
    info = run.rank_info
    if info is None or info.backend != "gloo" or not _is_cuda(info.device):
        return
    yield Finding(
        code="gloo-with-cuda",
        rung=5,
        severity=Severity.WARNING,
        title=f"The process group uses gloo while rank {info.rank} computes on {info.device}",
        evidence={"backend": info.backend, "device": info.device, "world_size": info.world_size},
        fix='dist.init_process_group(backend="nccl")  # or backend="cpu:gloo,cuda:nccl" to keep gloo for CPU tensors',
        where=info.backend_where,
    )


@rule
def dataparallel_not_ddp(run: Run) -> Iterator[Finding]:
    """nn.DataParallel replicates the model every step from one Python thread; DDP runs one process per GPU."""
    info = run.rank_info
    wrap = info.wrap if info is not None else None
    if wrap is None or wrap.kind != "dataparallel":
        return
    if is_preflight(run) and (wrap.gpu_count or 0) < 2:
        yield _dataparallel_in_preflight(run, wrap)
        return
    if (wrap.gpu_count or 0) < 2:
        yield _dataparallel_on_one_gpu(run, wrap)
        return
    yield Finding(
        code="dataparallel-not-ddp",
        rung=5,
        severity=Severity.WARNING,
        title=f"The model is wrapped in nn.DataParallel over {wrap.gpu_count} GPUs instead of DistributedDataParallel",
        evidence={"gpu_count": wrap.gpu_count, "device_ids": wrap.device_ids, "module_class": wrap.module_class},
        fix=(
            "# one process per GPU: torchrun --nproc_per_node="
            f"{wrap.gpu_count} {_script(run)}\n" + _ddp_lines(run, wrap)
        ),
        where=wrap.where,
    )


def _script(run: Run) -> str:
    """What torchrun starts: the job's own script (or `-m package.module`), as `run` was given it."""
    target = run.process.target if run.process is not None else None
    return target or "train.py"


def _without_wrapper(run: Run, wrap: ModelWrap) -> str:
    """The user's statement with `nn.DataParallel(...)` replaced by what it wraps (`model = Net().to(device)`), or
    the generic line when the statement is not in the record."""
    generic = "model = model.to(device)"
    stmt = codefix.statement_at(run.source, wrap.where)
    if stmt is None:
        return generic
    call = _wrapper_call(stmt.node)
    edit = edits.splice(stmt, call, ast.unparse(call.args[0]), at_end=False, kind="drop-wrapper") if call else None
    if edit is None:
        return generic
    # the line's own comment goes: it spoke of the wrapper ("net = net # make parallel" was a trial's fix)
    kept = codefix.without_comments("\n".join(line.strip() for line in edit.new))
    target, _, value = kept.partition(" = ")
    # a wrapper's users reach the model through `.module` (to save it, to sample from it): without the wrapper that
    # attribute is gone, and the script died at `model.module.decode(...)` (trial 8's VAE)
    name = target.strip()
    module_uses = f"\n# and where the script reads {name}.module (to save or to sample), read {name}"
    module_uses = module_uses if value and name.isidentifier() else ""
    if name == value.strip():  # `net = nn.DataParallel(net)` without it is `net = net`: the line goes
        return f"# delete this line: {stmt.text}{module_uses}"
    return kept + module_uses


def _wrapper_call(node: ast.AST) -> ast.Call | None:
    calls = [n for n in ast.walk(node) if isinstance(n, ast.Call) and n.args]
    return next((n for n in calls if ast.unparse(n.func).endswith("DataParallel")), None)


def _ddp_lines(run: Run, wrap: ModelWrap) -> str:
    """torchrun's set-up in the script's own names: the model the wrapper takes (`net`), wrapped in DDP instead."""
    stmt = codefix.statement_at(run.source, wrap.where)
    call = _wrapper_call(stmt.node) if stmt is not None else None
    name = ast.unparse(call.args[0]) if call is not None and isinstance(call.args[0], ast.Name) else "model"
    return (
        "import os\n"  # LOCAL_RANK is read from the environment: a script that never imported os fails when pasted
        "import torch.distributed as dist\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n"
        "from torch.utils.data.distributed import DistributedSampler\n"
        'dist.init_process_group("nccl")\n'
        + SET_DEVICE_FIX.replace("model = DDP(model.to(device)", f"{name} = DDP({name}.to(device)")
        + "\n# and DataLoader(..., sampler=DistributedSampler(dataset)): each process reads its own share"
    )


def _dataparallel_in_preflight(run: Run, wrap: ModelWrap) -> Finding:
    """A preflight's stand-in has one device, so how many GPUs DataParallel will spread over is not measured. The
    wrapper exists only to use several GPUs, where it is the slow way (one Python thread replicates the model and
    scatters each batch every step); on one GPU it does nothing. Either way the fix is the same, and it is cheaper
    to make before renting the machine: a warning, with the count said to be unknown."""
    return Finding(
        code="dataparallel-not-ddp",
        rung=5,
        severity=Severity.WARNING,
        title=(
            f"nn.DataParallel wraps {wrap.module_class or 'the model'}: on several GPUs it replicates the model "
            "from one Python thread every step (DistributedDataParallel runs one process per GPU), and on one GPU "
            "it does nothing (the preflight's stand-in has one device, so the GPU machine's count is not measured)"
        ),
        # gpu_count null: not measured (the stand-in's one device is not the GPU machine's count)
        evidence={"gpu_count": None, "device_ids": wrap.device_ids, "module_class": wrap.module_class},
        fix=(
            f"# one GPU: drop the wrapper (line {_line_of(wrap.where)}):\n{_without_wrapper(run, wrap)}\n"
            f"# several GPUs: one process per GPU, torchrun --nproc_per_node=NUM_GPUS {_script(run)}, with\n"
            + _ddp_lines(run, wrap)
        ),
        where=wrap.where,
    )


def _line_of(where: str | None) -> str:
    return where.rsplit(":", 1)[-1] if where else "?"


def _dataparallel_on_one_gpu(run: Run, wrap: ModelWrap) -> Finding:
    """DataParallel over one GPU (or none it could see) calls the model directly: no speed-up, a wrapper to drop, and
    not a cause of low utilisation (info). Said because the user most likely meant to use several GPUs."""
    seen = "one GPU" if wrap.gpu_count == 1 else "no GPU it could see"
    return Finding(
        code="dataparallel-not-ddp",
        rung=5,
        severity=Severity.INFO,
        title=(
            f"nn.DataParallel wraps {wrap.module_class or 'the model'} over {seen}: it then calls the model "
            "directly, with no speed-up"
        ),
        evidence={"gpu_count": wrap.gpu_count or 0, "device_ids": wrap.device_ids, "module_class": wrap.module_class},
        fix=(
            f"# on one GPU, drop the wrapper (line {_line_of(wrap.where)}):\n{_without_wrapper(run, wrap)}\n"
            f"# on several GPUs, one process per GPU instead: torchrun --nproc_per_node=NUM_GPUS {_script(run)}"
        ),
        where=wrap.where,
    )


@rule
def missing_distributed_sampler(run: Run) -> Iterator[Finding]:
    """Under DDP, a loader that iterates the whole dataset on every rank repeats the same work world_size times."""
    info = run.rank_info
    if info is None or info.world_size < 2 or info.wrap is None or info.wrap.kind != "ddp":
        return
    loader = _unsharded_loader(info)
    if loader is None or loader.dataset_len is None:
        return
    expected = math.ceil(loader.dataset_len / info.world_size)
    yield Finding(
        code="missing-distributed-sampler",
        rung=2,
        severity=Severity.WARNING,
        title=(
            f"Every rank iterates all {loader.dataset_len} samples per epoch: the DataLoader's "
            f"{loader.sampler_class or 'sampler'} does not shard the dataset across {info.world_size} ranks"
        ),
        evidence={
            "world_size": info.world_size,
            "dataset_len": loader.dataset_len,
            "samples_per_rank_per_epoch": loader.samples_per_epoch,
            "expected_samples_per_rank_per_epoch": expected,
            "sampler_class": loader.sampler_class,
        },
        fix=(
            "from torch.utils.data.distributed import DistributedSampler\n"
            "sampler = DistributedSampler(dataset, shuffle=True)\n"
            "loader = DataLoader(dataset, batch_size=..., sampler=sampler)  # and drop shuffle=True\n"
            "for epoch in range(epochs):\n"
            "    sampler.set_epoch(epoch)"
        ),
        where=loader.where,
    )


@rule
def stray_context_on_gpu(run: Run) -> Iterator[Finding]:
    """A rank that allocates on a GPU other than its own steals that GPU's memory from the rank that owns it."""
    info = run.rank_info
    if info is None or not _is_cuda(info.device):
        return
    stray = _stray_bytes(info)
    if not stray:
        return
    where = info.load_without_map_location[0] if info.load_without_map_location else info.device_where
    yield Finding(
        code="stray-context-on-gpu",
        rung=5,
        severity=Severity.WARNING,
        title=f"Rank {info.rank} computes on {info.device} but also holds memory on {', '.join(sorted(stray))}",
        evidence={
            "device": info.device,
            "stray_bytes": stray,
            "torch_load_without_map_location": info.load_without_map_location,
        },
        fix=(
            "torch.cuda.set_device(local_rank)  # first thing, before any CUDA call\n"
            'state = torch.load(path, map_location="cpu")  # or map_location=f"cuda:{local_rank}"'
        ),
        where=where,
    )


# --- cross-rank rules ------------------------------------------------------------------------------------------------


@job_rule
def ranks_share_gpu(run: Run) -> Iterator[Finding]:
    """Several ranks on one GPU while GPUs of the same node sit idle: the classic everything-on-cuda:0."""
    if run.ranks is None:
        return
    by_node: dict[str, list[RankInfo]] = defaultdict(list)
    for info in run.ranks.ranks:
        if _is_cuda(info.device):
            by_node[info.node or "?"].append(info)
    for node, infos in sorted(by_node.items()):
        finding = _shared_gpu_on_node(node, infos)
        if finding is not None:
            yield finding


@job_rule
def straggler_rank(run: Run) -> Iterator[Finding]:
    """The rank the others wait for in collectives, and in which step phase it is late.

    Which of the rank's own findings explains that phase is the diagnosis's to add (`straggler_cause`): it has
    every rank's findings already, so no rule evaluates the others.
    """
    if run.ranks is None:
        return
    timed = {info.rank: _step_profile(info) for info in run.ranks.ranks}
    profiles = {rank: p for rank, p in timed.items() if p is not None}
    if len(profiles) < 2:
        return
    late_rank = max(profiles, key=lambda r: profiles[r].own_s)
    late = profiles[late_rank]
    others = [p for r, p in profiles.items() if r != late_rank]
    others_own_s = statistics.median(p.own_s for p in others)
    others_wait_s = statistics.median(p.wait_s for p in others)
    lateness_s = late.own_s - others_own_s
    step_s = statistics.median(p.wall_s for p in profiles.values())
    if (
        lateness_s < max(STRAGGLER_MIN_LATE_S, STRAGGLER_LATE_SHARE * step_s)
        or others_wait_s < STRAGGLER_WAIT_SHARE * lateness_s
    ):
        return
    phase, phase_excess_s = _cause_phase(late, others, lateness_s)
    yield Finding(
        code="straggler-rank",
        rung=5,
        severity=Severity.WARNING,
        title=straggler_title(late_rank, others_wait_s, phase, None),
        evidence={
            "straggler_rank": late_rank,
            "lateness_s_per_step": round(lateness_s, 6),
            "others_collective_wait_s_per_step": round(others_wait_s, 6),
            "step_wall_s": round(step_s, 6),
            "own_work_s_per_step_by_rank": {str(r): round(p.own_s, 6) for r, p in sorted(profiles.items())},
            "collective_wait_s_per_step_by_rank": {str(r): round(p.wait_s, 6) for r, p in sorted(profiles.items())},
            "cause_phase": phase,
            "cause_phase_excess_s_per_step": round(phase_excess_s, 6) if phase else None,
            "cause_code": None,
            "steps_compared": min(p.steps for p in profiles.values()),
        },
        fix=f"Profile rank {late_rank} alone: it is late, the others only wait",
        rank=late_rank,
    )


# --- helpers ---------------------------------------------------------------------------------------------------------


def _is_cuda(device: str | None) -> bool:
    return device is not None and device.startswith("cuda")


def _is_distributed_sampler(name: str | None) -> bool:
    # DistributedSampler and its many subclasses/look-alikes (Lightning's DistributedSamplerWrapper, bucketing samplers)
    return name is not None and "distributed" in name.lower()


def _unsharded_loader(info: RankInfo) -> RankLoader | None:
    """The first iterated map-style loader that walks the whole dataset with a non-distributed sampler."""
    for loader in info.loaders:
        if loader.iterations == 0 or loader.is_iterable_dataset or _is_distributed_sampler(loader.sampler_class):
            continue
        if (
            loader.dataset_len
            and loader.samples_per_epoch is not None
            and loader.samples_per_epoch >= loader.dataset_len
        ):
            return loader
    return None


def _stray_bytes(info: RankInfo) -> dict[str, int]:
    """Memory this rank holds on GPUs other than its own: torch's allocator, then NVML's per-process view."""
    stray = {dev: n for dev, n in info.cuda_reserved_bytes.items() if dev != info.device and n >= STRAY_MIN_BYTES}
    if info.gpu_processes and info.device_uuid and info.pid is not None:
        for proc in info.gpu_processes:
            if proc.pid != info.pid or proc.gpu_uuid in (None, info.device_uuid):
                continue
            used = proc.used_memory_bytes or 0
            if used >= STRAY_MIN_BYTES:
                stray.setdefault(f"nvml:{proc.gpu_index}", used)
    return stray


def _device_key(info: RankInfo) -> str:
    # The physical GPU when torch told us its UUID; otherwise the index within this rank's visible devices.
    if info.device_uuid:
        return info.device_uuid
    return f"{info.cuda_visible_devices or '*'}/{info.device}"


def _shared_gpu_on_node(node: str, infos: list[RankInfo]) -> Finding | None:
    groups: dict[str, list[RankInfo]] = defaultdict(list)
    for info in infos:
        groups[_device_key(info)].append(info)
    shared = {key: g for key, g in groups.items() if len(g) > 1}
    gpus_on_node = max((i.cuda_device_count or 0) for i in infos)
    idle = gpus_on_node - len(groups)
    if not shared or idle <= 0:
        return None
    sharers = sorted((i for g in shared.values() for i in g), key=lambda i: i.rank)
    misplaced = [i for i in sharers if i.local_rank is not None and i.device != f"cuda:{i.local_rank}"]
    culprit = misplaced[0] if misplaced else sharers[-1]
    return Finding(
        code="ranks-share-gpu",
        rung=5,
        severity=Severity.CRITICAL,
        title=(
            f"{len(sharers)} ranks on {node} share {len(shared)} GPU(s) while {idle} of its {gpus_on_node} GPUs "
            "sit idle"
        ),
        evidence={
            "node": node,
            "device_by_rank": {str(i.rank): i.device for i in sorted(infos, key=lambda i: i.rank)},
            "ranks_by_device": {g[0].device or key: sorted(i.rank for i in g) for key, g in shared.items()},
            "gpus_on_node": gpus_on_node,
            "gpus_idle": idle,
            "nvml_processes_by_gpu": _nvml_process_counts(infos),
        },
        fix=SET_DEVICE_FIX,
        where=culprit.device_where,
        rank=culprit.rank,
    )


def _nvml_process_counts(infos: list[RankInfo]) -> dict[str, int] | None:
    """Processes per GPU as NVML saw them (from the first rank that could ask), or None where NVML was unavailable."""
    for info in infos:
        if info.gpu_processes is not None:
            counts: dict[str, int] = defaultdict(int)
            for proc in info.gpu_processes:
                counts[str(proc.gpu_index)] += 1
            return dict(sorted(counts.items()))
    return None


class _Profile:
    """One rank's typical step: medians of wall time, own work, collective wait and each phase."""

    def __init__(self, steps: list[Step], waits_s: list[float]) -> None:
        self.steps = len(steps)
        self.wall_s = statistics.median(s.wall_s for s in steps)
        self.wait_s = statistics.median(waits_s)
        self.own_s = statistics.median(s.wall_s - w for s, w in zip(steps, waits_s, strict=True))
        self.phases_s = {name: statistics.median(getattr(s, name) for s in steps) for name in PHASES}


def _step_profile(info: RankInfo) -> _Profile | None:
    if info.steps is None or not info.steps.steps or not info.collectives.events:
        return None
    steps = info.steps.steps
    if len(steps) >= WARMUP_DROP_MIN_STEPS:
        steps = steps[1:]
    waits_s = [_wait_in_step(info, step) for step in steps]
    return _Profile(steps, waits_s)


def _wait_in_step(info: RankInfo, step: Step) -> float:
    end_s = step.start_s + step.wall_s
    wait_s = sum(e.wait_s for e in info.collectives.events if step.start_s <= e.t_s < end_s)
    return min(wait_s, step.wall_s)


def _cause_phase(late: _Profile, others: list[_Profile], lateness_s: float) -> tuple[str | None, float]:
    excess = {name: late.phases_s[name] - statistics.median(p.phases_s[name] for p in others) for name in PHASES}
    phase = max(excess, key=lambda n: excess[n])
    if excess[phase] < CAUSE_PHASE_SHARE * lateness_s:
        return None, 0.0
    return phase, excess[phase]


def straggler_cause(phase: str | None, own: list[Finding]) -> Finding | None:
    """The straggler's own lower finding: the one that explains its slow phase, else its most likely root cause."""
    if phase is not None:
        for code in PHASE_CAUSES[phase]:
            match = next((f for f in own if f.code == code), None)
            if match is not None:
                return match
    ordered = root_cause_order(own)
    return ordered[0] if ordered else None


def straggler_title(rank: int, wait_s: float, phase: str | None, cause_code: str | None) -> str:
    head = f"The other ranks wait {wait_s * 1000:.0f} ms per step in collectives for rank {rank}"
    if phase is not None:
        head += f", which is late {PHASE_WORDS[phase]}"
    if cause_code is not None:
        head += f" ({cause_code} on rank {rank})"
    return head
