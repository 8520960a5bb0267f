"""Peak memory against trace size: generated traces through `gputriage trace`, one fresh process each.

    .venv/bin/python bench/trace_big.py [--shape cnn] [--jobs N] [SIZE_MB ...]      (default sizes: 300 1200 5000)

The reader keeps statistics and one window of the timeline, never the events, so peak RSS should stay flat as the
trace grows (goal: under 250 MiB at every size). Peak RSS is the largest single process's (the main one or a
byte-range worker). Each generated file goes under bench/out/ and is deleted after its run; temporary run files
of the reader go to $TMPDIR and are deleted by it.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from measure import compile_as_installed, measure
from trace_gen import generate

ROOT = Path(__file__).resolve().parent.parent
OUR_PY = ROOT / ".venv" / "bin" / "python"
GOAL_MIB = 250


def run_once(trace: Path, jobs: int | None) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of `gputriage trace FILE --json` in its own process."""
    cmd = [str(OUR_PY), "-m", "gputriage", "trace", str(trace), "--json"]
    if jobs is not None:
        cmd += ["--jobs", str(jobs)]
    result = measure(cmd)
    assert result is not None
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sizes", nargs="*", type=float, default=[300.0, 1200.0, 5000.0])
    parser.add_argument("--shape", default="cnn")
    parser.add_argument("--jobs", type=int, default=None, help="default: gputriage's own (one per core)")
    args = parser.parse_args()
    print(compile_as_installed(), flush=True)
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    peaks = []
    for size in args.sizes:
        trace = out / f"big_{int(size)}.json"
        try:
            events = generate(trace, size, shape=args.shape)
            wall, cpu, rss = run_once(trace, args.jobs)
            peaks.append(rss)
            mib = trace.stat().st_size / 2**20
            print(
                f"{mib:6.0f} MiB, {events:11,d} events: {wall:7.1f} s wall, {cpu:7.1f} s CPU, "
                f"{mib / wall:5.1f} MiB/s, peak RSS {rss:5.0f} MiB (goal < {GOAL_MIB})",
                flush=True,
            )
        finally:
            trace.unlink(missing_ok=True)
    if len(peaks) > 1:
        print(f"peak RSS from the smallest to the largest trace: x{peaks[-1] / peaks[0]:.2f} (flat: close to 1)")


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout still runs the clean-up of bench/out
    main()
