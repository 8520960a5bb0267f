"""`make gpu-check`: on a real NVIDIA GPU, one command runs the triage end to end and prints what it found.

1. this machine: `gputriage env --json` (torch, driver, the GPU, as NVML reports it);
2. the scenario scripts of tests/scripts, written for CUDA, on the real device (no stand-in), next to the same script
   under `--preflight` on the same machine: expected and found root cause, `where`, exit code, NVML's numbers;
3. the corpus's real training scripts (../shared/corpus/scripts, or GPUTRIAGE_CORPUS) on the real device;
4. `run --trace` on a small job, and its trace read back by `gputriage trace`;
5. the `gpu`-marked tests.

It keeps to a time budget (default 540 s, so that it fits in 10 minutes on one GPU): what does not fit is listed as
not run, never as passed. Without a usable CUDA GPU it says why and exits 0; `--preflight` runs steps 2-3 on the
stand-in instead, to see the tables on a machine without a GPU. Exit code 1 when a case found another root cause
than expected, or a gpu test failed.

    .venv/bin/python bench/gpu_check.py [--budget-s 540] [--preflight] [--no-corpus]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "tests" / "scripts"
sys.path.insert(0, str(REPO / "tests" / "run"))
sys.path.insert(0, str(REPO / "tests" / "preflight"))
from corpus_cases import corpus_cases, corpus_scripts, where_matches  # noqa: E402  (the tables live with the tests)
from scenarios import SCENARIOS, Scenario  # noqa: E402

GPUTRIAGE = [sys.executable, "-m", "gputriage"]
RUN_TIMEOUT_S = 240
DEFAULT_BUDGET_S = 540
CORPUS_SMALL_JOB = {"low-gpu-utilization", "launch-bound", "pageable-memcpy"}


@dataclass
class Budget:
    total_s: float
    start_s: float = field(default_factory=time.monotonic)

    def left_s(self) -> float:
        return self.total_s - (time.monotonic() - self.start_s)


@dataclass
class Outcome:
    returncode: int
    report: dict[str, Any]
    stderr: str
    wall_s: float

    @property
    def root(self) -> str | None:
        return self.report.get("verdict", {}).get("root_cause") if self.report else None

    def serious(self) -> list[dict[str, Any]]:
        return [f for f in self.report.get("findings", []) if f["severity"] in ("critical", "warning")]

    def where(self) -> str:
        serious = self.serious()
        return str(serious[0].get("where") or "-") if serious else "-"

    def nvml(self) -> str:
        """NVML's numbers for the run: mean utilisation and peak memory of the first GPU sampled."""
        devices = ((self.report.get("gpu") or {}).get("devices")) or []
        if not devices:
            reason = (self.report.get("gpu") or {}).get("unavailable_reason")
            return f"no NVML samples ({reason})" if reason else "-"
        summary = devices[0].get("summary") or {}
        util = summary.get("util_mean_pct")
        memory = summary.get("memory_used_max_bytes")
        util_text = f"util {util:.0f}%" if util is not None else "util n/a"
        memory_text = f"mem {memory / 2**30:.2f} GiB" if memory is not None else "mem n/a"
        return f"{util_text}, {memory_text}, {summary.get('sample_count', 0)} samples"


def cuda_missing_reason() -> str | None:
    """Why this machine cannot run the check on CUDA, or None when it can (asked in a child: no CUDA state here)."""
    probe = (
        "import json, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda, "
        "'available': torch.cuda.is_available(), 'count': torch.cuda.device_count() if torch.cuda.is_available() "
        "else 0}))"
    )
    try:
        proc = subprocess.run([sys.executable, "-c", probe], check=False, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"could not ask torch ({exc})"
    if proc.returncode != 0:
        return f"torch does not import: {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else '?'}"
    facts = json.loads(proc.stdout.strip().splitlines()[-1])
    if facts["cuda"] is None:
        return f"torch {facts['version']} is a CPU-only build (torch.version.cuda is None)"
    if not facts["available"]:
        node = "present" if Path("/dev/nvidiactl").exists() else "absent"
        cuda = f"CUDA {facts['cuda']}"
        return f"torch {facts['version']} ({cuda}) sees no GPU: is_available() is False, /dev/nvidiactl {node}"
    return None


def run(options: list[str], argv: list[str], cwd: Path, out: Path, *, env: dict[str, str], timeout_s: float) -> Outcome:
    cmd = [*GPUTRIAGE, "run", *options, "--out", str(out), *argv]
    start_s = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=cwd, env=env, check=False, capture_output=True, text=True, timeout=timeout_s)
        code, stderr = proc.returncode, proc.stderr
    except subprocess.TimeoutExpired:
        code, stderr = -1, "timed out"
    report_path = out / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    return Outcome(code, report, stderr, time.monotonic() - start_s)


