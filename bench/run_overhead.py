"""What `gputriage run` costs a CPU training job, against the plain job, measured in the same session.

The cost is split the way a user meets it:
- fixed: what a job of no steps pays (start-up until the script has imported torch: gputriage's imports, the report
  worker's start, the device resolution; and the end after its last line: the record, the report);
- per step: the median step inside the probe window (the first 200 steps, `--steps`) and after it;
- whole process: an 800-step job of ~5 ms steps and a 10,000-step job of ~1 ms steps (the hard case for per-step
  hooks), wall and CPU time (the CPU of every process, gputriage's report worker included).

Runs alternate (plain, gputriage; the order flips each round) so that machine noise hits both alike; every number
is a median over the rounds. Goals (issue #17): whole-process ratio <= 1.03 on both jobs, step ratio <= 1.01 after
the window. torch.profiler's default settings are shown as the anchor users know.

    .venv/bin/python bench/run_overhead.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

JOB = Path(__file__).resolve().parent / "run_overhead_job.py"
GPUTRIAGE = Path(sys.executable).parent / "gputriage"
WINDOW_STEPS = 200  # gputriage run's default --steps
GOAL_RATIO = 1.03
GOAL_AFTER_RATIO = 1.01
JOBS = {"800 steps x 5 ms": (800, 5e-3), "10,000 steps x 1 ms": (10_000, 1e-3)}


@dataclass
class Sample:
    wall_s: float
    cpu_s: float
    head_s: float  # process start -> the script's imports done (gputriage imports torch before the script does)
    tail_s: float  # the script's last line -> process end
    in_window_s: float | None  # median step inside the probe window (step 0, the warm-up, left out)
    after_window_s: float | None


@dataclass
class Variant:
    samples: list[Sample] = field(default_factory=list)

    def median(self, name: str) -> float:
        values = [getattr(s, name) for s in self.samples if getattr(s, name) is not None]
        return statistics.median(values) if values else float("nan")


def pick_width(step_s: float) -> int:
    """The MLP width whose training step takes about `step_s` on this machine (one thread, as the job runs)."""
    import torch
    from torch import nn

    torch.set_num_threads(1)
    best_width, best_gap = 16, float("inf")
    for width in (16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 1536, 2048):
        model = nn.Sequential(nn.Linear(64, width), nn.ReLU(), nn.Linear(width, width), nn.ReLU(), nn.Linear(width, 10))
        opt = torch.optim.AdamW(model.parameters())
        x, y = torch.randn(32, 64), torch.randint(0, 10, (32,))
        times = []
        for _ in range(30):
            start_s = time.perf_counter()
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            times.append(time.perf_counter() - start_s)
        took_s = statistics.median(times[5:]) * 1.1  # the DataLoader adds about a tenth
        if abs(took_s - step_s) < best_gap:
            best_width, best_gap = width, abs(took_s - step_s)
        if took_s > step_s:
            break
    return best_width


def run_once(cmd: list[str], summary: Path, env: dict[str, str]) -> Sample:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start_wall = time.time()
    start_s = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall_s = time.perf_counter() - start_s
    end_wall = time.time()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    doc = json.loads(summary.read_text())
    steps = doc["step_s"]
    inside = steps[1:WINDOW_STEPS]
    outside = steps[WINDOW_STEPS + 1 :]
    return Sample(
        wall_s=wall_s,
        cpu_s=cpu_s,
        head_s=doc["imported_s"] - start_wall,
        tail_s=end_wall - doc["last_line_s"],
        in_window_s=statistics.median(inside) if inside else None,
        after_window_s=statistics.median(outside) if outside else None,
    )


def commands(steps: int, width: int, summary: Path, out: str) -> dict[str, list[str]]:
    job = [str(JOB), str(steps), str(width), str(summary)]
    return {
        "plain": [sys.executable, *job],
        "gputriage run": [str(GPUTRIAGE), "run", "--out", out, *job],
    }


def measure(steps: int, width: int, repeats: int, env: dict[str, str], out: str) -> dict[str, Variant]:
    summary = Path(out) / "summary.json"
    cmds = commands(steps, width, summary, str(Path(out) / "gputriage-out"))
    variants = {name: Variant() for name in cmds}
    for round_ in range(repeats):
        order = list(cmds) if round_ % 2 == 0 else list(reversed(cmds))
        for name in order:
            variants[name].samples.append(run_once(cmds[name], summary, env))
    return variants


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:+8.1f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with tempfile.TemporaryDirectory() as out:
        subprocess.run([sys.executable, str(JOB), "1", "16"], env=env, check=True, stdout=subprocess.DEVNULL)
        fixed = measure(0, 16, args.repeats, env, out)
        widths = {name: pick_width(step_s) for name, (_, step_s) in JOBS.items()}
        whole = {name: measure(JOBS[name][0], widths[name], args.repeats, env, out) for name in JOBS}

    plain, ours = fixed["plain"], fixed["gputriage run"]
    print(f"gputriage run against plain python, {args.repeats} alternating rounds, medians")
    print("fixed cost (a job of no steps):")
    print(
        f"  whole process   {ms(ours.median('wall_s') - plain.median('wall_s'))}   "
        f"cpu {ms(ours.median('cpu_s') - plain.median('cpu_s'))}"
    )
    print(
        f"  until the script's imports are done {ms(ours.median('head_s') - plain.median('head_s'))}   "
        f"after its last line {ms(ours.median('tail_s') - plain.median('tail_s'))}"
    )
    verdicts = []
    for name, variants in whole.items():
        plain, ours = variants["plain"], variants["gputriage run"]
        inside = ours.median("in_window_s") - plain.median("in_window_s")
        after = ours.median("after_window_s") - plain.median("after_window_s")
        ratio = ours.median("wall_s") / plain.median("wall_s")
        cpu_ratio = ours.median("cpu_s") / plain.median("cpu_s")
        after_ratio = ours.median("after_window_s") / plain.median("after_window_s")
        print(f"{name} (width {widths[name]}, plain step {plain.median('in_window_s') * 1e3:.2f} ms):")
        print(
            f"  per step        inside the window {inside * 1e6:+8.1f} us   after it {after * 1e6:+8.1f} us "
            f"(step ratio after the window {after_ratio:.3f}, goal <= {GOAL_AFTER_RATIO})"
        )
        print(
            f"  whole process   plain {plain.median('wall_s'):7.2f} s   gputriage {ours.median('wall_s'):7.2f} s   "
            f"ratio {ratio:.3f} (goal <= {GOAL_RATIO})   cpu ratio {cpu_ratio:.3f}"
        )
        print(
            f"  wall runs       plain {[round(s.wall_s, 2) for s in plain.samples]}   "
            f"gputriage {[round(s.wall_s, 2) for s in ours.samples]}"
        )
        verdicts.append(ratio <= GOAL_RATIO and after_ratio <= GOAL_AFTER_RATIO)
    print("meets the goals" if all(verdicts) else "misses a goal")


if __name__ == "__main__":
    main()
