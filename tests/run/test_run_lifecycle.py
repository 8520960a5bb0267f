"""The run's life cycle at its edges (issue #12): --out checked before the script runs, a signal at any moment,
a job killed where no handler runs, and the environment probe kept away from the working directory."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from run_cases import SCRIPTS

BIN = Path(sys.executable).parent


@pytest.fixture(autouse=True)
def sigint_as_in_a_terminal() -> None:
    """A test started from a non-interactive shell's background job would pass "ignore SIGINT" on to its children,
    unlike a job started in a terminal; a handled signal is reset to the default in a child."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def gputriage(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    cmd = [str(BIN / "gputriage"), *args]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, env={**os.environ, **(env or {})}, check=False)


def report_of(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "report.json").read_text())
    return doc


@pytest.mark.parametrize("kind", ["file", "symlink"])
def test_an_out_that_cannot_be_the_report_folder_is_refused_before_the_script_runs(tmp_path: Path, kind: str) -> None:
    shutil.copy(SCRIPTS / "marks_start.py", tmp_path)
    out = tmp_path / "out"
    if kind == "file":
        out.write_text("not a folder")
    else:
        (tmp_path / "elsewhere").mkdir()
        out.symlink_to(tmp_path / "elsewhere")
    done = gputriage("run", "--expect-device", "cpu", "--out", str(out), "marks_start.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert done.stderr.startswith(("gputriage: error: --out ", "gputriage: error: argument --out: "))
    assert not (tmp_path / "started.txt").exists()  # refused before any of the user's code


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")
def test_a_read_only_out_is_refused_before_the_script_runs(tmp_path: Path) -> None:
    shutil.copy(SCRIPTS / "marks_start.py", tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    out.chmod(0o500)
    try:
        done = gputriage("run", "--expect-device", "cpu", "--out", str(out), "marks_start.py", cwd=tmp_path)
    finally:
        out.chmod(0o700)
    assert done.returncode == 2 and "cannot write there" in done.stderr
    assert not (tmp_path / "started.txt").exists()


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
@pytest.mark.parametrize("delay_s", [0.0, 0.05, 0.3])
def test_a_signal_just_after_the_last_line_still_gets_a_fresh_report_and_the_same_death(
    tmp_path: Path, name: str, delay_s: float
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.json").write_text('{"stale": true}')
    done = gputriage(
        "run", "--expect-device", "cpu", "--out", str(out), "late_signal.py", name, str(delay_s), cwd=SCRIPTS
    )
    assert "stale" not in report_of(out)  # (at 0 s the signal may land before the last line: a report all the same)
    if done.returncode == 0:
        # SIGINT after gputriage was done, while Python joined the script's thread: Python's own behaviour there
        assert name == "SIGINT" and "Exception ignored in: <module 'threading'" in done.stderr
    else:
        assert done.returncode == -getattr(signal, name), done.stderr[-2000:]


def test_a_signal_during_start_up_ends_the_job_with_a_report(tmp_path: Path) -> None:
    """SIGTERM while the job imports torch, where gputriage's probes start (they wait for the job's own import)."""
    out = tmp_path / "out"
    (tmp_path / "imports_torch.py").write_text("import torch\n" + (SCRIPTS / "marks_start.py").read_text())
    cmd = [str(BIN / "gputriage"), "run", "--expect-device", "cpu", "--out", str(out), "imports_torch.py"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(0.5)  # the job is importing torch (over a second), and the probes start at its end
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGTERM
    assert report_of(out)["process"]["signal"] == "SIGTERM"


@pytest.mark.parametrize("death", ["SIGKILL", "os._exit"])
def test_a_job_killed_after_the_window_leaves_the_partial_record(tmp_path: Path, death: str) -> None:
    """No handler runs on SIGKILL or os._exit: the record flushed at the end of the probe window is what remains."""
    out = tmp_path / "out"
    done = gputriage(
        "run", "--expect-device", "cpu", "--steps", "3", "--out", str(out), "killed_after_window.py", death,
        cwd=SCRIPTS,
    )  # fmt: skip
    assert done.returncode == (-signal.SIGKILL if death == "SIGKILL" else 7)
    deadline = time.monotonic() + 30  # the report worker finishes writing after the job died
    while not (out / "report.md").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    doc = report_of(out)
    assert doc["process"] is None  # the job was still running when this record was written
    assert doc["steps"]["steps_observed"] == 3
    assert doc["placement"]["models"][0]["name"] == "Linear"
    assert doc["environment"]["torch"]["version"]
    assert doc["compute"] is not None  # the op census of the window is in the partial record
    # A CPU run judges rungs 1-4 not at all (nothing has to reach an accelerator): each says so, none says "no step"
    for rung in doc["ladder"][:4]:
        assert rung["status"] != "skipped" or "judged for cpu" in rung["reason"] or "meant for cpu" in rung["reason"]


def test_the_environment_probe_never_runs_code_from_the_working_directory(tmp_path: Path) -> None:
    (tmp_path / "torch.py").write_text("open('imported.txt', 'w').write('yes')\nraise SystemExit(3)\n")
    done = gputriage("env", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "imported.txt").exists()
    assert json.loads(done.stdout)["environment"]["torch"]["installed"] is True


def test_a_module_that_does_not_exist_fails_as_python_says(tmp_path: Path) -> None:
    ours = gputriage("run", "--out", str(tmp_path / "out"), "-m", "no_such_module_here", cwd=tmp_path)
    cmd = [sys.executable, "-m", "no_such_module_here"]
    plain = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert (ours.returncode, ours.stderr) == (plain.returncode, plain.stderr) == (1, plain.stderr)
    assert not (tmp_path / "out" / "report.json").exists()


def test_the_report_waits_for_the_jobs_non_daemon_threads(tmp_path: Path) -> None:
    """Python waits for every non-daemon thread once the main script ends, before its atexit handlers: the job is
    not over until then, so the report comes after the thread's last line, and its atexit handler still runs after."""
    script = tmp_path / "late_thread.py"
    script.write_text(
        "import atexit, sys, threading, time\n"
        "def late():\n"
        "    time.sleep(0.5)\n"
        "    print('thread done', file=sys.stderr, flush=True)\n"
        "atexit.register(lambda: print('atexit ran', file=sys.stderr, flush=True))\n"
        "threading.Thread(target=late).start()\n"
        "print('main done')\n"
    )
    done = gputriage("run", "--expect-device", "cpu", "--out", str(tmp_path / "out"), str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "main done\n"
    err = done.stderr
    assert err.index("thread done") < err.index("gputriage verdict") < err.index("atexit ran"), err


def test_a_child_the_script_forks_ends_as_under_python_without_a_report_of_its_own(tmp_path: Path) -> None:
    """os.fork() in the script: the child runs on to the script's end, then exits with its code and its atexit
    handlers, as under python (was: a second full gputriage report on the shared stderr)."""
    script = tmp_path / "forks.py"
    script.write_text(
        "import atexit, os, sys\n"
        "pid = os.fork()\n"
        "atexit.register(lambda: print('atexit', 'child' if pid == 0 else 'parent', flush=True))\n"
        "if pid:\n"
        "    _, status = os.waitpid(pid, 0)\n"
        "    print('child exit code', os.waitstatus_to_exitcode(status), flush=True)\n"
        "else:\n"
        "    sys.exit(3)\n"
    )
    done = gputriage("run", "--expect-device", "cpu", "--out", str(tmp_path / "out"), str(script), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["atexit child", "child exit code 3", "atexit parent"]
    assert done.stderr.count("gputriage verdict") == 1, done.stderr


def test_an_executor_the_job_never_shut_down_does_not_hang_the_report(tmp_path: Path) -> None:
    """A ThreadPoolExecutor's workers are non-daemon threads that only Python's exit stops: waiting for them before
    the report would hang a job that Python ends."""
    script = tmp_path / "executor.py"
    script.write_text(
        "from concurrent.futures import ThreadPoolExecutor\n"
        "pool = ThreadPoolExecutor(2)\n"
        "print(pool.submit(sum, [1, 2]).result())\n"
    )
    out = tmp_path / "out"
    cmd = [str(BIN / "gputriage"), "run", "--expect-device", "cpu", "--out", str(out), str(script)]
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and done.stdout == "3\n", done.stderr
    assert (out / "report.json").exists()


WARNS_EACH_STEP = """
import sys, warnings
import torch
from torch import nn

model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(260):
    loss = model(torch.ones(2, 3)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    warnings.warn("once per step")
"""


def test_a_warning_shown_once_per_place_is_not_shown_again_when_the_window_closes(tmp_path: Path) -> None:
    """A trial: every warning the job had shown showed a second time at about step 200: asking torch for its facts
    changed the warning filters (catch_warnings), which makes Python forget what it showed once per place."""
    script = tmp_path / "warns.py"
    script.write_text(WARNS_EACH_STEP)
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=False)
    triaged = gputriage("run", "--out", str(tmp_path / "out"), str(script), cwd=tmp_path)
    assert plain.stderr.count("UserWarning: once per step") == 1
    assert triaged.stderr.count("UserWarning: once per step") == 1, triaged.stderr[-3000:]


SHAPE_ERROR = """
import torch
from torch import nn

model = nn.Sequential(nn.Linear(4, 8), nn.Linear(7, 1))
for step in range(3):
    out = model(torch.randn(2, 4))
"""


def test_a_torch_error_inside_the_window_has_the_traceback_plain_python_gives(tmp_path: Path) -> None:
    """A trial: a shape error at step 0 showed an extra `torch/_ops.py ... __call__` frame under gputriage: the
    census's dispatch mode routes the op through Python; that frame exists only because of it."""
    script = tmp_path / "shapes.py"
    script.write_text(SHAPE_ERROR)
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=False)
    triaged = gputriage("run", "--out", str(tmp_path / "out"), str(script), cwd=tmp_path)
    assert triaged.returncode == plain.returncode == 1
    assert "mat1 and mat2 shapes cannot be multiplied" in plain.stderr
    assert _traceback(triaged.stderr) == _traceback(plain.stderr)


def _traceback(stderr: str) -> str:
    return stderr[stderr.index("Traceback") : stderr.index("RuntimeError")]


MODULE_LEVEL_STACKLEVEL = """
import warnings
import torch
from torch import nn

model = nn.Linear(3, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(250):
    loss = model(torch.ones(2, 3)).sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
    warnings.warn("future thing", FutureWarning, stacklevel=2)
"""


def test_a_module_level_warning_past_the_scripts_top_is_placed_as_plain_python_places_it(tmp_path: Path) -> None:
    """A trial: `warnings.warn(..., stacklevel=2)` at a script's top level reads `sys:1:` under python (the stack ends
    there); under gputriage it named `<frozen runpy>:88`, then `runner.py:183` after the window: twice, at our files."""
    script = tmp_path / "levels.py"
    script.write_text(MODULE_LEVEL_STACKLEVEL)
    plain = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, check=False)
    triaged = gputriage("run", "--out", str(tmp_path / "out"), str(script), cwd=tmp_path)
    assert "sys:1: FutureWarning: future thing" in plain.stderr
    job_part = triaged.stderr.split("gputriage verdict")[0]
    assert job_part.count("FutureWarning: future thing") == 1 and "sys:1: FutureWarning: future thing" in job_part


def test_a_job_started_with_stderr_closed_keeps_its_stdout_to_itself(tmp_path: Path) -> None:
    """A trial: `job.py 2>&- > results.txt` got the whole report in results.txt (print(file=None) is stdout's)."""
    import os
    import subprocess
    import sys

    job = "import sys\nprint('result line 1')\nprint('stderr is None:', sys.stderr is None)\n"
    (tmp_path / "job.py").write_text(job)
    cmd = [sys.executable, "-m", "gputriage", "run", "--expect-device", "cpu", "--out", str(tmp_path / "out"), "job.py"]
    result = subprocess.run(
        cmd, cwd=tmp_path, stdout=subprocess.PIPE, text=True, check=False, preexec_fn=lambda: os.close(2)
    )
    assert result.returncode == 0
    assert result.stdout == "result line 1\nstderr is None: True\n"
    assert (tmp_path / "out" / "report.json").exists()