def clean_env() -> dict[str, str]:
    """The scripts choose their device themselves ("cuda" if torch.cuda.is_available() else "cpu")."""
    return {k: v for k, v in os.environ.items() if k not in ("DEVICE", "TRIAGE_DEVICE")} | {"PYTHONUNBUFFERED": "1"}


def show_environment() -> None:
    proc = subprocess.run([*GPUTRIAGE, "env", "--json"], check=False, capture_output=True, text=True, timeout=120)
    try:
        env = json.loads(proc.stdout).get("environment") or {}
    except ValueError:
        print(f"  gputriage env gave no JSON (exit {proc.returncode})")
        return
    torch_facts, driver = env.get("torch") or {}, env.get("driver") or {}
    print(
        f"  torch {torch_facts.get('version')} CUDA {torch_facts.get('cuda_version')}, driver {driver.get('version')}"
    )
    for gpu in driver.get("gpus") or env.get("gpus") or []:
        print(f"  GPU {gpu.get('index')}: {gpu.get('name')}, {gpu.get('memory_total_bytes', 0) / 2**30:.0f} GiB")


def check_scenarios(base: Path, budget: Budget, real: bool) -> list[str]:
    """Each scenario on the device (or the stand-in), and under --preflight: one row each."""
    problems: list[str] = []
    mode = "real GPU" if real else "stand-in"
    print(f"\n{'case':24} {'expected':22} {mode:22} {'preflight':22} {'exit':>4}  where / NVML")
    for scenario in SCENARIOS:
        if budget.left_s() < 60:
            print(f"{scenario.name:24} not run: out of time budget")
            problems.append(f"{scenario.name}: not run")
            continue
        options = ["--expect-device", "cuda"] if real else ["--preflight"]
        found = run(options, scenario.argv, SCRIPTS, base / scenario.name, env=clean_env(), timeout_s=RUN_TIMEOUT_S)
        preflight = found
        if real:  # the same script on the stand-in, on the same machine: what a laptop would have said
            preflight = run(
                ["--preflight"], scenario.argv, SCRIPTS, base / f"{scenario.name}-pf", env=clean_env(), timeout_s=120
            )
        ok = scenario_ok(scenario, found)
        if not ok:
            problems.append(f"{scenario.name}: expected {scenario.root_cause}, found {found.root}")
        mark = "✓" if ok else "✗"
        print(
            f"{scenario.name:24} {scenario.root_cause or 'healthy':22} {mark} {found.root or 'healthy':20} "
            f"{preflight.root or 'healthy':22} {found.returncode:>4}  {found.where()} | {found.nvml()}"
        )
    return problems


def scenario_ok(scenario: Scenario, found: Outcome) -> bool:
    if found.returncode != scenario.exit_code:
        return False
    if scenario.root_cause is not None:
        return found.root == scenario.root_cause
    return all(f["code"] in scenario.gpu_acceptable for f in found.serious())


def check_corpus(base: Path, budget: Budget, real: bool) -> list[str]:
    folder = corpus_scripts()
    if folder is None:
        print("\ncorpus: not found (../shared/corpus/scripts or GPUTRIAGE_CORPUS): skipped")
        return []
    problems: list[str] = []
    print(f"\n{'corpus case':38} {'expected':24} {'found':26} {'where':8} NVML")
    for case in corpus_cases(folder):
        if budget.left_s() < 90:
            print(f"{case.name:38} not run: out of time budget")
            continue
        argv = [str(folder / case.argv[0]), *case.argv[1:]]
        work = base / "corpus" / case.name
        work.mkdir(parents=True, exist_ok=True)
        options = [] if real else ["--preflight"]
        timeout_s = min(RUN_TIMEOUT_S, budget.left_s() - 30)
        found = run(options, argv, work, work / "out", env=clean_env(), timeout_s=timeout_s)
        verdict = corpus_verdict(case.root, set(case.acceptable), found)
        if verdict == "✗":
            problems.append(f"{case.name}: expected {case.root}, found {found.root}")
        where = "n/a" if not case.where else ("✓" if where_matches(found.where(), case.where) else "✗")
        expected = case.root or "healthy"
        print(f"{case.name:38} {expected:24} {verdict} {found.root or 'healthy':24} {where:8} {found.nvml()}")
    return problems


