"""Accuracy on real training scripts: does `gputriage run` name the expected cause, at the right line?

Two sets of cases, each described by an EXPECTED.tsv (case, command args, expected root cause, acceptable codes,
must-not-report codes, expected where, notes; the format of ../shared/corpus/scripts/README.md):
- the shared corpus of real public scripts, ../shared/corpus/scripts (read in place, never copied; skipped when absent);
- the project's own cases, tests/scripts/EXPECTED.tsv (patterns the corpus lacks).

How a case is run is one parameter, `--mode`: `preflight` (the default: `run --preflight`, the CUDA stand-in, the
scripts pick "cuda" themselves as on the GPU machine), `meta` (DEVICE=meta, --expect-device meta) or `cpu` (DEVICE=cpu,
--expect-device cpu). Prints one row per case:
expected cause, what gputriage said, whether `where` was right, and the verdict. With `--repeat N` each case runs N
times and the row counts how often it was right, and how often a healthy control got a warning or a critical.

    .venv/bin/python bench/accuracy.py [--mode preflight] [--set corpus|project|all] [--repeat 1] [--jobs 2] [CASE ...]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT / "tests"))
# The EXPECTED.tsv reader lives with the tests, which read the same files.
from expected_cases import (  # noqa: E402
    CORPUS_SCRIPTS,
    HEALTHY,
    PROJECT_SCRIPTS,
    Expected,
    read_expected,
    where_matches,
)

__all__ = ["CORPUS_SCRIPTS", "HEALTHY", "PROJECT_SCRIPTS", "Expected", "read_expected", "where_matches"]
MODES = ("meta", "cpu", "preflight")
# Rung-1 findings at info say why no GPU is used on this machine; the corpus README allows them everywhere.
ALWAYS_ALLOWED_INFO = {"no-gpu-visible", "cpu-only-build"}
RUN_TIMEOUT_S = 600


# -- running a case ----------------------------------------------------------------------------------------------------


def command(mode: str, case: Expected, out_dir: Path) -> tuple[list[str], dict[str, str]]:
    """The `gputriage run` command line and environment for one case in one mode: the one place the mode matters."""
    script, *args = case.args
    base = [sys.executable, "-m", "gputriage", "run", "--out", str(out_dir)]
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if mode == "preflight":  # the scripts pick "cuda" themselves, as on the GPU machine
        env.pop("DEVICE", None)
        env.pop("TRIAGE_DEVICE", None)
        return [*base, "--preflight", str(case.folder / script), *args], env
    env["DEVICE"] = env["TRIAGE_DEVICE"] = mode  # the corpus's scripts read DEVICE, the project's TRIAGE_DEVICE
    return [*base, "--expect-device", mode, str(case.folder / script), *args], env


def run_case(mode: str, case: Expected, work: Path) -> dict[str, Any]:
    """Run one case in a scratch folder outside the scripts' folder; its report.json ({} when none was written)."""
    work.mkdir(parents=True, exist_ok=True)
    out = work / "gputriage-out"
    argv, env = command(mode, case, out)
    try:
        proc = subprocess.run(
            argv, check=False, cwd=work, env=env, capture_output=True, text=True, timeout=RUN_TIMEOUT_S
        )
        (work / "stdout").write_text(proc.stdout)
        (work / "stderr").write_text(proc.stderr)
    except subprocess.TimeoutExpired:
        return {}
    report = out / "report.json"
    doc: dict[str, Any] = json.loads(report.read_text()) if report.is_file() else {}
    return doc


# -- scoring -------------------------------------------------------------------------------------------------------


@dataclass
class Score:
    case: str
    expected: str
    got: str  # the root cause, "healthy", or "unknown"
    verdict: str
    right: bool  # the expected root cause (or healthy) was named
    acceptable: bool  # not the expected one, but a code the case accepts
    where_right: bool | None  # None: no line was expected, or no finding to check
    false_alarms: list[str] = field(default_factory=list)  # warning/critical codes the case must not report
    unexpected: list[str] = field(default_factory=list)  # other warning/critical codes outside the acceptable list

    @property
    def healthy_control_alarmed(self) -> bool:
        return self.expected == HEALTHY and bool(self.false_alarms or self.unexpected)


def _serious(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report.get("findings", []) if f.get("severity") in ("critical", "warning")]


