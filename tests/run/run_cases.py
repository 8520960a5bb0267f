"""The cases of tests/run: tiny target scripts run under the real `gputriage run` CLI, and how to run one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract import catalogue_problems

SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"
PARALLEL_RUNS = 3
RUN_TIMEOUT_S = 240


@dataclass
class Case:
    argv: list[str]  # after `gputriage run --expect-device meta --out DIR`
    terminate_after: str | None = None  # send `signal` once stdout shows this line
    signal: int = signal.SIGTERM


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str
    report: dict[str, Any]

    def codes(self) -> list[str]:
        return [f["code"] for f in self.report["findings"]]

    def finding(self, code: str) -> dict[str, Any]:
        return next(f for f in self.report["findings"] if f["code"] == code)


CASES = {
    "nothing_moved": Case(["nothing_moved.py", "3"]),  # also: sys.exit(3), and a script argument
    "model_not_moved": Case(["model_not_moved.py"]),
    "inputs_not_moved": Case(["inputs_not_moved.py"]),
    "labels_not_moved": Case(["labels_not_moved.py"]),
    "submodule_after_to": Case(["submodule_after_to.py"]),
    "plain_tensor_attribute": Case(["plain_tensor_attribute.py"]),
    "slow_pipeline": Case(["slow_pipeline.py"]),
    "healthy": Case(["healthy.py", "--epochs", "2", "--tag", "two words"]),
    "prints_loss": Case(["prints_loss.py"]),
    "unrelated_crash": Case(["unrelated_crash.py"]),
    "module": Case(["-m", "trainpkg.train", "first", "--flag"]),
    "workers_fork": Case(["loader_workers.py", "fork"]),
    "workers_spawn": Case(["loader_workers.py", "spawn"]),
    "sigterm": Case(["runs_until_killed.py"], terminate_after="ready"),
    "sigint": Case(["runs_until_killed.py"], terminate_after="ready", signal=signal.SIGINT),
    "steps_limit": Case(["--steps", "5", "healthy.py"]),
}


def run_many(cases: dict[str, Case], base: Path, first: str | None = None, **options: Any) -> dict[str, Result]:
    """Each case in its own subprocess, PARALLEL_RUNS at a time (`first` starts first: the slowest overlaps the rest);
    `options` go to run_case."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # started from a non-interactive shell's background job: children would inherit "ignore SIGINT", unlike a
        # job in a terminal; a handled signal is reset to the default in the child
        signal.signal(signal.SIGINT, signal.default_int_handler)
    order = sorted(cases, key=lambda name: name != first)
    with ThreadPoolExecutor(PARALLEL_RUNS) as pool:
        futures = {name: pool.submit(run_case, cases[name], base / name, **options) for name in order}
        return {name: future.result() for name, future in futures.items()}


def mark_line(script: str, marker: str) -> str:
    """'script.py:N' for the line that carries `# MARK marker` (so tests do not hard-code line numbers)."""
    path = SCRIPTS / script
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if f"# MARK {marker}" in line:
            return f"{script}:{number}"
    raise AssertionError(f"no '# MARK {marker}' in {path}")


def patched_findings(report: dict[str, Any], script: str, folder: Path) -> list[str]:
    """The non-info findings of `script` run again under --preflight, once `report`'s patch is applied to a copy of it
    in `folder` (a patch must leave a script that runs, not one that dies on its own line)."""
    import shutil

    shutil.copy(SCRIPTS / script, folder / script)
    cmd = [sys.executable, "-m", "gputriage"]
    (folder / "report.json").write_text(json.dumps(report))
    subprocess.run([*cmd, "report", "report.json", "--patch", "fix.patch"], cwd=folder, check=True)
    subprocess.run(["git", "apply", "fix.patch"], cwd=folder, check=True, capture_output=True)
    argv = [*cmd, "run", "--preflight", "--out", str(folder / "after"), script]
    after = subprocess.run(argv, cwd=folder, capture_output=True, text=True, check=False)
    assert after.returncode == 0, after.stderr[-2000:]
    again = json.loads((folder / "after" / "report.json").read_text())
    return [f["code"] for f in again["findings"] if f["severity"] != "info"]


def run_case(
    case: Case,
    out_dir: Path,
    expect_device: str | None = "meta",
    env: dict[str, str] | None = None,
    preflight: bool = False,
    *,
    steps: int | None = None,
) -> Result:
    """`gputriage run --expect-device DEV` (or `--preflight`, with CUDA simulated) on a script of tests/scripts."""
    mode = ["--preflight"] if preflight else ["--expect-device", str(expect_device)]
    mode += ["--steps", str(steps)] if steps is not None else []
    cmd = [sys.executable, "-m", "gputriage", "run", *mode, "--out", str(out_dir)]
    cmd += case.argv
    # The scripts are written for CUDA ("cuda" if torch.cuda.is_available() else "cpu"); the meta runs pin meta.
    pinned = {"TRIAGE_DEVICE": "meta"} if expect_device == "meta" and not preflight else {}
    env = {**os.environ, "PYTHONUNBUFFERED": "1", **pinned, **(env or {})}
    proc = subprocess.Popen(
        cmd,
        cwd=SCRIPTS,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    if case.terminate_after is not None:
        assert proc.stdout is not None
        deadline = time.monotonic() + RUN_TIMEOUT_S
        for line in proc.stdout:
            if case.terminate_after in line or time.monotonic() > deadline:
                break
        proc.send_signal(case.signal)
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    report_path = out_dir / "report.json"
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    problems = catalogue_problems(report.get("findings", []))
    assert problems == [], problems
    return Result(proc.returncode, stdout, stderr, report)