def corpus_verdict(expected: str | None, acceptable: set[str], found: Outcome) -> str:
    if expected is None:
        return "✓" if all(f["code"] in acceptable | CORPUS_SMALL_JOB for f in found.serious()) else "✗"
    if found.root == expected:
        return "✓"
    return "~" if found.root in acceptable else "✗"


def check_trace(base: Path, budget: Budget) -> list[str]:
    if budget.left_s() < 60:
        print("\ntrace: not run: out of time budget")
        return ["trace: not run"]
    out = base / "trace"
    found = run(
        ["--expect-device", "cuda", "--trace"],
        ["trace_steps.py", "--device", "cuda"],
        SCRIPTS,
        out,
        env=clean_env(),
        timeout_s=RUN_TIMEOUT_S,
    )
    traces = sorted(out.glob("*.json.gz"))
    if not traces:
        print(f"\ntrace: run --trace wrote no trace (exit {found.returncode}): {found.stderr[-500:]}")
        return ["trace: no trace written"]
    proc = subprocess.run(
        [*GPUTRIAGE, "trace", str(traces[0]), "--json"], check=False, capture_output=True, text=True, timeout=180
    )
    doc = json.loads(proc.stdout) if proc.stdout.strip().startswith("{") else {}
    ranks = (doc.get("trace") or {}).get("ranks") or []
    print(f"\ntrace: {traces[0].name} read back by `gputriage trace` (exit {proc.returncode})")
    for rank in ranks:
        keys = ("device", "steps", "busy_pct", "idle_pct", "step_time_us", "dataloader_pct_of_step")
        print("  " + ", ".join(f"{k} {rank.get(k)}" for k in keys))
    return [] if ranks else ["trace: no rank in the trace's analysis"]


def run_gpu_tests(budget: Budget) -> list[str]:
    left_s = budget.left_s()
    if left_s < 60:
        print("\ngpu tests: not run: out of time budget")
        return ["gpu tests: not run"]
    cmd = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-p", "no:cacheprovider", "tests"]
    print(f"\ngpu tests: {shlex.join(cmd[2:])}")
    try:
        proc = subprocess.run(cmd, cwd=REPO, check=False, capture_output=True, text=True, timeout=left_s - 10)
    except subprocess.TimeoutExpired:
        print("  timed out")
        return ["gpu tests: timed out"]
    print("  " + (proc.stdout.strip().splitlines() or ["(no output)"])[-1])
    return [] if proc.returncode == 0 else ["gpu tests failed"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget-s", type=float, default=DEFAULT_BUDGET_S)
    parser.add_argument("--preflight", action="store_true", help="no GPU: run the tables on the stand-in")
    parser.add_argument("--no-corpus", action="store_true")
    args = parser.parse_args()
    reason = cuda_missing_reason()
    real = reason is None
    if not real and not args.preflight:
        print(f"gpu-check: skipped: {reason}")
        return 0
    budget = Budget(args.budget_s)
    print(f"gpu-check on {'the real GPU' if real else 'the stand-in (--preflight): ' + str(reason)}")
    if real:
        show_environment()
    problems: list[str] = []
    with tempfile.TemporaryDirectory(prefix="gputriage-gpu-check-") as tmp:
        base = Path(tmp)
        problems += check_scenarios(base, budget, real)
        if not args.no_corpus:
            problems += check_corpus(base, budget, real)
        if real:
            problems += check_trace(base, budget)
            problems += run_gpu_tests(budget)
    spent_s = args.budget_s - budget.left_s()
    print(f"\ngpu-check: {len(problems)} problem(s) in {spent_s:.0f} s" + "".join(f"\n  - {p}" for p in problems))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
