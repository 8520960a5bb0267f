"""Saved Run records the report tests render: built here as a collector would have filled them.

Each builder is one situation a user meets: a healthy run, a machine without GPU data, a crash, a distributed job,
a trace-only analysis, a long run. `INJECTION` goes into every user-controlled string, to prove it stays text.
"""

from __future__ import annotations

import math
import random

from gputriage.diagnosis import Diagnosis
from gputriage.diagnosis.ladder import build_ladder
from gputriage.diagnosis.verdict import build_verdict
from gputriage.findings import Finding, Severity, root_cause_order
from gputriage.record import Run
from gputriage.record.compute import ComputeSection
from gputriage.record.environment import DriverFacts, Environment, GpuDevice, TorchFacts
from gputriage.record.gpu import GpuSample, GpuSection, GpuTrack
from gputriage.record.merge import merge_runs
from gputriage.record.placement import ModelInfo, PlacementSection
from gputriage.record.process import ProcessSection
from gputriage.record.ranks import ModelWrap, RankInfo
from gputriage.record.steps import LoaderInfo, Step, StepsSection
from gputriage.record.trace import IdleBreakdown, RankTrace, StepBreakdown, SyncSummary, TraceSection

INJECTION = "</script><img src=x onerror=alert(1)>"
CREATED_AT_S = 1_764_460_800.0  # fixed, so renders are byte-for-byte reproducible
GIB = 2**30


def make_step(index: int, start_s: float, *, data_wait_s: float, rank: int | None = None) -> Step:
    """A step whose phases add up to its wall time exactly (integer microseconds keep the float sums exact)."""
    h2d_s, forward_s, sync_s, backward_s, optimizer_s, other_s = 0.002, 0.010, 0.001, 0.020, 0.004, 0.003
    wall_s = data_wait_s + h2d_s + forward_s + sync_s + backward_s + optimizer_s + other_s
    return Step(
        index=index,
        start_s=start_s,
        wall_s=wall_s,
        data_wait_s=data_wait_s,
        h2d_s=h2d_s,
        forward_s=forward_s,
        sync_s=sync_s,
        backward_s=backward_s,
        optimizer_s=optimizer_s,
        other_s=other_s,
        rank=rank,
    )


def make_steps(count: int, data_wait_s: float, rank: int | None = None, start_s: float = 1.0) -> list[Step]:
    steps = []
    t_s = start_s
    for i in range(count):
        step = make_step(i, t_s, data_wait_s=data_wait_s, rank=rank)
        steps.append(step)
        t_s += step.wall_s
    return steps


def make_samples(count: int, period_s: float, util_pct: float, memory_bytes: int) -> list[GpuSample]:
    return [
        GpuSample(t_s=i * period_s, gpu_util_pct=util_pct, mem_util_pct=util_pct / 2, memory_used_bytes=memory_bytes)
        for i in range(count)
    ]


def environment() -> Environment:
    return Environment(
        torch=TorchFacts(installed=True, version="2.4.1+cu121", cuda_version="12.1", is_available=True),
        driver=DriverFacts(
            nvml_loaded=True,
            driver_version="550.54.15",
            devices=[GpuDevice(index=0, name="NVIDIA A100-SXM4-80GB", memory_total_bytes=80 * GIB)],
        ),
    )


def loader(dataset_class: str = "ImageFolder") -> LoaderInfo:
    return LoaderInfo(
        dataset_class=dataset_class,
        dataset_len=50_000,
        batch_size=64,
        num_workers=0,
        pin_memory=False,
        persistent_workers=False,
        is_iterable_dataset=False,
        where="train.py:31",
    )


def model(name: str = "ResNet", devices: dict[str, int] | None = None) -> ModelInfo:
    return ModelInfo(name=name, parameter_count=11_689_512, devices=devices or {"cuda:0": 11_689_512})


def starved_run(step_count: int = 40, sample_count: int = 60) -> Run:
    """A single-GPU run that waits for its DataLoader: 60 ms of a ~100 ms step."""
    return Run(
        command="run",
        created_at_s=CREATED_AT_S,
        argv=["train.py", "--epochs", "1"],
        environment=environment(),
        process=ProcessSection(exit_code=0),
        placement=PlacementSection(models=[model()]),
        compute=ComputeSection(ops_per_device={"cuda": 812}),
        steps=StepsSection(steps=make_steps(step_count, 0.060), loader=loader(), steps_observed=step_count),
        gpu=GpuSection(
            available=True,
            devices=[
                GpuTrack(
                    index=0,
                    name="NVIDIA A100-SXM4-80GB",
                    memory_total_bytes=80 * GIB,
                    samples=make_samples(sample_count, 0.1, 31.0, 9 * GIB),
                )
            ],
        ),
    )


