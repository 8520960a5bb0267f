"""One command's wall time, CPU time and peak memory, measured from a fresh wrapper process."""

from __future__ import annotations

import subprocess
import sys

# ru_maxrss of RUSAGE_CHILDREN is a maximum over every child so far, so each measurement runs in its own small
# wrapper process that reports its one command's usage (the command's own children included: byte-range workers).
_WRAPPER = (
    "import resource, subprocess, sys, time;"
    "t=time.perf_counter();"
    "p=subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL);"
    "w=time.perf_counter()-t;"
    "u=resource.getrusage(resource.RUSAGE_CHILDREN);"
    "print(p.returncode, w, u.ru_utime + u.ru_stime, u.ru_maxrss)"
)


def measure(cmd: list[str], *, may_fail: bool = False) -> tuple[float, float, float] | None:
    """(wall s, CPU s, peak RSS MiB of the largest process) of one command.

    A failing command exits the benchmark, or gives None with `may_fail` (a baseline that breaks on a shape).
    """
    out = subprocess.run([sys.executable, "-c", _WRAPPER, *cmd], capture_output=True, text=True, check=True).stdout
    code, wall, cpu, rss_kib = out.split()
    if code != "0":
        if may_fail:
            return None
        raise SystemExit(f"{' '.join(cmd[:4])} ... failed with exit code {code}")
    return float(wall), float(cpu), int(rss_kib) / 1024
