"""The process entry (console script, `python -m gputriage`): a gputriage command's own process keeps the memory it
frees for reuse (heap.py) and skips Python's last cycle collection at exit; a job's process (`run`, `demo`)
allocates and ends exactly as Python makes it."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputriage import blas, cli, cyclegc, heap


def _entry(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> tuple[int, list[str]]:
    calls: list[str] = []
    for name in blas.THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(heap, "keep_freed_memory", lambda: calls.append("kept") or True)
    monkeypatch.setattr(cyclegc, "skip_at_exit", lambda: calls.append("skipped"))
    monkeypatch.setattr(sys, "argv", ["gputriage", *argv])
    with pytest.raises(SystemExit) as ended:
        cli.entry()
    return int(ended.value.code or 0), calls


def test_a_command_of_its_own_skips_the_exit_collection(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, calls = _entry(monkeypatch, ["trace", str(tmp_path / "missing.json")])
    assert (code, calls) == (2, ["kept", "skipped"])
    assert all(os.environ.get(name) == "1" for name in blas.THREAD_VARIABLES)


def test_a_jobs_process_ends_as_python_ends_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    code, calls = _entry(monkeypatch, ["run", str(tmp_path / "missing.py")])
    assert code == 2  # python's own code for a script that does not exist
    assert calls == []
    assert not any(name in os.environ for name in blas.THREAD_VARIABLES)


def test_the_collector_is_on_after_start_up_as_before() -> None:
    assert gc.isenabled()
    with cyclegc.paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with cyclegc.paused():
            pass
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable()


def test_python_m_gputriage_exits_with_the_commands_code(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gputriage", "trace", str(tmp_path / "missing.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and "does not exist" in done.stderr


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_the_thresholds_are_set_in_a_process_of_its_own() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from gputriage import heap; print(heap.keep_freed_memory())"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "True"


def test_one_blas_thread_keeps_what_the_user_set() -> None:
    env = {"OPENBLAS_NUM_THREADS": "8"}
    blas.one_thread(env)
    assert env == {"OPENBLAS_NUM_THREADS": "8", "MKL_NUM_THREADS": "1"}


def test_the_jobs_environment_is_its_own(tmp_path: Path) -> None:
    """`run`'s report worker gets one BLAS thread; the job it runs beside sees the environment it was given."""
    job = tmp_path / "job.py"
    job.write_text("import os\nprint(sorted(k for k in os.environ if k.endswith('_NUM_THREADS')))\n")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_NUM_THREADS")}
    env["OMP_NUM_THREADS"] = "3"
    done = subprocess.run(
        [sys.executable, "-m", "gputriage", "run", str(job)], capture_output=True, text=True, env=env, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['OMP_NUM_THREADS']"


@pytest.mark.parametrize("redirect", ["> /dev/full", ">&-"])
def test_output_that_cannot_be_written_is_one_line_and_exit_2(tmp_path: Path, redirect: str) -> None:
    """A full disk or a closed stdout: not a traceback, and not --fail-on's 1."""
    trace = tmp_path / "t.json"
    op = {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": 1, "ts": 1.0, "dur": 2.0}
    trace.write_text(json.dumps({"traceEvents": [op]}))
    done = subprocess.run(
        ["sh", "-c", f'"$0" -m gputriage trace "$1" {redirect}', sys.executable, str(trace)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("gputriage: error: "), done.stderr
