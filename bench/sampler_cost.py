"""What the NVML sampler thread costs a training loop: a busy main thread timed without and with it.

The main thread runs a pure-Python loop (the worst case: it needs the GIL all the time, as a Python-heavy training
step does). The sampler runs over the fake NVML, so this measures gputriage's own share (the Python around each
call), not the driver's ioctl time, which a real GPU adds. Prints ratios against the baseline in the same process.

    .venv/bin/python bench/sampler_cost.py [--seconds 2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

from gputriage.hardware.fake_scenarios import scenario_library
from gputriage.hardware.nvml import open_nvml
from gputriage.hardware.sampler import GpuSampler, JobSpec


def busy_loop(iterations: int) -> float:
    """Wall seconds of a fixed amount of pure-Python work."""
    start = time.perf_counter()
    total = 0
    for i in range(iterations):
        total += i * i % 7
    return time.perf_counter() - start


def calibrate(seconds: float) -> int:
    iterations = 100_000
    while busy_loop(iterations) < seconds / 4:
        iterations *= 2
    return int(iterations * seconds / busy_loop(iterations))


def with_sampler(scenario: str, interval_s: float, iterations: int) -> tuple[float, float, int]:
    """(loop wall seconds, sampler thread CPU seconds, ticks) with the sampler running beside the loop."""
    lib = scenario_library(scenario)
    with open_nvml(lib) as session:
        sampler = GpuSampler(session, interval_s=interval_s, job=JobSpec(root_pid=4242))
        sampler.open()
        cpu_before, main_before = time.process_time(), time.thread_time()
        sampler.start()
        wall_s = busy_loop(iterations)
        sampler.stop()
        main_cpu_s = time.thread_time() - main_before
        sampler_cpu_s = max(0.0, time.process_time() - cpu_before - main_cpu_s)
        ticks = sampler.section().devices[0].summary.sample_count
    return wall_s, sampler_cpu_s, ticks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one busy loop")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    iterations = calibrate(args.seconds)
    baseline = statistics.median(busy_loop(iterations) for _ in range(args.repeats))
    print(f"baseline busy loop: {baseline:.3f} s (median of {args.repeats})")
    print(f"{'scenario':<14} {'rate':>6} {'GPUs':>4} {'loop ratio':>10} {'sampler CPU share':>18} {'per tick':>9}")
    for scenario, gpus in (("busy_a100", 1), ("eight_gpus", 8)):
        for interval_s in (0.2, 0.1):
            # Pair each run with a fresh baseline: the machine's load drifts more than the sampler costs.
            ratios, shares, per_tick = [], [], []
            for _ in range(args.repeats):
                base_s = busy_loop(iterations)
                wall_s, cpu_s, ticks = with_sampler(scenario, interval_s, iterations)
                ratios.append(wall_s / base_s)
                shares.append(100 * cpu_s / wall_s)
                per_tick.append(1e6 * cpu_s / max(ticks, 1))
            print(
                f"{scenario:<14} {1 / interval_s:>4.0f}Hz {gpus:>4} {statistics.median(ratios):>10.4f} "
                f"{statistics.median(shares):>17.2f}% {statistics.median(per_tick):>7.0f}µs"
            )


if __name__ == "__main__":
    main()
