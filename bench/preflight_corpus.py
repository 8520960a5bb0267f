"""The preflight on the corpus's real training scripts: what each stand-in variant finds, and what it costs.

For every case of ../shared/corpus/scripts/EXPECTED.tsv (or GPUTRIAGE_CORPUS), runs the unchanged script:

- `cpu`: `DEVICE=cpu python script` (the baseline for the cost ratios);
- `preflight`: `gputriage run --preflight` as a user runs it (CUDA simulated, computed on the CPU, ended after the
  probes' steps);
- `preflight-full`: the same for the whole script (`--steps 100000`), so its cost compares with `cpu`;
- `preflight-meta`: `--preflight --preflight-backing meta`, the same tagged stand-in holding shapes only;
- `meta`: `DEVICE=meta gputriage run --expect-device meta`, the scripts pointed at meta with placeholder reads and
  no CUDA simulation (the variant without a tag);
- `gputriage-cpu`: `DEVICE=cpu gputriage run --expect-device cpu --steps 100000` (the probes' own cost on the CPU).

Prints, per case and variant: exit code, root cause (✓ expected, ~ acceptable, ✗ other), whether the top finding's
`where` is an expected line, and CPU seconds (user+sys of the process tree, steadier than wall time on a shared
machine) and wall seconds. Then the cost ratios against `cpu` for the cases that run to their end.

    .venv/bin/python bench/preflight_corpus.py [--variants preflight,cpu] [CASE_PREFIX ...]
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests" / "preflight"))
from corpus_cases import CorpusCase, corpus_cases, corpus_scripts, where_matches  # noqa: E402  (one reader, with the tests)

GPUTRIAGE = [sys.executable, "-m", "gputriage", "run"]
ALL_STEPS = ["--steps", "100000"]
TIMEOUT_S = 900
VARIANTS: dict[str, tuple[list[str] | None, dict[str, str]]] = {
    # name: (gputriage options, or None for plain python; environment additions)
    "cpu": (None, {"DEVICE": "cpu"}),
    "preflight": (["--preflight"], {}),
    "preflight-full": (["--preflight", *ALL_STEPS], {}),
    "preflight-meta": (["--preflight", "--preflight-backing", "meta"], {}),
    "meta": (["--expect-device", "meta"], {"DEVICE": "meta"}),
    "gputriage-cpu": (["--expect-device", "cpu", *ALL_STEPS], {"DEVICE": "cpu"}),
}
COST_VARIANTS = ("preflight-full", "gputriage-cpu", "preflight")


@dataclass
class Result:
    returncode: int
    cpu_s: float
    wall_s: float
    report: dict[str, Any]


def run(folder: Path, case: CorpusCase, variant: str, work: Path) -> Result:
    options, extra_env = VARIANTS[variant]
    work.mkdir(parents=True, exist_ok=True)
    out = work / "out"
    script, *args = case.argv
    target = [str(folder / script), *args]
    cmd = [sys.executable, *target] if options is None else [*GPUTRIAGE, *options, "--out", str(out), *target]
    env = {k: v for k, v in os.environ.items() if k != "DEVICE"}
    env.update(extra_env)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start_s = time.perf_counter()
    proc = subprocess.run(cmd, cwd=work, env=env, check=False, capture_output=True, text=True, timeout=TIMEOUT_S)
    wall_s = time.perf_counter() - start_s
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    report_path = out / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    return Result(proc.returncode, cpu_s, wall_s, report)


def judged(case: CorpusCase, result: Result) -> str:
    if not result.report:
        return "-"
    root = result.report["verdict"]["root_cause"]
    serious = [f for f in result.report["findings"] if f["severity"] in ("critical", "warning")]
    mark = "✓" if root == case.root else ("~" if root in case.acceptable else "✗")
    if case.root is None and (serious or result.returncode != 0):
        mark = "✗"  # a control that warns, or crashed (then "healthy" only means nothing was measured)
    where = "n/a"
    if case.where and serious:
        where = "✓" if where_matches(serious[0]["where"], case.where) else "✗"
    return f"{mark} {root or 'healthy'} (where {where})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("prefixes", nargs="*")
    args = parser.parse_args()
    folder = corpus_scripts()
    if folder is None:
        print("corpus not found (../shared/corpus/scripts, or GPUTRIAGE_CORPUS): nothing to measure")
        return
    variants = [v for v in args.variants.split(",") if v]
    results: dict[tuple[str, str], Result] = {}
    with tempfile.TemporaryDirectory(prefix="gputriage-preflight-") as base:
        for case in corpus_cases(folder, args.prefixes):
            for variant in variants:
                result = run(folder, case, variant, Path(base) / case.name / variant)
                results[case.name, variant] = result
                print(
                    f"{case.name:38} {variant:15} rc={result.returncode:<3} {judged(case, result):60} "
                    f"cpu {result.cpu_s:6.1f}s wall {result.wall_s:6.1f}s",
                    flush=True,
                )
    if "cpu" in variants:
        print_costs(results, variants)


def print_costs(results: dict[tuple[str, str], Result], variants: list[str]) -> None:
    """Cost against the plain CPU run, for cases whose variant ran to the end (exit 0)."""
    names = sorted({name for name, _ in results})
    for variant in (v for v in COST_VARIANTS if v in variants):
        ratios = []
        for name in names:
            base, other = results.get((name, "cpu")), results.get((name, variant))
            if base is None or other is None or other.returncode != 0 or base.returncode != 0:
                continue
            ratios.append((name, other.cpu_s / base.cpu_s, other.wall_s / base.wall_s))
        if ratios:
            cpu_ratio = statistics.median(r for _, r, _ in ratios)
            wall_ratio = statistics.median(r for _, _, r in ratios)
            cases_text = ", ".join(f"{n[:2]} ×{c:.2f}" for n, c, _ in ratios)
            print(f"{variant} / cpu: median CPU time ×{cpu_ratio:.2f}, wall ×{wall_ratio:.2f} ({cases_text})")


if __name__ == "__main__":
    main()
