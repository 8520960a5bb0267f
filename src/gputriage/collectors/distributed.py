"""What one rank of a distributed job saw: its place in the job, its device, its process group, its data parallel
wrapper, its loaders, and the time it spent blocked in collectives.

Everything is measured by wrapping calls the job already makes (init_process_group, set_device, the DDP and
DataParallel constructors and DDP's forward, DataLoader iteration, the torch.distributed collectives, torch.load), on
torch's own classes and modules, for the probe window: when it ends (or the job does) the wrappers come out. gputriage
never issues a collective of its own: it cannot hang or slow the job.

DDP's gradient all-reduce is timed through a comm hook that does exactly what DDP's default does (divide by the world
size, all-reduce), registered at the DDP model's first forward unless the job registered its own hook, and only on
DDP's default process group. It is the one thing gputriage has to hand to a user's object (DDP accepts one comm hook
and cannot take it back): it is a module-level function with no state (`torch.save`, pickle and `copy.deepcopy` of the
DDP model carry a reference to it by name), and after the window it only divides and all-reduces. Set
GPUTRIAGE_DDP_COMM_TIMING=0 to leave DDP's hooks alone.
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
import time
from collections.abc import Callable, Mapping
from typing import Any

from gputriage import envnames
from gputriage.collectors.identity import IdentityMap
from gputriage.collectors.patching import Patches
from gputriage.collectors.usercode import user_where
from gputriage.record import Run
from gputriage.record.ranks import CollectiveEvent, CollectiveStats, ModelWrap, NodeGpuProcess, RankInfo, RankLoader

# Enough for thousands of steps of per-step events; totals keep counting past it.
MAX_EVENTS = 5000
MAX_LOAD_SITES = 10
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "broadcast_object_list",
    "barrier",
    "monitored_barrier",
    "reduce",
    "all_to_all",
    "all_to_all_single",
    "gather",
    "scatter",
)


def rank_from_env(environ: Mapping[str, str] = os.environ) -> RankInfo | None:
    """This process's place in the job, from the variables torchrun (or Slurm around it) sets; None outside one."""
    rank, world = _int(environ.get("RANK")), _int(environ.get("WORLD_SIZE"))
    if rank is None or world is None:
        return None
    return RankInfo(
        rank=rank,
        world_size=world,
        local_rank=_int(environ.get("LOCAL_RANK")),
        local_world_size=_int(environ.get("LOCAL_WORLD_SIZE")),
        group_rank=_int(environ.get("GROUP_RANK")),
        job_id=_job_id(environ),
        node=socket.gethostname(),
        pid=os.getpid(),
        cuda_visible_devices=environ.get("CUDA_VISIBLE_DEVICES"),
    )


def is_multi_rank(environ: Mapping[str, str] = os.environ) -> bool:
    """True under torchrun with more than one rank: each rank then writes its own record and the ranks merge."""
    return (_int(environ.get("WORLD_SIZE")) or 1) > 1 and _int(environ.get("RANK")) is not None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _job_id(environ: Mapping[str, str]) -> str | None:
    # torchrun's run id is "none" unless --rdzv-id is given on multi-node jobs; the scheduler's id is then better.
    for key in ("TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID"):
        value = environ.get(key)
        if value and value != "none":
            return value
    master = environ.get("MASTER_ADDR"), environ.get("MASTER_PORT")
    return f"{master[0]}:{master[1]}" if all(master) else None


