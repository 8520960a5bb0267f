"""How the file-level merge of per-rank records scales: output size, merge time and memory, projected to 1,024 ranks.

Generates the records that N ranks of 8-GPU nodes would write (each rank samples the 8 GPUs it can see for a long run:
600 kept samples per GPU, 50 observed steps, 50 timed all-reduces, NVML's process list), merges them in a fresh
process per N (`record.merge.load_job` + `commands.rank_report.write_merged`: diagnose every rank, write every
report file), and fits
a line through 8, 64 and 512 ranks. The log-log slope says whether the growth is linear (1.0) or worse.

    .venv/bin/python bench/merge_scale.py [--ranks 8 64 512] [--project 1024]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from gputriage.commands.rank_report import write_rank_record
from gputriage.record import Run, run_from_dict, run_to_dict
from gputriage.record.environment import DriverFacts, Environment, GpuDevice, HostFacts, TorchFacts
from gputriage.record.gpu import GpuProcess, GpuSample, GpuSection, GpuSummary, GpuTrack
from gputriage.record.process import ProcessSection
from gputriage.record.ranks import CollectiveEvent, CollectiveStats, ModelWrap, NodeGpuProcess, RankInfo, RankLoader
from gputriage.record.steps import LoaderInfo, Step, StepsSection

GPUS_PER_NODE = 8
SAMPLES_PER_GPU = 600  # the sampler's DEFAULT_MAX_SAMPLES: a long run keeps this many per GPU
STEPS = 50
GIB = 1024**3


def gpu_section(node_pids: list[int]) -> GpuSection:
    tracks = []
    for index in range(GPUS_PER_NODE):
        samples = [
            GpuSample(
                t_s=i * 0.2,
                gpu_util_pct=float(90 + i % 10),
                mem_util_pct=float(40 + i % 7),
                memory_used_bytes=52 * GIB,
                power_w=455.0,
                sm_clock_mhz=1980,
                mem_clock_mhz=2619,
                temperature_c=61,
                throttle_reasons=[],
            )
            for i in range(SAMPLES_PER_GPU)
        ]
        procs = [GpuProcess(pid=node_pids[index], command="python -u train.py", used_memory_bytes=52 * GIB)]
        summary = GpuSummary(sample_count=6000, window_s=1200.0, util_mean_pct=95.0, memory_used_max_bytes=53 * GIB)
        tracks.append(
            GpuTrack(
                index=index,
                name="NVIDIA H100 80GB HBM3",
                cuda_index=index,
                uuid=f"GPU-h100{index:04d}",
                memory_total_bytes=80 * GIB,
                samples=samples,
                summary=summary,
                processes=procs,
            )
        )
    return GpuSection(available=True, driver_version="550.90.07", devices=tracks)


def template() -> dict[str, Any]:
    """One rank's record as a dict; the generator only rewrites what differs per rank."""
    run = Run(command="run", argv=["train.py", "--epochs", "90"], expect_device="cuda")
    devices = [GpuDevice(index=i, name="NVIDIA H100 80GB HBM3", uuid=f"GPU-h100{i:04d}") for i in range(8)]
    run.environment = Environment(
        torch=TorchFacts(installed=True, version="2.5.1+cu124", cuda_version="12.4", is_available=True, device_count=8),
        driver=DriverFacts(nvml_loaded=True, driver_version="550.90.07", cuda_driver_version="12.4", devices=devices),
        host=HostFacts(python_version="3.11.7", platform="Linux-5.15-x86_64"),
        env_vars={f"VAR_{i}": "x" * 20 for i in range(25)},
    )
    run.process = ProcessSection(exit_code=0)
    run.steps = StepsSection(
        steps=[Step(index=i, start_s=10 + i * 0.3, wall_s=0.3, forward_s=0.1, backward_s=0.2) for i in range(STEPS)],
        loader=LoaderInfo(dataset_class="ImageFolder", dataset_len=1_281_167, batch_size=256, num_workers=8),
    )
    run.gpu = gpu_section([5000 + i for i in range(GPUS_PER_NODE)])
    run.rank_info = RankInfo(rank=0, world_size=1, backend="nccl", job_id="bench")
    return run_to_dict(run)


