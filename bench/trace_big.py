"""A generated 1.2 GB trace through `gputriage trace`: peak RSS (goal < 400 MB on a 2-core machine) and time.

    .venv/bin/python bench/trace_big.py [SIZE_MB ...]

Several sizes show how peak RSS grows with the file. The generated files go under bench/out/ and are deleted.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from trace_gen import generate

ROOT = Path(__file__).resolve().parent.parent
OUR_PY = ROOT / ".venv" / "bin" / "python"
_WRAPPER = (
    "import resource, subprocess, sys, time;"
    "t=time.perf_counter();"
    "p=subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL);"
    "w=time.perf_counter()-t;"
    "u=resource.getrusage(resource.RUSAGE_CHILDREN);"
    "print(p.returncode, w, u.ru_utime + u.ru_stime, u.ru_maxrss)"
)


def run_once(trace: Path) -> tuple[float, float, float]:
    """(wall s, CPU s, peak RSS MiB) of `gputriage trace FILE --json` in its own process."""
    cmd = [str(OUR_PY), "-m", "gputriage", "trace", str(trace), "--json"]
    out = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], capture_output=True, text=True, check=True).stdout
    code, wall, cpu, rss_kib = out.split()
    if code != "0":
        raise SystemExit(f"gputriage trace failed with exit code {code}")
    return float(wall), float(cpu), int(rss_kib) / 1024


def main() -> None:
    sizes = [float(s) for s in sys.argv[1:]] or [1200.0]
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    for size in sizes:
        trace = out / f"big_{int(size)}.json"
        try:
            events = generate(trace, size)
            wall, cpu, rss = run_once(trace)
            mib = trace.stat().st_size / 2**20
            print(
                f"{mib:6.0f} MiB, {events:9d} events: {wall:6.1f} s wall, {cpu:6.1f} s CPU, "
                f"{mib / wall:5.1f} MiB/s, peak RSS {rss:5.0f} MiB (goal < 400)",
                flush=True,
            )
        finally:
            trace.unlink(missing_ok=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout still runs the clean-up of bench/out
    main()
