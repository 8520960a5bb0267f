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


_SPIN = "n = 0\nfor i in range(10_000_000): n += i"


def parallel_capacity(processes: int) -> float:
    """How many processes' worth of work this machine really does at once: `processes` copies of a CPU-bound loop
    run together, against one alone. A container's '2 cores' can be two hyperthreads of one core, or a CPU quota;
    a --jobs scaling ratio is read against this number, not against the core count."""
    one = measure([sys.executable, "-c", _SPIN])
    assert one is not None
    together = measure([sys.executable, "-c", f"import subprocess, sys\nps = [subprocess.Popen([sys.executable, "
                        f"'-c', {_SPIN!r}]) for _ in range({processes})]\nfor p in ps: p.wait()"])  # fmt: skip
    assert together is not None
    return processes * one[0] / together[0]


def compile_as_installed() -> str:
    """Write the bytecode of gputriage's own modules, as `pip install` leaves it, and say so.

    The dev set-up installs gputriage editable, and where PYTHONDONTWRITEBYTECODE is set (it is on the development
    machines) Python never writes that bytecode: every gputriage process compiled every module it imported, about
    0.1 s of start-up that no installed user pays. Python reads an existing .pyc even with that variable set, and
    recompiles a module whose source changed since."""
    import compileall
    from pathlib import Path

    src = Path(__file__).resolve().parent.parent / "src" / "gputriage"
    compileall.compile_dir(str(src), quiet=1)
    return "gputriage's modules run from bytecode, as an installed gputriage does (src/gputriage compiled)"
