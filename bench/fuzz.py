"""The long fuzz run: tracebacks, hangs and peak memory per input kind, over N mutated cases each.

    .venv/bin/python bench/fuzz.py [--cases 10000] [--seed 1] [--kinds trace env records] [--timeout 60]

Cases come from tests/fuzzing.py (one generator per input kind: traces, and pasted env texts through
tests/env/env_fuzz.py; a kind added there is fuzzed here). The `records` kinds (rank records of a torchrun folder,
and saved report.json documents) need a folder per case and their own judge: bench/fuzz_records.py runs them, and
this script runs it too and prints its table. A worker
process runs the cases of one kind in turn through the real CLI and reports each; the parent restarts it past a
case that runs longer than --timeout (a hang). A traceback is any exception other than the one clean error line.
Peak RSS is the worker's maximum resident set over its cases. Failing cases are listed as kind:seed:index, which
`python tests/fuzzing.py KIND SEED INDEX` writes back to a file.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import select
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


@dataclass
class Tally:
    cases: int = 0
    refused: int = 0  # exit 2 with one line
    tracebacks: list[str] = field(default_factory=list)
    hangs: list[str] = field(default_factory=list)
    peak_rss_mib: float = 0.0
    slowest_s: float = 0.0
    slowest: str = ""


def worker(kind: str, seed: int, start: int, stop: int) -> None:
    """Run cases [start, stop) of one kind; one JSON line per case on stdout."""
    import fuzzing
    from gputriage.cli import main

    report = sys.stdout
    with tempfile.TemporaryDirectory(prefix="gputriage-fuzz-") as tmp:
        for index in range(start, stop):
            one = fuzzing.case(kind, seed, index)
            path = Path(tmp) / f"case{one.suffix}"
            path.write_bytes(one.data)
            started = time.monotonic()
            outcome, detail = "ok", ""
            sink_out, sink_err = io.TextIOWrapper(io.BytesIO()), io.StringIO()  # the JSON goes to stdout.buffer
            try:
                with contextlib.redirect_stdout(sink_out), contextlib.redirect_stderr(sink_err):
                    code = main(fuzzing.KINDS[kind].argv(path))
                if code == 2:
                    outcome = "refused" if sink_err.getvalue().count("\n") == 1 else "traceback"
                    detail = sink_err.getvalue()[-2000:]
                elif code not in (0, 1):
                    outcome, detail = "traceback", f"exit code {code}"
            except BaseException:  # the point: anything but the clean line is a finding
                outcome, detail = "traceback", traceback.format_exc()[-4000:]
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            line = {"index": index, "label": one.label, "outcome": outcome, "s": time.monotonic() - started}
            line.update(rss_mib=rss, detail=detail if outcome == "traceback" else "")
            print(json.dumps(line), file=report, flush=True)


def run_kind(kind: str, seed: int, cases: int, timeout_s: float) -> Tally:
    tally = Tally()
    index = 0
    while index < cases:
        cmd = [sys.executable, __file__, "--worker", kind, str(seed), str(index), str(cases)]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
        assert proc.stdout is not None
        while index < cases:
            ready, _, _ = select.select([proc.stdout], [], [], timeout_s)
            if not ready:  # the case at `index` did not finish in time
                proc.kill()
                proc.wait()
                tally.hangs.append(f"{kind}:{seed}:{index}")
                tally.cases += 1
                index += 1
                break
            raw = proc.stdout.readline()
            if not raw:  # the worker died (a crash outside Python): count it as a traceback and go on
                proc.wait()
                tally.tracebacks.append(f"{kind}:{seed}:{index} worker died with {proc.returncode}")
                tally.cases += 1
                index += 1
                break
            _record(tally, json.loads(raw))
            index += 1
        else:
            proc.wait()
    return tally


def _record(tally: Tally, line: dict[str, object]) -> None:
    tally.cases += 1
    tally.peak_rss_mib = max(tally.peak_rss_mib, float(line["rss_mib"]))  # type: ignore[arg-type]
    took = float(line["s"])  # type: ignore[arg-type]
    if took > tally.slowest_s:
        tally.slowest_s, tally.slowest = took, str(line["label"])
    if line["outcome"] == "refused":
        tally.refused += 1
    elif line["outcome"] == "traceback":
        tally.tracebacks.append(f"{line['label']}\n{line['detail']}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
        return
    import fuzzing

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=1)
    kinds = [*fuzzing.KINDS, "records"]  # "records": rank records and report.json, through the merge and the report
    parser.add_argument("--kinds", nargs="*", choices=kinds, default=kinds)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds after which one case is a hang")
    args = parser.parse_args()
    if not fuzzing.have_corpus():
        print("note: ../shared/corpus is absent: fuzzing synthetic seeds only", flush=True)
    print(
        f"{'kind':8s} {'cases':>6s} {'refused':>8s} {'tracebacks':>10s} {'hangs':>6s} {'peak RSS':>9s} {'slowest':>8s}"
    )
    for kind in args.kinds:
        if kind == "records":
            continue
        started = time.monotonic()
        tally = run_kind(kind, args.seed, args.cases, args.timeout)
        print(
            f"{kind:8s} {tally.cases:6d} {tally.refused:8d} {len(tally.tracebacks):10d} {len(tally.hangs):6d} "
            f"{tally.peak_rss_mib:6.0f} MiB {tally.slowest_s:6.1f} s   ({time.monotonic() - started:.0f} s; slowest: "
            f"{tally.slowest})",
            flush=True,
        )
        for failure in tally.tracebacks[:10]:
            print(f"  traceback: {failure}")
        for hang in tally.hangs[:10]:
            print(f"  hang: {hang}")
    if "records" in args.kinds:
        records = [sys.executable, str(ROOT / "bench" / "fuzz_records.py"), "--cases", str(args.cases)]
        subprocess.run([*records, "--seed", str(args.seed)], check=False)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    main()
