"""The DistributedObserver on real torch in this process: a world of one gloo rank, a DataParallel model, NVML fakes."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler

from gputriage.collectors.distributed import DistributedObserver, rank_from_env, read_gpu_processes
from gputriage.hardware.fake import NVML_ERROR_DRIVER_NOT_LOADED, FakeNvml, FakeProcess
from gputriage.hardware.fake_scenarios import h100
from gputriage.record import Run

HERE = Path(__file__).name
TORCHRUN_ENV = {
    "RANK": "0",
    "WORLD_SIZE": "1",
    "LOCAL_RANK": "0",
    "LOCAL_WORLD_SIZE": "1",
    "GROUP_RANK": "0",
    "TORCHELASTIC_RUN_ID": "none",
    "SLURM_JOB_ID": "81723",
}


def line_of(marker: str) -> str:
    text = Path(__file__).read_text().splitlines()
    number = next(i for i, line in enumerate(text, 1) if line.rstrip().endswith(f"# <{marker}>"))
    return f"tests/distributed/{HERE}:{number}"


@pytest.fixture
def observed() -> Iterator[tuple[DistributedObserver, Run]]:
    observer, run = DistributedObserver(environ=TORCHRUN_ENV), Run(command="run")
    observer.start(run)
    yield observer, run
    observer.finish(run)  # idempotent enough for a test that already finished
    if dist.is_initialized():
        dist.destroy_process_group()


def test_place_in_the_job_comes_from_torchrun_and_the_scheduler() -> None:
    info = rank_from_env({**TORCHRUN_ENV, "RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "GROUP_RANK": "1"})
    assert info is not None
    assert (info.rank, info.world_size, info.local_rank, info.group_rank) == (3, 8, 1, 1)
    assert info.job_id == "81723"  # torchrun's run id is "none" without --rdzv-id: the Slurm job id names the job
    assert rank_from_env({"LOCAL_RANK": "0"}) is None


def test_a_ddp_rank_records_backend_wrap_loader_and_timed_allreduce(
    observed: tuple[DistributedObserver, Run], tmp_path: Path
) -> None:
    observer, run = observed
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())  # <init>
    dataset = TensorDataset(torch.randn(40, 4), torch.randn(40, 1))
    loader = DataLoader(dataset, batch_size=5, sampler=DistributedSampler(dataset, num_replicas=2, rank=0))
    model = DistributedDataParallel(nn.Linear(4, 1))  # <ddp>
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:  # <loop>
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
    total = torch.ones(1)
    dist.all_reduce(total)
    torch.save({"w": torch.ones(2)}, tmp_path / "ckpt.pt")
    torch.load(tmp_path / "ckpt.pt")  # <load>
    torch.load(tmp_path / "ckpt.pt", map_location="cpu")
    observer.finish(run)

    info = run.rank_info
    assert info is not None
    assert (info.backend, info.backend_where) == ("gloo", line_of("init"))
    assert info.wrap is not None and info.wrap.kind == "ddp" and info.wrap.where == line_of("ddp")
    assert (info.device, info.device_source) == ("cpu", "ddp")
    [seen] = info.loaders
    assert (seen.sampler_class, seen.dataset_len, seen.samples_per_epoch) == ("DistributedSampler", 40, 20)
    assert seen.where == line_of("loop")
    assert info.collectives.ddp_timed, info.collectives.ddp_untimed_reason
    ops = [e.op for e in info.collectives.events]
    assert ops == ["ddp_allreduce"] * 4 + ["all_reduce"]  # one per backward (20 samples / 5), then ours
    assert info.collectives.calls == 5
    assert info.load_without_map_location == [line_of("load")]
    assert dist.all_reduce.__module__ == "torch.distributed.distributed_c10d"  # the wrappers are gone


def test_ddp_timing_steps_aside_for_the_jobs_own_comm_hook(observed: tuple[DistributedObserver, Run]) -> None:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    observer, run = observed
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    model = DistributedDataParallel(nn.Linear(4, 1))
    model.register_comm_hook(None, default_hooks.allreduce_hook)
    model(torch.randn(2, 4)).sum().backward()
    observer.finish(run)
    assert run.rank_info is not None
    stats = run.rank_info.collectives
    assert not stats.ddp_timed and stats.ddp_untimed_reason == "the job registered its own DDP comm hook"


def test_a_timed_ddp_model_saved_whole_loads_where_gputriage_is_not_installed(
    observed: tuple[DistributedObserver, Run], tmp_path: Path
) -> None:
    """A trial: `torch.save(ddp_model)` pickled the timing hook by reference, and loading it without gputriage failed
    with ModuleNotFoundError. DDP's list of hooks holds nothing of ours; the reducer still times the all-reduce."""
    observer, run = observed
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    model = DistributedDataParallel(nn.Linear(4, 1))
    model(torch.randn(2, 4)).sum().backward()
    assert model._comm_hooks == []
    saved = io.BytesIO()
    torch.save(model, saved)
    assert b"gputriage" not in saved.getvalue()
    model(torch.randn(2, 4)).sum().backward()
    observer.finish(run)
    assert run.rank_info is not None and run.rank_info.collectives.ddp_timed
    assert [e.op for e in run.rank_info.collectives.events] == ["ddp_allreduce"] * 2


def test_dataparallel_in_a_single_process_is_recorded_as_a_world_of_one() -> None:
    observer, run = DistributedObserver(environ={}), Run(command="run")
    observer.start(run)
    nn.DataParallel(nn.Linear(4, 1))  # <dp>
    observer.finish(run)
    assert run.rank_info is not None and run.rank_info.world_size == 1
    assert run.rank_info.wrap is not None
    assert (run.rank_info.wrap.kind, run.rank_info.wrap.where) == ("dataparallel", line_of("dp"))
    assert run.rank_info.wrap.gpu_count == torch.cuda.device_count()


def test_a_plain_single_process_run_gets_no_rank_info() -> None:
    observer, run = DistributedObserver(environ={}), Run(command="run")
    observer.start(run)
    nn.Linear(4, 1)(torch.randn(1, 4))
    observer.finish(run)
    assert run.rank_info is None


def test_nvml_lists_every_process_on_every_gpu_of_the_node() -> None:
    gpus = [h100(0, processes=[FakeProcess(11, 2 * 1024**3), FakeProcess(12, None)]), h100(1)]
    procs, reason = read_gpu_processes(FakeNvml(gpus))
    assert reason is None and procs is not None
    assert [(p.gpu_index, p.pid, p.used_memory_bytes, p.gpu_uuid) for p in procs] == [
        (0, 11, 2 * 1024**3, gpus[0].uuid),
        (0, 12, None, gpus[0].uuid),
    ]
    none, why = read_gpu_processes(FakeNvml([], init_error=NVML_ERROR_DRIVER_NOT_LOADED))
    assert none is None and why is not None and "Driver Not Loaded" in why
