"""`trace` ended by a signal: its worker processes go with it, and its temporary files are removed.

A worker once sat blocked forever on the pipe of results after `kill` (SIGTERM) or a closed terminal (SIGHUP) ended
the command, and the rows it had written stayed in $TMPDIR.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from builders import training_loop

# The real CLI in a fresh interpreter, its file split into byte ranges however small, and every worker's range made
# slow: the command is then surely waiting on a worker when the signal comes.
_SLOW_WORKERS = """
import os, sys, time
from gputriage import cli
from gputriage.tracing import split
split.SPLIT_MIN_BYTES = 0
split._MIN_RANGE_BYTES = 1024
real = split._collect_range
def slow(job):
    if os.getpid() != MAIN:
        open(os.path.join(sys.argv[1], f"worker-{os.getpid()}"), "w").close()
        time.sleep(60)
    return real(job)
MAIN = os.getpid()
split._collect_range = slow
sys.exit(cli.main(["trace", sys.argv[2], "--jobs", "2", "--json"]))
"""

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the workers are forked (Linux)")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split()[2]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_signal_stops_the_workers_and_removes_the_temporary_files(tmp_path: Path, signum: int) -> None:
    path = training_loop(steps=200, kernel_us=50).write(tmp_path / "t.json")
    scratch, marks = tmp_path / "tmp", tmp_path / "marks"
    scratch.mkdir()
    marks.mkdir()
    errors = tmp_path / "stderr.txt"
    with errors.open("wb") as err:  # a file, not a pipe: a worker left behind would hold a pipe open forever
        job = subprocess.Popen(
            [sys.executable, "-c", _SLOW_WORKERS, str(marks), str(path)],
            env={**os.environ, "TMPDIR": str(scratch)},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    deadline = time.monotonic() + 60
    while not list(marks.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = [int(p.name.split("-")[1]) for p in marks.iterdir()]
    assert workers, "no worker started"
    job.send_signal(signum)
    try:
        assert job.wait(timeout=30) == -signum  # it dies of the signal, as it would without gputriage's handler
        time.sleep(0.5)
        assert not [pid for pid in workers if _alive(pid)]
    finally:
        for pid in workers:  # never leave one behind, whatever failed
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert b"Traceback" not in errors.read_bytes()
    assert not list(scratch.iterdir())  # the rows written so far went with the folder
