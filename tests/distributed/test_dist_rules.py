"""The distributed findings, from saved per-rank records merged by `gputriage report DIR --json`.

The device-mapping findings only show on GPUs, so these records are the ones such ranks would write: devices,
UUIDs, torch's allocator per device, and NVML's processes per GPU (read here from the fake NVML).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dist_records import RankFactory, steps_with

from gputriage.cli import main
from gputriage.collectors.distributed import read_gpu_processes
from gputriage.hardware.fake import FakeNvml, FakeProcess
from gputriage.hardware.fake_scenarios import h100, scenario_library
from gputriage.record import Run
from gputriage.record.ranks import ModelWrap, RankLoader

GIB = 1024**3
UUIDS = [h100(i).uuid for i in range(8)]


def report(capsys: pytest.CaptureFixture[str], *paths: Path) -> dict[str, Any]:
    assert main(["report", *map(str, paths), "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def codes(doc: dict[str, Any]) -> list[str]:
    return [f["code"] for f in doc["findings"]]


def finding(doc: dict[str, Any], code: str) -> dict[str, Any]:
    return next(f for f in doc["findings"] if f["code"] == code)


def gpu_ranks(make_rank: RankFactory, nvml: FakeNvml, devices: list[int], **extra: Any) -> list[Run]:
    """Four ranks of one 8-GPU node, rank r computing on cuda:devices[r]; NVML as the fake shows it."""
    procs, reason = read_gpu_processes(nvml)
    assert reason is None
    return [
        make_rank(
            r,
            len(devices),
            pid=5000 + r,
            device=f"cuda:{dev}",
            device_source="ddp",
            device_where="train.py:21",
            device_uuid=UUIDS[dev],
            cuda_device_count=8,
            gpu_processes=procs,
            **extra,
        )
        for r, dev in enumerate(devices)
    ]


def test_all_ranks_on_cuda0_is_critical_with_the_set_device_fix(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Every rank did `model.cuda()` without set_device: four contexts on GPU 0, seven GPUs idle.
    gpu0 = h100(0, processes=[FakeProcess(5000 + r, 9 * GIB) for r in range(4)])
    nvml = FakeNvml([gpu0, *(h100(i) for i in range(1, 8))])
    doc = report(capsys, write_job(gpu_ranks(make_rank, nvml, [0, 0, 0, 0])))

    assert doc["verdict"]["root_cause"] == "ranks-share-gpu"
    share = finding(doc, "ranks-share-gpu")
    assert share["severity"] == "critical" and share["rung"] == 5
    assert share["evidence"]["ranks_by_device"] == {"cuda:0": [0, 1, 2, 3]}
    assert share["evidence"]["gpus_idle"] == 7
    assert share["evidence"]["nvml_processes_by_gpu"] == {"0": 4}
    assert share["rank"] == 1  # the first rank whose device is not cuda:LOCAL_RANK
    assert share["where"] == "train.py:21"
    assert "torch.cuda.set_device(local_rank)" in share["fix"]
    assert [r["rank"] for r in doc["ranks"]["ranks"]] == [0, 1, 2, 3]


def test_one_rank_per_gpu_is_healthy(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    nvml = scenario_library("eight_gpus")
    doc = report(capsys, write_job(gpu_ranks(make_rank, nvml, list(range(8)))))
    assert not {"ranks-share-gpu", "stray-context-on-gpu", "straggler-rank"} & set(codes(doc))
    assert doc["ranks"]["world_size"] == 8 and doc["ranks"]["missing"] == []


def test_more_ranks_than_gpus_is_not_called_sharing_while_idle(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Two ranks per GPU on a 2-GPU node is a deliberate choice: no GPU sits idle.
    runs = [make_rank(r, 4, device=f"cuda:{r % 2}", device_uuid=UUIDS[r % 2], cuda_device_count=2) for r in range(4)]
    assert "ranks-share-gpu" not in codes(report(capsys, write_job(runs)))


def test_stray_context_from_torch_load_without_map_location(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Ranks 1-3 each load a checkpoint saved from cuda:0 without map_location: 1.2 GB of theirs sits on GPU 0.
    gpu0 = h100(0, processes=[FakeProcess(5000, 30 * GIB), *(FakeProcess(5000 + r, 1200 * 1024**2) for r in (1, 2, 3))])
    gpus = [gpu0, *(h100(i, processes=[FakeProcess(5000 + i, 30 * GIB)]) for i in (1, 2, 3))]
    runs = gpu_ranks(make_rank, FakeNvml(gpus), [0, 1, 2, 3], load_without_map_location=["train.py:40"])
    for run in runs[1:]:
        assert run.rank_info is not None
        run.rank_info.cuda_reserved_bytes = {run.rank_info.device or "": 30 * GIB, "cuda:0": 1100 * 1024**2}
    doc = report(capsys, write_job(runs))

    stray = finding(doc, "stray-context-on-gpu")
    assert stray["severity"] == "warning" and stray["rung"] == 5
    assert stray["rank"] == 1 and stray["evidence"]["on_ranks"] == [1, 2, 3]
    assert stray["evidence"]["stray_bytes"] == {"cuda:0": 1100 * 1024**2, "nvml:0": 1200 * 1024**2}
    assert stray["where"] == "train.py:40"
    assert "map_location" in stray["fix"]
    assert "ranks-share-gpu" not in codes(doc)


def test_gloo_on_cuda_tensors_warns_at_init_process_group(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [
        make_rank(r, 2, backend="gloo", backend_where="train.py:9", device=f"cuda:{r}", device_uuid=UUIDS[r])
        for r in range(2)
    ]
    gloo = finding(report(capsys, write_job(runs)), "gloo-with-cuda")
    assert gloo["severity"] == "warning" and gloo["where"] == "train.py:9"
    assert gloo["evidence"]["on_ranks"] == [0, 1]
    assert 'backend="nccl"' in gloo["fix"]


def test_gloo_on_cpu_and_mixed_backends_are_fine(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    runs = [
        make_rank(0, 2, backend="gloo", device="cpu"),
        make_rank(1, 2, backend="cpu:gloo,cuda:nccl", device="cuda:1"),
    ]
    assert "gloo-with-cuda" not in codes(report(capsys, write_job(runs)))


def _single_process_report(
    make_rank: RankFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str], wrap: ModelWrap
) -> dict[str, Any]:
    """`gputriage report` on the record of one process (no torchrun) that wrapped its model as `wrap` says."""
    from gputriage.record import save_run

    path = tmp_path / "run.json"
    save_run(make_rank(0, 1, wrap=wrap, job_id=None), path)
    return report(capsys, path)


def test_dataparallel_over_four_gpus_in_one_process(
    make_rank: RankFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    wrap = ModelWrap(kind="dataparallel", module_class="ResNet", device_ids=[0, 1, 2, 3], gpu_count=4, where="t.py:8")
    dp = finding(_single_process_report(make_rank, tmp_path, capsys, wrap), "dataparallel-not-ddp")
    assert dp["severity"] == "warning" and dp["where"] == "t.py:8"
    assert dp["rank"] is None  # a single process: no rank to name
    assert "torchrun --nproc_per_node=4" in dp["fix"]


@pytest.mark.parametrize(("gpu_count", "seen"), [(1, "over one GPU"), (0, "over no GPU it could see")])
def test_dataparallel_over_one_gpu_is_a_note_not_a_cause(
    make_rank: RankFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str], gpu_count: int, seen: str
) -> None:
    ids = list(range(gpu_count))
    wrap = ModelWrap(kind="dataparallel", module_class="NeuralNetwork", device_ids=ids, gpu_count=gpu_count)
    wrap.where = "train.py:115"
    doc = _single_process_report(make_rank, tmp_path, capsys, wrap)
    dp = finding(doc, "dataparallel-not-ddp")
    assert dp["severity"] == "info" and dp["where"] == "train.py:115"
    assert seen in dp["title"] and "NeuralNetwork" in dp["title"]
    assert doc["verdict"]["root_cause"] != "dataparallel-not-ddp"


def test_dataparallel_in_a_preflight_is_a_warning_with_the_count_unmeasured(
    make_rank: RankFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The preflight's stand-in has one device: that is not the GPU machine's count, and the wrapper is there only
    for several GPUs, so the advice comes before renting the machine (a real one-GPU run keeps the note above)."""
    from gputriage.record import save_run
    from gputriage.record.stand_in import StandInSection

    wrap = ModelWrap(kind="dataparallel", module_class="NeuralNetwork", device_ids=[0], gpu_count=1)
    wrap.where = "train.py:115"
    run = make_rank(0, 1, wrap=wrap, job_id=None)
    run.stand_in = StandInSection(preflight=True, simulated="cuda", device_count=1)
    save_run(run, tmp_path / "run.json")
    doc = report(capsys, tmp_path / "run.json")
    dp = finding(doc, "dataparallel-not-ddp")
    assert dp["severity"] == "warning" and dp["where"] == "train.py:115"
    assert dp["evidence"]["gpu_count"] is None  # not measured
    assert "not measured" in dp["title"] and "torchrun --nproc_per_node" in dp["fix"]