def score(case: Expected, report: dict[str, Any]) -> Score:
    verdict = report.get("verdict") or {}
    root = verdict.get("root_cause")
    status = verdict.get("status", "no report")
    got = root or (HEALTHY if status == HEALTHY else status)
    serious = _serious(report)
    false_alarms = sorted({f["code"] for f in serious if f["code"] in case.must_not})
    unexpected = sorted(
        {
            f["code"]
            for f in serious
            if f["code"] != case.root
            and not case.acceptable_at(f["code"], f["severity"])
            and f["code"] not in case.must_not
        }
    )
    if case.root == HEALTHY:
        right = status == HEALTHY and not false_alarms and not unexpected
        return Score(case.case, case.root, got, status, right, False, None, false_alarms, unexpected)
    right = root == case.root
    acceptable = not right and root is not None and case.acceptable_at(root, "critical")
    where_right = None
    if case.where:
        named = [f for f in serious if f["code"] == case.root] or [f for f in serious if f["code"] == root]
        where_right = any(where_matches(f.get("where"), case.where) for f in named) if named else False
    return Score(case.case, case.root, got, status, right, acceptable, where_right, false_alarms, unexpected)


# -- the table -------------------------------------------------------------------------------------------------------


def cases_for(which: str, names: Sequence[str]) -> list[Expected]:
    found = []
    if which in ("corpus", "all"):
        found += read_expected(CORPUS_SCRIPTS)
    if which in ("project", "all"):
        found += read_expected(PROJECT_SCRIPTS)
    return [c for c in found if not names or c.case in names]


def _mark(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "NO")


def table(results: dict[str, list[Score]]) -> str:
    rows = [("case", "expected cause", "got", "where right", "right", "notes")]
    for name, scores in results.items():
        first = scores[0]
        gots = sorted({s.got for s in scores})
        right = sum(s.right for s in scores)
        wheres = [s.where_right for s in scores if s.where_right is not None]
        where = _mark(all(wheres)) if wheres else "-"
        notes = []
        if any(s.acceptable for s in scores):
            notes.append("acceptable code")
        alarms = sorted({c for s in scores for c in s.false_alarms})
        if alarms:
            notes.append("must-not: " + ",".join(alarms))
        extra = sorted({c for s in scores for c in s.unexpected})
        if extra:
            notes.append("unexpected: " + ",".join(extra))
        alarmed = sum(s.healthy_control_alarmed for s in scores)
        if first.expected == HEALTHY and len(scores) > 1:
            notes.append(f"warned/critical in {alarmed} of {len(scores)} runs")
        rows.append((name, first.expected, "/".join(gots), where, f"{right}/{len(scores)}", "; ".join(notes)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def summary(results: dict[str, list[Score]]) -> str:
    scores = [s for runs in results.values() for s in runs]
    mistakes = [s for s in scores if s.expected != HEALTHY]
    controls = [s for s in scores if s.expected == HEALTHY]
    wheres = [s.where_right for s in mistakes if s.where_right is not None]
    return (
        f"mistakes named: {sum(s.right for s in mistakes)}/{len(mistakes)} "
        f"(+{sum(s.acceptable for s in mistakes)} acceptable); "
        f"where right: {sum(bool(w) for w in wheres)}/{len(wheres)}; "
        f"healthy controls right: {sum(s.right for s in controls)}/{len(controls)}, "
        f"with a warning or critical: {sum(s.healthy_control_alarmed for s in controls)}/{len(controls)}"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=MODES, default="preflight")
    parser.add_argument("--set", choices=("corpus", "project", "all"), default="all", dest="which")
    parser.add_argument("--repeat", type=int, default=1)
    # One case at a time: two preflights at once on this 2-core machine (about 1.1 cores of real work, see
    # bench/measure.py parallel_capacity) slow the stand-in's multi-threaded compute tenfold, and the step shares
    # with it.
    parser.add_argument("--jobs", type=int, default=1, help="cases run at once")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: a temporary one)")
    parser.add_argument("cases", nargs="*")
    args = parser.parse_args(argv)
    cases = cases_for(args.which, args.cases)
    if not cases:
        print(f"no cases found (corpus: {CORPUS_SCRIPTS}, project: {PROJECT_SCRIPTS})", file=sys.stderr)
        return 2
    work = args.work or Path(tempfile.mkdtemp(prefix="gputriage-accuracy-"))
    jobs = [(c, i) for c in cases for i in range(args.repeat)]
    with ThreadPoolExecutor(max(1, args.jobs)) as pool:
        futures = [pool.submit(run_case, args.mode, c, work / f"{c.case}-{i}") for c, i in jobs]
        reports = [f.result() for f in futures]
    results: dict[str, list[Score]] = {}
    for (case, _), report in zip(jobs, reports, strict=True):
        results.setdefault(case.case, []).append(score(case, report))
    print(f"mode: {args.mode}, {args.repeat} run(s) per case; reports under {work}")
    print(table(results))
    print(summary(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
