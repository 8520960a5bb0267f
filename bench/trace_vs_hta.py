"""gputriage trace vs Holistic Trace Analysis on the same generated trace: time and peak RSS, end to end.

Both tools run in fresh subprocesses, alternating (gputriage, HTA, gputriage, HTA, ...), so machine noise hits both.
HTA (`traceinsight` on PyPI) lives in its own venv, bench/.venv-hta, never in the project's:

    python3 -m venv bench/.venv-hta && bench/.venv-hta/bin/pip install traceinsight
    .venv/bin/python bench/trace_vs_hta.py [SIZE_MB] [ROUNDS]

Work measured: HTA's get_temporal_breakdown + get_idle_time_breakdown (after its parse); gputriage's whole
`trace --json` (parse, every analysis, rules, report). The generated trace is deleted afterwards.
"""

from __future__ import annotations

import signal
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from trace_gen import generate

ROOT = Path(__file__).resolve().parent.parent
HTA_PY = ROOT / "bench" / ".venv-hta" / "bin" / "python"
OUR_PY = ROOT / ".venv" / "bin" / "python"
HTA_SCRIPT = """
import logging, sys
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = TraceAnalysis(trace_dir=sys.argv[1])
temporal = t.get_temporal_breakdown(visualize=False)
idle, _ = t.get_idle_time_breakdown(visualize=False)
print(temporal.to_string()); print(idle.to_string())
"""


def _child_rss_mib(cmd: list[str]) -> tuple[float, float, float]:
    # ru_maxrss of RUSAGE_CHILDREN is a maximum over all children so far, so each measurement runs in its own
    # small wrapper process that reports its one child's peak.
    wrapper = (
        "import resource, subprocess, sys, time;"
        "t=time.perf_counter();"
        "p=subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL);"
        "w=time.perf_counter()-t;"
        "u=resource.getrusage(resource.RUSAGE_CHILDREN);"
        "print(p.returncode, w, u.ru_utime + u.ru_stime, u.ru_maxrss)"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, *cmd], capture_output=True, text=True, check=True).stdout
    code, wall, cpu, rss_kib = out.split()
    if code != "0":
        raise SystemExit(f"{' '.join(cmd[:3])} ... failed with exit code {code}")
    return float(wall), float(cpu), int(rss_kib) / 1024


def main() -> None:
    size_mb = float(sys.argv[1]) if len(sys.argv) > 1 else 300.0
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    if not HTA_PY.exists():
        raise SystemExit(
            f"HTA is not installed: python3 -m venv {HTA_PY.parent.parent} && {HTA_PY.parent}/pip install traceinsight"
        )
    folder = ROOT / "bench" / "out" / "hta_vs"
    folder.mkdir(parents=True, exist_ok=True)
    trace = folder / "rank-0.json"
    try:
        events = generate(trace, size_mb)
        print(f"trace: {trace.stat().st_size / 2**20:.0f} MiB, {events} events")
        ours_cmd = [str(OUR_PY), "-m", "gputriage", "trace", str(trace), "--json"]
        hta_cmd = [str(HTA_PY), "-c", HTA_SCRIPT, str(folder)]
        ours: list[tuple[float, float, float]] = []
        hta: list[tuple[float, float, float]] = []
        for i in range(rounds):
            for label, cmd, runs in (("gputriage", ours_cmd, ours), ("HTA", hta_cmd, hta)):
                runs.append(_child_rss_mib(cmd))
                wall, cpu, rss = runs[-1]
                print(f"round {i + 1}: {label:9s} {wall:6.1f} s wall {cpu:6.1f} s CPU {rss:6.0f} MiB", flush=True)
        summary = {}
        for label, runs in (("gputriage", ours), ("HTA", hta)):
            wall = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            rss = max(r[2] for r in runs)
            summary[label] = (wall, cpu, rss)
            print(f"{label:9s}: {wall:6.1f} s wall, {cpu:6.1f} s CPU, peak RSS {rss:6.0f} MiB")
        (ow, oc, om), (hw, hc, hm) = summary["gputriage"], summary["HTA"]
        print(f"speed-up {hw / ow:.1f}x wall, {hc / oc:.1f}x CPU (goal >= 10x); RSS ratio {om / hm:.2f} (goal <= 0.25)")
    finally:
        trace.unlink(missing_ok=True)


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a timeout still runs the clean-up of bench/out
    main()