def test_dataparallels_fix_drops_the_wrapper_in_the_users_statement_and_names_their_script(
    make_rank: RankFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pytorch/examples mnist_rnn: `model = nn.DataParallel(Net()).to(device)`. The fix said `model = model.to(device)`
    there, and `torchrun ... train.py` for a script called main.py."""
    from gputriage.record import save_run
    from gputriage.record.process import ProcessSection
    from gputriage.record.source import SourceSection, SourceSnippet

    wrap = ModelWrap(kind="dataparallel", module_class="Net", device_ids=[0], gpu_count=1, where="main.py:121")
    run = make_rank(0, 1, wrap=wrap, job_id=None)
    run.process = ProcessSection(target="main.py")
    line = "    model = nn.DataParallel(Net()).to(device)"
    run.source = SourceSection([SourceSnippet("main.py", 121, line, "window", None)])
    save_run(run, tmp_path / "run.json")
    dp = finding(report(capsys, tmp_path / "run.json"), "dataparallel-not-ddp")

    assert dp["fix"].splitlines()[:3] == [
        "# on one GPU, drop the wrapper (line 121):",
        "model = Net().to(device)",
        # trial 8's VAE died at `model.module.decode(...)` once the wrapper was gone
        "# and where the script reads model.module (to save or to sample), read model",
    ]
    assert dp["fix"].endswith("torchrun --nproc_per_node=NUM_GPUS main.py")


def test_missing_sampler_compares_samples_per_rank_with_the_dataset(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    loader = RankLoader(sampler_class="RandomSampler", dataset_len=50_000, samples_per_epoch=50_000, iterations=1)
    loader.where = "train.py:33"
    doc = report(capsys, write_job([make_rank(r, 4, loaders=[loader]) for r in range(4)]))
    miss = finding(doc, "missing-distributed-sampler")
    assert miss["rung"] == 2 and miss["severity"] == "warning"
    assert miss["evidence"]["samples_per_rank_per_epoch"] == 50_000
    assert miss["evidence"]["expected_samples_per_rank_per_epoch"] == 12_500
    assert miss["evidence"]["on_ranks"] == [0, 1, 2, 3]
    assert "DistributedSampler" in miss["fix"] and miss["where"] == "train.py:33"


def test_distributed_sampler_and_iterable_datasets_are_not_flagged(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    sharded = RankLoader(sampler_class="DistributedSampler", dataset_len=100, samples_per_epoch=50, iterations=1)
    stream = RankLoader(sampler_class="_InfiniteConstantSampler", is_iterable_dataset=True, iterations=1)
    runs = [make_rank(0, 2, loaders=[sharded]), make_rank(1, 2, loaders=[stream])]
    assert "missing-distributed-sampler" not in codes(report(capsys, write_job(runs)))


def test_straggler_names_the_late_rank_and_its_slow_phase(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Rank 3 waits 120 ms per step for data; ranks 0-2 then wait ~120 ms in the gradient all-reduce for it.
    runs = []
    for r in range(4):
        steps, stats = steps_with(0.125, 0.030, 0.002) if r == 3 else steps_with(0.005, 0.030, 0.122)
        runs.append(make_rank(r, 4, steps=steps, collectives=stats, device="cpu"))
    doc = report(capsys, write_job(runs))
    late = finding(doc, "straggler-rank")
    assert late["rank"] == 3 and late["evidence"]["straggler_rank"] == 3
    assert late["evidence"]["cause_phase"] == "data_wait_s"
    assert late["evidence"]["lateness_s_per_step"] == pytest.approx(0.12)
    assert late["evidence"]["others_collective_wait_s_per_step"] == pytest.approx(0.122)
    assert "rank 3" in late["title"] and "DataLoader" in late["title"]


def test_balanced_ranks_have_no_straggler(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    runs = []
    for r in range(4):
        steps, stats = steps_with(0.005 + r * 0.001, 0.030, 0.004 - r * 0.001)
        runs.append(make_rank(r, 4, steps=steps, collectives=stats, device="cpu"))
    assert "straggler-rank" not in codes(report(capsys, write_job(runs)))


def test_a_late_rank_that_nobody_waits_for_is_not_a_straggler(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # Independent ranks (no gradient sync): one is slower, but no other rank is blocked by it.
    runs = []
    for r in range(2):
        steps, stats = steps_with(0.2 if r else 0.005, 0.03, 0.0)
        runs.append(make_rank(r, 2, steps=steps, collectives=stats, device="cpu"))
    assert "straggler-rank" not in codes(report(capsys, write_job(runs)))


def test_a_few_milliseconds_of_scheduling_noise_on_tiny_steps_is_not_a_straggler(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # 5 ms CPU steps on a busy host: rank 1 is 3 ms late (60% of the step), but that is below what a scheduler
    # time slice can explain; the same 3 ms on a 300 ms step would not reach 20% either.
    runs = []
    for r in range(2):
        steps, stats = steps_with(0.0035 if r else 0.0005, 0.001, 0.0005 if r else 0.0035)
        runs.append(make_rank(r, 2, steps=steps, collectives=stats, device="cpu"))
    assert "straggler-rank" not in codes(report(capsys, write_job(runs)))


def test_dataparallel_of_the_scripts_own_name_is_deleted_and_ddp_wraps_that_name(
    make_rank: RankFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """kuangliu/pytorch-cifar: `net = torch.nn.DataParallel(net)`. Dropping the wrapper read `net = net`, and the DDP
    lines wrapped a `model` the script does not have."""
    from gputriage.record import save_run
    from gputriage.record.process import ProcessSection
    from gputriage.record.source import SourceSection, SourceSnippet

    def fix_over(gpus: int) -> str:
        wrap = ModelWrap(
            kind="dataparallel", module_class="SimpleDLA", device_ids=[0], gpu_count=gpus, where="main.py:74"
        )
        run = make_rank(0, 1, wrap=wrap, job_id=None)
        run.process = ProcessSection(target="main.py")
        run.source = SourceSection(
            # a trailing comment too (vision-transformers-cifar10: "net = net # make parallel" was its fix)
            [SourceSnippet("main.py", 74, "    net = torch.nn.DataParallel(net)  # make parallel", "window", None)]
        )
        save_run(run, tmp_path / f"run{gpus}.json")
        return str(finding(report(capsys, tmp_path / f"run{gpus}.json"), "dataparallel-not-ddp")["fix"])

    one = fix_over(1)
    assert "# delete this line: net = torch.nn.DataParallel(net)" in one and "net = net" not in one
    assert "read net.module" not in one and "reads net.module (to save or to sample), read net" in one
    several = fix_over(4)
    assert "net = DDP(net.to(device), device_ids=[local_rank])" in several
    assert "from torch.nn.parallel import DistributedDataParallel as DDP" in several
    assert "import os\n" in several and "from torch.utils.data.distributed import DistributedSampler" in several
