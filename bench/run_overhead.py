"""Whole-process cost of `gputriage run` on a CPU training job of ~800 small steps, against the plain job.

Runs alternate (plain, gputriage, torch.profiler) so that machine noise hits all three alike; prints the median wall
time of each and the ratios to plain. The goal for gputriage is a ratio of at most 1.03, its probe window included.

    .venv/bin/python bench/run_overhead.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

JOB = Path(__file__).resolve().parent / "run_overhead_job.py"
GOAL_RATIO = 1.03


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the child and its children): CPU time is steadier on a shared machine."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start_s = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall_s = time.perf_counter() - start_s
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall_s, cpu_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as out:
        variants = {
            "plain": ([sys.executable, str(JOB)], env),
            "gputriage run": ([sys.executable, "-m", "gputriage", "run", "--out", out, str(JOB)], env),
            "torch.profiler": ([sys.executable, str(JOB)], {**env, "BENCH_PROFILE": "1"}),
        }
        timed(*variants["plain"])  # warm the file cache
        walls: dict[str, list[float]] = {name: [] for name in variants}
        cpus: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.repeats):
            for name, (cmd, variant_env) in variants.items():
                wall_s, cpu_s = timed(cmd, variant_env)
                walls[name].append(wall_s)
                cpus[name].append(cpu_s)
    plain_s = statistics.median(walls["plain"])
    plain_cpu_s = statistics.median(cpus["plain"])
    print(f"job: {JOB.name}, {args.repeats} alternating runs each, whole process, medians")
    for name, values in walls.items():
        ratio = statistics.median(values) / plain_s
        cpu_s = statistics.median(cpus[name])
        runs = [round(v, 2) for v in values]
        print(
            f"  {name:15s} wall {statistics.median(values):7.3f} s  ratio {ratio:5.3f}   "
            f"cpu {cpu_s:7.3f} s  ratio {cpu_s / plain_cpu_s:5.3f}   wall runs {runs}"
        )
    ratio = statistics.median(walls["gputriage run"]) / plain_s
    verdict = "meets" if ratio <= GOAL_RATIO else "misses"
    print(f"gputriage run / plain = {ratio:.3f} ({verdict} the goal of {GOAL_RATIO})")


if __name__ == "__main__":
    main()
