"""gputriage trace vs Holistic Trace Analysis vs the typed-decode floor, on several trace shapes, in one session.

    .venv/bin/python bench/trace_vs_hta.py [--size-mb 300] [--rounds 2] [--shapes kernels cpu real]

Shapes: two generated ones (bench/trace_gen.py: "kernels", kernel-heavy and multi-stream; "cpu", CPU-op heavy) and
"real", the largest trace of ../shared/corpus/traces (inflated to plain JSON, as tensorboard_trace_handler writes).
For each shape every command runs in its own fresh process, in turn, `--rounds` times, so machine noise hits them
all alike; the table shows medians and the ratios between them:

- gputriage `trace --json` (parse, every analysis, rules, report) with --jobs 1, 2 and one per core;
- HTA (`traceinsight`, in its own venv bench/.venv-hta): get_temporal_breakdown + get_idle_time_breakdown;
- gputriage `--jobs 1` with GPUTRIAGE_PURE_PYTHON=1: the pure-Python path, without the compiled scanner;
- the floor: one typed msgspec decode of the whole file, of only ph, name, cat, ts, dur, args.stream and
  args.correlation (ts and dur as floats), nothing else: what any exact analysis has to pay to read the trace;
- two `--jobs 1` runs at once: how much of this very work the machine's cores do together (memory bandwidth and
  shared caches included), the ceiling that `--jobs 2` is read against;
- the start-up `trace` pays in one process before it forks (the interpreter and the imports its workers need): with
  the ceiling it bounds what `--jobs 2` can reach (Amdahl), and the table says how much of that bound it reaches.

`--jobs-only` runs only gputriage's --jobs commands (no floor, no pure-Python path, no HTA).

HTA is installed with: python3 -m venv bench/.venv-hta && bench/.venv-hta/bin/pip install traceinsight
Generated files go under bench/out/ and are deleted afterwards.
"""

from __future__ import annotations

import argparse
import gzip
import os
import shlex
import shutil
import signal
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from measure import compile_as_installed, measure, parallel_capacity
from trace_gen import generate

ROOT = Path(__file__).resolve().parent.parent
HTA_PY = ROOT / "bench" / ".venv-hta" / "bin" / "python"
OUR_PY = ROOT / ".venv" / "bin" / "python"
CORPUS = ROOT.parent / "shared" / "corpus" / "traces"
HTA_SCRIPT = """
import logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = TraceAnalysis(trace_dir=sys.argv[1])
temporal = t.get_temporal_breakdown(visualize=False)
idle, _ = t.get_idle_time_breakdown(visualize=False)
print(temporal.to_string()); print(idle.to_string())
"""
FLOOR_SCRIPT = """
import sys, msgspec
class Args(msgspec.Struct, gc=False):
    stream: int | None = None
    correlation: int | None = None
class Event(msgspec.Struct, gc=False):
    ph: str | None = None
    name: str | None = None
    cat: str | None = None
    ts: float | None = None
    dur: float | None = None
    args: Args | None = None
class Trace(msgspec.Struct, gc=False):
    traceEvents: list[Event]
with open(sys.argv[1], "rb") as fh:
    data = fh.read()
print(len(msgspec.json.decode(data, type=Trace).traceEvents))
"""


# As the command does it: one BLAS thread (cli.py) before numpy is imported, then what the workers need.
_START_UP = "from gputriage import blas; blas.one_thread(); import gputriage.cli, gputriage.tracing.split"


def _largest_real_trace(folder: Path) -> Path:
    if not CORPUS.is_dir():
        raise SystemExit(f"the corpus is not at {CORPUS}: run with --shapes kernels cpu")
    biggest = max(CORPUS.rglob("*.json.gz"), key=lambda p: len(gzip.decompress(p.read_bytes())))
    out = folder / "rank-0.json"
    with gzip.open(biggest) as src, out.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    print(f"real: {biggest.relative_to(CORPUS)}", flush=True)
    return out


def commands(trace: Path) -> dict[str, list[str]]:
    ours = [str(OUR_PY), "-m", "gputriage", "trace", str(trace), "--json", "--jobs"]
    one = shlex.join([*ours, "1"])
    return {
        "jobs 1": [*ours, "1"],
        "jobs 2": [*ours, "2"],
        f"jobs {os.cpu_count()}": [*ours, str(os.cpu_count() or 1)],
        # two independent --jobs 1 runs at once: how much of this work two cores really do together (memory
        # bandwidth and shared caches included), the ceiling for --jobs 2 on this machine
        "2 x jobs 1": ["sh", "-c", f"{one} >/dev/null & {one} >/dev/null & wait"],
        # the same command without the compiled scanner: what a user without a C compiler at install gets
        "pure py": ["env", "GPUTRIAGE_PURE_PYTHON=1", *ours, "1"],
        "floor": [str(OUR_PY), "-c", FLOOR_SCRIPT, str(trace)],
        # what `trace` does in one process before it forks: the interpreter and the imports the workers need
        "start-up": [str(OUR_PY), "-c", _START_UP],
        "HTA": [str(HTA_PY), "-c", HTA_SCRIPT, str(trace.parent)],
    }