def lifelike_run(step_count: int = 150) -> Run:
    """The starved run with the texture of a real one: a slow first step, a jittery loader, NVML following the steps."""
    rng = random.Random(7)
    steps = []
    t_s = 0.8
    for i in range(step_count):
        forward_s = 0.9 if i == 0 else 0.010 + rng.uniform(-0.001, 0.001)  # the first forward initialises CUDA
        data_wait_s = 0.35 if i == 0 else 0.045 + 0.03 * abs(math.sin(i / 9)) + rng.uniform(0, 0.01)
        phases = (data_wait_s, 0.002, forward_s, 0.001, 0.020 + rng.uniform(-0.002, 0.002), 0.004, 0.003)
        steps.append(Step(i, t_s, sum(phases), *phases))
        t_s += sum(phases)
    samples = []
    for k in range(int(t_s / 0.1) + 1):
        at_s = k * 0.1
        busy = [s for s in steps if s.start_s <= at_s < s.start_s + s.wall_s]
        util = 0.0 if not busy else 100 * (1 - busy[0].data_wait_s / busy[0].wall_s) + rng.uniform(-6, 6)
        memory = GIB + min(1.0, at_s / 1.5) * 8 * GIB
        samples.append(GpuSample(round(at_s, 3), max(0.0, min(100.0, util)), None, int(memory)))
    run = starved_run()
    run.argv = ["train.py", "--data", "/datasets/imagenet-subset", "--batch-size", "64"]
    assert run.steps is not None and run.gpu is not None
    run.steps.steps = steps
    run.steps.cpu_count = 16
    run.gpu.devices[0].samples = samples
    return run


def healthy_run() -> Run:
    """The starved run with its DataLoader fixed: 1 ms of data wait per step, and the GPU busy 93% of the time."""
    run = starved_run()
    assert run.steps is not None and run.gpu is not None
    run.steps.steps = make_steps(40, 0.001)
    run.gpu.devices[0].samples = make_samples(60, 0.1, 93.0, 9 * GIB)
    return run


def no_gpu_run() -> Run:
    """A CPU-only machine: steps and placement were measured, NVML found nothing."""
    run = starved_run()
    run.expect_device = "meta"
    run.environment = Environment(driver=DriverFacts(nvml_loaded=False, nvml_error="NVML Shared Library Not Found"))
    run.placement = PlacementSection(models=[model(devices={"meta": 11_689_512})])
    run.gpu = GpuSection(available=False, unavailable_reason="NVML Shared Library Not Found")
    return run


def crashed_run() -> Run:
    """Died in the first forward: no step finished, the exception is the evidence."""
    return Run(
        command="run",
        created_at_s=CREATED_AT_S,
        argv=["train.py"],
        process=ProcessSection(
            exit_code=1,
            exception_type="RuntimeError",
            exception_message="Expected all tensors to be on the same device, but found at least two devices, "
            "cuda:0 and cpu!",
            crash_where="train.py:57",
            crash_module="Net.head (Linear)",
        ),
        placement=PlacementSection(models=[model(devices={"cuda:0": 11_000_000, "cpu": 689_512})]),
        steps=StepsSection(steps=[], loader=loader(), steps_observed=0),
    )