class DistributedObserver:
    """Fills `run.rank_info` under torchrun, and for a single process that wraps its model in DataParallel."""

    def __init__(self, environ: Mapping[str, str] | None = None, clock: Callable[[], float] | None = None) -> None:
        self._environ = os.environ if environ is None else environ
        self._clock_fn = clock
        self._run: Run | None = None
        self._info: RankInfo | None = None
        self._patches = Patches()
        self._active = False
        self._wrap: ModelWrap | None = None
        self._set_device: tuple[str, str | None] | None = None
        self._backend: tuple[str | None, str | None] | None = None
        self._loaders: dict[int, RankLoader] = {}
        self._stats = CollectiveStats()
        self._load_sites: list[str] = []
        self._ddp_seen: IdentityMap[Any, bool] = IdentityMap()
        self._t0_s = time.perf_counter()

    # --- Observer protocol ---------------------------------------------------------------------------------------

    def start(self, run: Run) -> None:
        self._run = run
        self._t0_s = time.perf_counter()
        self._info = rank_from_env(self._environ)
        self._active = True
        try:
            self._install()
        except Exception:  # an instrumentation failure must never stop the user's job
            self._undo()

    def window_ended(self) -> None:
        """The probe window ended: the wrappers come out; what they saw stays for `finish`."""
        self._active = False
        self._undo()

    def finish(self, run: Run) -> None:
        self._active = False
        self._undo()
        try:
            info = self._info
            if info is None and self._wrap is not None:
                # A single process that spreads over GPUs (DataParallel): rank 0 of a world of one.
                info = RankInfo(rank=0, world_size=1, node=socket.gethostname(), pid=os.getpid())
            if info is None:
                return
            self._fill(info, run)
            run.rank_info = info
        except Exception as exc:  # same: report what we have, never raise into the job
            if self._info is not None:
                self._info.gpu_processes_unavailable = f"distributed observer failed: {exc!r}"
                run.rank_info = self._info

    # --- installing the wrappers -----------------------------------------------------------------------------------

    def _install(self) -> None:
        import torch
        from torch import nn

        self._wrap_after(nn.DataParallel, "__init__", self._on_dataparallel)
        if self._info is None:
            return
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel
        from torch.utils.data import DataLoader

        self._wrap_after(DistributedDataParallel, "__init__", self._on_ddp)
        self._patch(DistributedDataParallel, "forward", self._ddp_forward)
        self._patch(dist, "init_process_group", self._timed_init_process_group)
        for name in COLLECTIVES:
            self._patch(dist, name, functools.partial(self._timed_collective, name))
        self._patch(torch.cuda, "set_device", self._recording_set_device)
        self._patch(DataLoader, "__iter__", self._recording_iter)
        self._patch(torch, "load", self._recording_load)

    def _patch(self, owner: Any, name: str, make: Callable[..., Any]) -> None:
        self._patches.wrap(owner, name, make)

    def _wrap_after(self, cls: type, name: str, after: Callable[..., None]) -> None:
        def make(original: Callable[..., Any], obj: Any, /, *args: Any, **kwargs: Any) -> Any:
            result = original(obj, *args, **kwargs)
            with contextlib.suppress(Exception):
                after(obj, *args, **kwargs)
            return result

        self._patch(cls, name, make)

    def _undo(self) -> None:
        self._patches.restore()
        if _COMM_TIMING.observer is self:
            _COMM_TIMING.observer = None

    def _now_s(self) -> float:
        # Seconds since start(), on perf_counter like the step probe, so events line up with Step.start_s.
        if self._clock_fn is not None:
            return self._clock_fn()
        return time.perf_counter() - self._t0_s

    # --- the wrapped calls -------------------------------------------------------------------------------------------

    def _timed_init_process_group(self, original: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        where = user_where()
        result = original(*args, **kwargs)
        with contextlib.suppress(Exception):
            import torch.distributed as dist

            self._backend = (str(dist.get_backend()), where)
        return result

    def _timed_collective(self, name: str, original: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        start_s = self._now_s()
        result = original(*args, **kwargs)
        self._stats.calls += 1
        if result is None:  # a synchronous call: the time in it was spent waiting for the other ranks
            self._record(name, start_s, self._now_s() - start_s)
        return result

    def _record(self, op: str, start_s: float, wait_s: float) -> None:
        self._stats.wait_s += wait_s
        if len(self._stats.events) < MAX_EVENTS:
            self._stats.events.append(CollectiveEvent(op=op, t_s=start_s, wait_s=wait_s))
        else:
            self._stats.events_dropped += 1

    def _recording_set_device(self, original: Callable[..., Any], device: Any, /, *args: Any, **kwargs: Any) -> Any:
        result = original(device, *args, **kwargs)
        with contextlib.suppress(Exception):
            import torch

            index = torch.cuda.current_device()
            self._set_device = (f"cuda:{index}", user_where())
        return result

    def _recording_iter(self, original: Callable[..., Any], loader: Any) -> Any:
        with contextlib.suppress(Exception):
            self._on_loader_iter(loader)
        return original(loader)

    def _recording_load(self, original: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        if len(args) < 2 and kwargs.get("map_location") is None and len(self._load_sites) < MAX_LOAD_SITES:
            where = user_where()
            if where is not None:
                self._load_sites.append(where)
        return original(*args, **kwargs)

    # --- what the wrappers saw ---------------------------------------------------------------------------------------

    def _on_dataparallel(self, dp: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        device_ids = [int(d) for d in getattr(dp, "device_ids", []) or []]
        self._wrap = ModelWrap(
            kind="dataparallel",
            module_class=type(module).__name__,
            device_ids=device_ids,
            gpu_count=len(device_ids),
            param_device=_param_device(module),
            where=user_where(),
        )

    def _on_ddp(self, ddp: Any, module: Any, *args: Any, **kwargs: Any) -> None:
        device_ids = kwargs.get("device_ids", args[0] if args else None)
        param_device = _param_device(module)
        self._wrap = ModelWrap(
            kind="ddp",
            module_class=type(module).__name__,
            device_ids=[_device_index(d) for d in device_ids] if device_ids else None,
            gpu_count=1 if param_device and param_device.startswith("cuda") else None,
            param_device=param_device,
            where=user_where(),
        )
        if self._environ.get(envnames.DDP_COMM_TIMING, "1") == "0":
            self._stats.ddp_untimed_reason = f"{envnames.DDP_COMM_TIMING}=0"

    def _ddp_forward(self, original: Callable[..., Any], ddp: Any, /, *args: Any, **kwargs: Any) -> Any:
        if self._ddp_seen.get(ddp) is None:
            self._ddp_seen[ddp] = True
            if self._environ.get(envnames.DDP_COMM_TIMING, "1") != "0":
                with contextlib.suppress(Exception):
                    self._install_comm_timer(ddp)
        return original(ddp, *args, **kwargs)

    def _install_comm_timer(self, ddp: Any) -> None:
        """Time DDP's gradient all-reduce with a hook equivalent to DDP's default (divide, then all-reduce)."""
        if getattr(ddp, "_comm_hooks", None):
            self._stats.ddp_untimed_reason = "the job registered its own DDP comm hook"
            return
        from torch.distributed.distributed_c10d import _get_default_group

        if getattr(ddp, "process_group", None) is not _get_default_group():
            self._stats.ddp_untimed_reason = "the DDP model uses its own process group"
            return
        try:
            ddp.register_comm_hook(None, timed_allreduce)
        except Exception as exc:  # a builtin hook already registered: leave DDP as it is
            self._stats.ddp_untimed_reason = f"cannot add the timing hook: {exc}"
            return
        # Nothing of ours on the user's object: the C++ reducer keeps the hook, but DDP's own list of hooks (which only
        # its compiled-autograd path reads, and which `torch.save(ddp_model)` pickles by reference) must not name
        # gputriage, or the saved model cannot be loaded where gputriage is not installed.
        with contextlib.suppress(AttributeError, TypeError):
            ddp._comm_hooks[:] = [entry for entry in ddp._comm_hooks if entry[0] is not timed_allreduce]
        self._stats.ddp_timed = True
        _COMM_TIMING.observer = self

    def _allreduce_done(self, start_s: float) -> None:
        if self._active:
            self._stats.calls += 1
            self._record("ddp_allreduce", start_s, self._now_s() - start_s)

    def _on_loader_iter(self, loader: Any) -> None:
        seen = self._loaders.get(id(loader))
        if seen is not None:
            seen.iterations += 1
            return
        self._loaders[id(loader)] = _describe_loader(loader, user_where())

    # --- at the end --------------------------------------------------------------------------------------------------

    def _fill(self, info: RankInfo, run: Run) -> None:
        info.wrap = self._wrap
        info.loaders = list(self._loaders.values())
        info.collectives = self._stats
        ddp_untimed = self._wrap is not None and self._wrap.kind == "ddp" and not self._stats.ddp_timed
        if ddp_untimed and self._stats.ddp_untimed_reason is None:
            self._stats.ddp_untimed_reason = "the DDP model was never called (its .module was, or no step ran)"
        info.load_without_map_location = list(self._load_sites)
        if self._backend is not None:
            info.backend, info.backend_where = self._backend
        else:
            info.backend = _current_backend()
        self._fill_device(info, run)

    def _fill_device(self, info: RankInfo, run: Run) -> None:
        import torch

        cuda_ready = bool(torch.cuda.is_available() and torch.cuda.is_initialized())  # type: ignore[no-untyped-call]
        chosen, chosen_where = self._set_device or (None, None)
        models = run.placement.models if run.placement is not None else []
        # The `.to()` / `.cuda()` that put the model on its device, else where the model was built.
        model_where = next((m.moved_where or m.where for m in models if m.moved_where or m.where), None)
        if self._wrap is not None and self._wrap.param_device is not None:
            info.device, info.device_source = self._wrap.param_device, self._wrap.kind
        elif chosen is not None:
            info.device, info.device_source = chosen, "set_device"
        elif cuda_ready:
            info.device, info.device_source = f"cuda:{torch.cuda.current_device()}", "current_device"
        info.device_where = (
            chosen_where if chosen == info.device else model_where or (self._wrap.where if self._wrap else None)
        )
        if not cuda_ready:
            return
        info.cuda_device_count = torch.cuda.device_count()
        for index in range(info.cuda_device_count):
            reserved = int(torch.cuda.memory_reserved(index))
            if reserved:
                info.cuda_reserved_bytes[f"cuda:{index}"] = reserved
        if info.device is not None and info.device.startswith("cuda:"):
            with contextlib.suppress(Exception):
                uuid = torch.cuda.get_device_properties(int(info.device.split(":")[1])).uuid
                info.device_uuid = f"GPU-{uuid}" if not str(uuid).startswith(("GPU-", "MIG-")) else str(uuid)
        info.gpu_processes, info.gpu_processes_unavailable = read_gpu_processes()


class _CommTiming:
    """The observer timing DDP's all-reduce now; None after the window (the hook then only divides and all-reduces)."""

    observer: DistributedObserver | None = None


_COMM_TIMING = _CommTiming()


def timed_allreduce(state: object, bucket: Any) -> Any:
    """DDP comm hook: what DDP does by default on its default process group (average the bucket across ranks), timed
    while the probe window is on. Module-level and stateless, so the DDP model still pickles and copies."""
    from torch.distributed import distributed_c10d as c10d  # the real all_reduce, never our timing wrapper

    tensor = bucket.buffer()
    tensor.div_(c10d.get_world_size())
    timing = _COMM_TIMING.observer
    last = bucket.is_last()
    start_s = timing._now_s() if timing is not None else 0.0
    future = c10d.all_reduce(tensor, async_op=True).get_future()

    def done(fut: Any) -> Any:
        if last and timing is not None:
            timing._allreduce_done(start_s)
        return fut.value()[0]

    return future.then(done)


# DDP checks a comm hook's annotations against its own types; postponed annotations are strings, so none are shown.
timed_allreduce.__annotations__ = {}


def _param_device(module: Any) -> str | None:
    for tensor in module.parameters():
        return str(tensor.device)
    return None


def _device_index(device: Any) -> int:
    index = getattr(device, "index", device)
    return int(index) if index is not None else 0


def _current_backend() -> str | None:
    with contextlib.suppress(Exception):
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return str(dist.get_backend())
    return None


def _describe_loader(loader: Any, where: str | None) -> RankLoader:
    from torch.utils.data import BatchSampler, IterableDataset

    from gputriage.collectors.probe.loader import dataset_length, length, own_object

    batch_sampler = getattr(loader, "batch_sampler", None)
    custom_batches = batch_sampler is not None and type(batch_sampler) is not BatchSampler
    sampler = batch_sampler if custom_batches else getattr(loader, "sampler", None)
    dataset = getattr(loader, "dataset", None)
    return RankLoader(
        sampler_class=type(sampler).__name__ if sampler is not None else None,
        dataset_class=type(dataset).__name__ if dataset is not None else None,
        dataset_len=dataset_length(dataset, getattr(loader, "sampler", None)),
        # torch's own samplers only: the job's may count, cost or raise (see dataset_length)
        samples_per_epoch=None if custom_batches or not own_object(sampler) else length(sampler),
        batch_size=getattr(loader, "batch_size", None),
        is_iterable_dataset=isinstance(dataset, IterableDataset),
        iterations=1,
        where=where,
    )


def read_gpu_processes(lib: Any | None = None) -> tuple[list[NodeGpuProcess] | None, str | None]:
    """Every compute process on this node's GPUs, through the one NVML module; (None, reason) where NVML cannot."""
    from gputriage.hardware.nvml import Unavailable, open_nvml

    with open_nvml(lib) as nvml:
        if not nvml.ok:
            return None, str(nvml.init_error)
        count = nvml.query("nvmlDeviceGetCount")
        if isinstance(count, Unavailable):
            return None, str(count)
        found: list[NodeGpuProcess] = []
        for index in range(int(count)):
            handle = nvml.query("nvmlDeviceGetHandleByIndex", index)
            if isinstance(handle, Unavailable):
                continue
            uuid = nvml.query("nvmlDeviceGetUUID", handle)
            procs = nvml.query("nvmlDeviceGetComputeRunningProcesses", handle)
            if isinstance(procs, Unavailable):
                return None, str(procs)
            for proc in procs:
                used = getattr(proc, "usedGpuMemory", None)
                found.append(
                    NodeGpuProcess(
                        gpu_index=index,
                        pid=int(proc.pid),
                        gpu_uuid=None if isinstance(uuid, Unavailable) else _text(uuid),
                        used_memory_bytes=int(used) if isinstance(used, int) else None,
                    )
                )
        return found, None


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)