def run_shape(label: str, trace: Path, rounds: int, hta: bool, jobs_only: bool) -> None:
    cmds = commands(trace)
    if not hta or jobs_only:
        cmds.pop("HTA")
    if jobs_only:
        cmds.pop("pure py")
        cmds.pop("floor")
    runs: dict[str, list[tuple[float, float, float]]] = {name: [] for name in cmds}
    size = trace.stat().st_size / 2**20
    print(f"\n{label}: {size:.0f} MiB", flush=True)
    for i in range(rounds):
        for name, cmd in list(cmds.items()):
            result = measure(cmd, may_fail=name == "HTA")
            if result is None:  # HTA 0.6.1 breaks on some shapes (a pandas int16 overflow on the CPU-heavy one)
                print(f"  round {i + 1}: {name:8s} failed (exit code 1)", flush=True)
                cmds.pop(name)
                runs.pop(name)
                hta = False
                continue
            runs[name].append(result)
            wall, cpu, rss = result
            print(f"  round {i + 1}: {name:8s} {wall:7.2f} s wall {cpu:7.2f} s CPU {rss:6.0f} MiB", flush=True)
    med = {n: (statistics.median(r[0] for r in rs), statistics.median(r[1] for r in rs), max(r[2] for r in rs))
           for n, rs in runs.items()}  # fmt: skip
    print(f"  {'':10s} {'wall s':>8s} {'CPU s':>8s} {'peak RSS':>9s} {'MiB/s':>7s}")
    for name, (wall, cpu, rss) in med.items():
        print(f"  {name:10s} {wall:8.2f} {cpu:8.2f} {rss:5.0f} MiB {size / wall:7.1f}")
    all_jobs = f"jobs {os.cpu_count()}"
    j1, j2 = med["jobs 1"][0], med["jobs 2"][0]
    print(
        f"  jobs 1 / jobs 2: {j1 / j2:.2f}x (goal >= 1.8 on 2 cores); jobs 1 / {all_jobs}: {j1 / med[all_jobs][0]:.2f}x"
    )
    ceiling = 2 * j1 / med["2 x jobs 1"][0]
    print(f"  two jobs-1 runs at once do {ceiling:.2f}x the work of one: the ceiling here")
    _print_bound(j1, j2, med["start-up"][0], ceiling)
    if not jobs_only:
        floor = med["floor"][0]
        print(f"  jobs 1 / floor: {j1 / floor:.2f} (goal <= 1.2); CPU {med['jobs 1'][1] / med['floor'][1]:.2f}")
        print(f"  pure-Python path / compiled scanner (jobs 1): {med['pure py'][0] / j1:.2f}x")
    if hta:
        hw, hc, hm = med["HTA"]
        ow, oc, om = med[all_jobs]
        print(
            f"  HTA / gputriage ({all_jobs}): {hw / ow:.1f}x wall, {hc / oc:.1f}x CPU (goal >= 10x); RSS {om / hm:.2f}"
        )


def _print_bound(j1: float, j2: float, serial: float, ceiling: float) -> None:
    """Amdahl's bound for --jobs 2: the start-up before the fork runs in one process, the rest at most `ceiling`
    times faster on two. What --jobs 2 reaches is read against it, not against 2x."""
    bound = j1 / (serial + (j1 - serial) / ceiling)
    print(
        f"  start-up before the fork (interpreter, imports): {serial:.2f} s; with the ceiling, --jobs 2 can be at most "
        f"{bound:.2f}x --jobs 1; it is {j1 / j2:.2f}x, {100 * (j1 / j2 - 1) / (bound - 1):.0f}% of the way from 1x"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mb", type=float, default=300.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--shapes", nargs="*", default=["kernels", "cpu", "real"])
    parser.add_argument("--no-hta", action="store_true", help="only gputriage and the floor")
    parser.add_argument("--jobs-only", action="store_true", help="only gputriage's --jobs scaling (no floor, no HTA)")
    args = parser.parse_args()
    hta = not args.no_hta and not args.jobs_only
    if hta and not HTA_PY.exists():
        raise SystemExit(
            f"HTA is not installed: python3 -m venv {HTA_PY.parent.parent} && {HTA_PY.parent}/pip install traceinsight"
        )
    print(compile_as_installed(), flush=True)
    cores = os.cpu_count() or 1
    print(f"{cores} CPU cores; load average now {os.getloadavg()[0]:.1f}", flush=True)
    if cores > 1:
        capacity = parallel_capacity(cores)
        print(f"{cores} CPU-bound processes at once run {capacity:.2f}x the work of one: the ceiling of --jobs scaling "
              "on this machine", flush=True)  # fmt: skip
    for shape in args.shapes:
        folder = ROOT / "bench" / "out" / f"vs_{shape}"
        folder.mkdir(parents=True, exist_ok=True)
        try:
            if shape == "real":
                trace = _largest_real_trace(folder)
            else:
                trace = folder / "rank-0.json"
                events = generate(trace, args.size_mb, shape=shape)
                print(f"generated {shape}: {events:,} events", flush=True)
            run_shape(shape, trace, args.rounds, hta, args.jobs_only)
        finally:
            shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout still runs the clean-up of bench/out
    main()