def distributed_run(world_size: int = 4, killed: tuple[int, ...] = ()) -> Run:
    """A torchrun job merged from its rank records: rank 2 waits much longer for data than the others.

    `killed` ranks died before writing their record.
    """
    records = []
    for rank in (r for r in range(world_size) if r not in killed):
        tracks = [
            GpuTrack(
                index=i,
                uuid=f"GPU-{i}",
                name="NVIDIA H100 80GB HBM3",
                memory_total_bytes=80 * GIB,
                samples=make_samples(30, 0.1, 20.0 if i == 2 else 85.0, (20 + i) * GIB),
            )
            for i in range(world_size)
        ]
        records.append(
            Run(
                command="run",
                created_at_s=CREATED_AT_S,
                argv=["torchrun", "--nproc_per_node", str(world_size), "train.py"],
                rank_info=RankInfo(
                    rank=rank,
                    world_size=world_size,
                    local_rank=rank,
                    backend="nccl",
                    node="node-a",
                    device=f"cuda:{rank}",
                    wrap=ModelWrap(kind="ddp", module_class="ResNet", device_ids=[rank]),
                ),
                process=ProcessSection(exit_code=0),
                placement=PlacementSection(models=[model("DistributedDataParallel", {f"cuda:{rank}": 11_689_512})]),
                steps=StepsSection(
                    steps=make_steps(20, 0.080 if rank == 2 else 0.005), loader=loader(), steps_observed=20
                ),
                gpu=GpuSection(available=True, devices=tracks),
            )
        )
    return merge_runs(records)


def trace_only_run(path: str = "traces/rank0.pt.trace.json", *, partition: bool = False) -> Run:
    """A `gputriage trace` record; with `partition`, the step partition and sync summary that fill every arrow."""
    return Run(
        command="trace",
        created_at_s=CREATED_AT_S,
        argv=[path],
        trace=TraceSection(
            ranks=[
                RankTrace(
                    rank=0,
                    device="NVIDIA A100-SXM4-40GB",
                    path=path,
                    steps=5,
                    window_us=512_000.0,
                    busy_pct=38.5,
                    idle_pct=61.5,
                    compute_pct=30.0,
                    non_compute_pct=8.5,
                    idle_breakdown=IdleBreakdown(host_wait_pct=70.0, kernel_wait_pct=20.0, other_pct=10.0),
                    step_time_us=102_400.0,
                    busy_pct_of_steps=40.0,
                    dataloader_pct_of_step=62.0,
                    step_breakdown=StepBreakdown(
                        kernel_pct=30.0,
                        memcpy_pct=3.0,
                        memset_pct=0.0,
                        runtime_pct=2.0,
                        dataloader_pct=62.0,
                        cpu_exec_pct=2.0,
                        other_pct=1.0,
                    )
                    if partition
                    else None,
                    syncs=SyncSummary(
                        calls=5,
                        blocking_us=2048.0,
                        calls_per_step=1.0,
                        blocking_pct_of_steps=0.4,
                        idle_after_sync_us=0.0,
                        idle_after_sync_pct=0.0,
                    )
                    if partition
                    else None,
                )
            ]
        ),
    )


def injected_run() -> Run:
    """Every user-controlled string carries the injection."""
    run = starved_run()
    run.argv = ["train.py", INJECTION]
    assert run.steps is not None and run.steps.loader is not None and run.placement is not None
    run.steps.loader.dataset_class = INJECTION
    run.placement.models[0].name = INJECTION
    run.process = ProcessSection(exit_code=1, exception_type="RuntimeError", exception_message=INJECTION)
    assert run.gpu is not None
    run.gpu.devices[0].name = INJECTION
    run.trace = trace_only_run(path=INJECTION).trace
    return run


def starvation_finding(where: str = "train.py:31") -> Finding:
    return Finding(
        code="input-pipeline-bound",
        rung=5,
        severity=Severity.CRITICAL,
        title="The step waits for the DataLoader 60% of the time",
        evidence={"data_wait_pct": 60.3, "num_workers": 0, "pin_memory": False, "step_time_s": 0.1},
        fix="loader = DataLoader(dataset, batch_size=64, num_workers=8, pin_memory=True, persistent_workers=True)",
        where=where,
    )


def diagnosis_with(run: Run, findings: list[Finding]) -> Diagnosis:
    """A Diagnosis built as `diagnose` builds one, with the findings a rule would have produced."""
    ordered = root_cause_order(findings)
    return Diagnosis(run, ordered, build_ladder(run, ordered), build_verdict(run, ordered))


def injected_finding() -> Finding:
    return Finding(
        code="host-sync-in-loop",
        rung=4,
        severity=Severity.WARNING,
        title=f"The step blocks on {INJECTION} every iteration",
        evidence={"op": INJECTION, "sync_s": 0.001, "module": INJECTION},
        fix=f"# {INJECTION}\nloss_value = loss.detach()  ```  # no .item() in the loop",
        where=f"{INJECTION}:12",
        rank=0,
    )