def rank_doc(base: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    rng = random.Random(rank)
    local = rank % GPUS_PER_NODE
    late_s = 0.08 if rank == world // 3 else 0.0  # one straggler, so the cross-rank rule has work to do
    steps, events = [], []
    for i in range(STEPS):
        data_s = 0.002 + late_s + rng.random() * 0.001
        wait_s = 0.08 - late_s + rng.random() * 0.002
        start_s = 10 + i * 0.3
        steps.append(
            Step(
                index=i,
                start_s=start_s,
                wall_s=data_s + 0.1 + wait_s,
                data_wait_s=data_s,
                forward_s=0.1,
                backward_s=wait_s,
            )
        )
        events.append(CollectiveEvent(op="ddp_allreduce", t_s=start_s + data_s + 0.1, wait_s=wait_s))
    info = RankInfo(
        rank=rank,
        world_size=world,
        local_rank=local,
        local_world_size=GPUS_PER_NODE,
        node=f"node-{rank // GPUS_PER_NODE:03d}",
        backend="nccl",
        job_id="bench",
        pid=5000 + local,
        device=f"cuda:{local}",
        device_source="set_device",
        device_where="train.py:31",
        device_uuid=f"GPU-h100{local:04d}",
        cuda_device_count=GPUS_PER_NODE,
        cuda_reserved_bytes={f"cuda:{local}": 52 * GIB},
        gpu_processes=[NodeGpuProcess(gpu_index=g, pid=5000 + g, used_memory_bytes=52 * GIB) for g in range(8)],
        wrap=ModelWrap(kind="ddp", module_class="ResNet", device_ids=[local], gpu_count=1, where="train.py:40"),
        loaders=[
            RankLoader(
                sampler_class="DistributedSampler",
                dataset_len=1_281_167,
                samples_per_epoch=math.ceil(1_281_167 / world),
                batch_size=256,
                iterations=1,
                where="train.py:52",
            )
        ],
        collectives=CollectiveStats(calls=STEPS, wait_s=sum(e.wait_s for e in events), ddp_timed=True, events=events),
    )
    doc = dict(base)
    doc["created_at_s"] = base["created_at_s"] + rank * 1e-3
    doc["rank_info"] = msgspec.to_builtins(info)
    doc["steps"] = {**base["steps"], "steps": msgspec.to_builtins(steps)}
    return doc


def generate(folder: Path, world: int) -> int:
    """Write the records through the ranks' own write path; return their total size."""
    base = template()
    return sum(write_rank_record(run_from_dict(rank_doc(base, r, world)), folder).stat().st_size for r in range(world))


def rss_bytes() -> int:
    with Path("/proc/self/statm").open() as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(folder: Path) -> None:
    """Runs in a fresh process: merge the folder's records and print the numbers as JSON."""
    from gputriage.commands.rank_report import write_merged
    from gputriage.record.merge import load_job

    before_bytes = rss_bytes()
    start = time.perf_counter()
    merged = load_job([folder])
    loaded = time.perf_counter()
    assert merged is not None and merged.ranks is not None
    write_merged(merged, folder)
    done = time.perf_counter()
    peak_bytes = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    report_bytes = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
    doc = json.loads((folder / "report.json").read_text())
    codes = sorted({f["code"] for f in doc["findings"]})
    print(
        json.dumps(
            {
                "load_s": loaded - start,
                "diagnose_write_s": done - loaded,
                "merge_s": done - start,
                "memory_bytes": max(peak_bytes - before_bytes, 0),
                "report_json_bytes": (folder / "report.json").stat().st_size,
                "report_files_bytes": report_bytes,
                "codes": codes,
            }
        )
    )


def fit(ranks: list[int], values: list[float], at: int) -> tuple[float, float, float]:
    """(projection at `at`, per-rank slope, log-log exponent) of a least-squares line."""
    slope, intercept = np.polyfit(ranks, values, 1)
    exponent = np.polyfit(np.log(ranks), np.log(np.maximum(values, 1e-9)), 1)[0]
    return float(intercept + slope * at), float(slope), float(exponent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[8, 64, 512])
    parser.add_argument("--project", type=int, default=1024)
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure is not None:
        measure(args.measure)
        return
    rows = []
    for world in args.ranks:
        folder = Path(tempfile.mkdtemp(prefix=f"gputriage-merge-{world}-"))
        try:
            input_bytes = generate(folder, world)
            out = subprocess.run(
                [sys.executable, __file__, "--measure", str(folder)], check=True, capture_output=True, text=True
            )
            row = json.loads(out.stdout)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        row.update(ranks=world, rank_files_bytes=input_bytes)
        rows.append(row)
        first = rows[0]
        # Growth against the smallest job in this session: 1.00 means the cost per rank did not grow with the job.
        row["per_rank_time_vs_first"] = (row["merge_s"] / world) / (first["merge_s"] / first["ranks"])
        row["per_rank_memory_vs_first"] = (row["memory_bytes"] / world) / (first["memory_bytes"] / first["ranks"])
        print(
            f"{world:5d} ranks: rank files {input_bytes / 2**20:8.1f} MiB -> report.json "
            f"{row['report_json_bytes'] / 2**20:7.2f} MiB (all files {row['report_files_bytes'] / 2**20:7.2f} MiB), "
            f"merge {row['merge_s']:6.2f} s (read {row['load_s']:.2f} s), "
            f"memory {row['memory_bytes'] / 2**20:7.1f} MiB, per rank vs {first['ranks']} ranks: "
            f"time x{row['per_rank_time_vs_first']:.2f}, memory x{row['per_rank_memory_vs_first']:.2f}, "
            f"findings {row['codes']}"
        )
    ranks = [r["ranks"] for r in rows]
    print(f"\nprojected to {args.project} ranks (least-squares line through {ranks}; exponent 1.0 = linear):")
    for key, unit, scale in (
        ("rank_files_bytes", "MiB", 2**20),
        ("report_json_bytes", "MiB", 2**20),
        ("report_files_bytes", "MiB", 2**20),
        ("merge_s", "s", 1),
        ("memory_bytes", "MiB", 2**20),
    ):
        value, slope, exponent = fit(ranks, [r[key] for r in rows], args.project)
        print(
            f"  {key:20s} {value / scale:9.2f} {unit:3s} (per rank {slope / scale:.4f} {unit}; exponent {exponent:.2f})"
        )


if __name__ == "__main__":
    main()
