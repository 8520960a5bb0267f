"""The CI guard: `gputriage run --fail-on` and `gputriage trace --fail-on` stop a regression with exit 1.

`run` keeps the script's own failure code; it turns a successful run into exit 1 only when a finding at the
threshold exists. The findings are printed either way (the terminal report on stderr, report.json in --out).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from integration_helpers import SCRIPTS, codes, gputriage_run

from corpus_path import CORPUS
from gputriage.cli import main

TRACES = CORPUS / "traces"


def test_run_fails_a_job_that_left_the_gpu_idle(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, report = gputriage_run("everything_on_cpu.py", tmp_path, "--expect-device", "meta", "--fail-on", "critical")
    assert code == 1
    assert {"data-on-cpu", "model-on-cpu", "no-gpu-compute"} <= set(codes(report["findings"]))
    err = capsys.readouterr().err
    assert "model-on-cpu" in err  # the report, in the CI log
    last = err.rstrip().splitlines()[-1]
    assert last.startswith("gputriage: --fail-on critical: data-on-cpu, model-on-cpu, no-gpu-compute")
    assert last.endswith("; exit 1")


def test_run_passes_when_nothing_reaches_the_threshold(tmp_path: Path) -> None:
    code, report = gputriage_run("everything_on_cpu.py", tmp_path, "--expect-device", "cpu", "--fail-on", "warning")
    assert code == 0
    assert {f["severity"] for f in report["findings"]} <= {"info"}


def test_run_without_fail_on_returns_the_scripts_code(tmp_path: Path) -> None:
    code, _ = gputriage_run("everything_on_cpu.py", tmp_path, "--expect-device", "meta")
    assert code == 0


def test_run_keeps_the_scripts_own_failure_code(tmp_path: Path) -> None:
    script = str(SCRIPTS / "everything_on_cpu.py")
    code = main(["run", "--expect-device", "meta", "--fail-on", "critical", "--out", str(tmp_path), script, "3"])
    assert code == 3  # a failing script's code is what CI must see, not gputriage's verdict
    assert (tmp_path / "report.json").is_file()


@pytest.fixture
def traces() -> Path:
    if not TRACES.is_dir():
        pytest.skip(f"trace corpus not found at {TRACES}")
    return TRACES


def test_trace_fails_on_a_launch_bound_trace(traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    linear = traces / "param" / "linear_kineto.json.gz"  # a small Linear loop on an RTX 2080 Ti, ~37% busy
    assert main(["trace", str(linear), "--fail-on", "warning"]) == 1
    assert "launch-bound" in capsys.readouterr().out
    assert main(["trace", str(linear), "--fail-on", "critical"]) == 0  # a warning does not fail a critical gate


def test_trace_passes_a_healthy_trace(traces: Path) -> None:
    (healthy,) = (traces / "hta" / "ns_resolution_trace").glob("*.json.gz")  # 98% busy training on a V100
    assert main(["trace", str(healthy), "--json", "--fail-on", "warning"]) == 0


def test_the_integrations_are_reachable_as_the_readme_writes_them() -> None:
    # `gputriage.integrations.lightning.TriageCallback()` after a plain `import gputriage`, importing Lightning only
    # at that moment.
    code = (
        "import sys, gputriage\n"
        "assert 'lightning' not in sys.modules and 'transformers' not in sys.modules\n"
        "cb = gputriage.integrations.lightning.TriageCallback()\n"
        "assert 'lightning' in sys.modules\n"
        "print(type(cb).__module__, gputriage.integrations.hf.TriageCallback.__module__)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["gputriage.integrations.lightning", "gputriage.integrations.hf"]
