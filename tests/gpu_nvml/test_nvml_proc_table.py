"""Who a PID is, from the host's real /proc: the job's own children are its workers, RANK comes from the environment."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from gputriage.hardware.procs import ProcTable, job_role

pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")


@pytest.fixture
def child() -> Iterator[subprocess.Popen[bytes]]:
    env = dict(os.environ, RANK="3")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)", "--tag"], env=env)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_a_child_of_the_job_is_a_worker_and_carries_its_rank(child: subprocess.Popen[bytes]) -> None:
    table = ProcTable()
    me = os.getpid()
    assert table.parent(child.pid) == me
    assert table.parent(me) == os.getppid()
    command = table.command(child.pid)
    assert command is not None and command.endswith("time.sleep(30) --tag")
    assert table.rank(child.pid) == 3
    assert job_role(table, child.pid, me, with_ranks=False) == "worker"
    assert job_role(table, me, me, with_ranks=False) == "main"
    assert job_role(table, os.getppid(), me, with_ranks=True) is None


def test_a_pid_that_does_not_exist() -> None:
    table = ProcTable()
    assert table.command(2**22 + 12345) is None
    assert table.parent(2**22 + 12345) is None
    assert table.rank(2**22 + 12345) is None
