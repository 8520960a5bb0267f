"""The process pool of `trace` (tracing/pool.py): forked workers and the caller take jobs from one queue.

Each case runs in a fresh interpreter: a test session may hold threads of its own, and with a thread alive nothing
is forked (the pool then works in spawned processes, or here).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from builders import training_loop

ROOT = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str) -> dict:  # type: ignore[type-arg]
    code = textwrap.dedent(script)
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, cwd=ROOT)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


_CHILDREN = """
def running_children():
    import os
    me, alive = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                fields = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == me and fields[0] != "Z":
                alive.append(int(entry))
    return alive
"""


def test_a_slow_process_takes_fewer_jobs_and_the_results_keep_their_order() -> None:
    result = _run(
        """
        import json, os, threading, time
        from gputriage.tracing import pool
        CALLER = os.getpid()
        def job(i):
            time.sleep(0.6 if i == 4 else 0.02)  # whoever takes job 4 is busy while the other takes the rest
            return i, os.getpid()
        out = pool.in_processes(job, list(range(12)), 2)
        by = {}
        for i, pid in out:
            by.setdefault(pid, []).append(i)
        slow = next(jobs for jobs in by.values() if 4 in jobs)
        print(json.dumps({"order": [i for i, _ in out], "processes": len(by), "slow_took": len(slow),
                          "threads": threading.active_count(), "can_fork": pool.can_fork()}))
        """
    )
    assert result["order"] == list(range(12))
    assert result["processes"] == 2
    assert result["slow_took"] <= 6  # the old pool gave the caller job 0 alone, and its one worker the other 11
    assert result["threads"] == 1 and result["can_fork"]  # nothing of the pool is left running: a later fork is safe


def test_a_worker_that_dies_loses_only_its_jobs_to_the_caller() -> None:
    result = _run(
        """
        import json, os, signal
        from gputriage.tracing import pool
        CALLER = os.getpid()
        def job(i):
            if os.getpid() != CALLER:
                os.kill(os.getpid(), signal.SIGKILL)  # the OOM killer
            return i * i
        print(json.dumps({"squares": pool.in_processes(job, list(range(6)), 3)}))
        """
    )
    assert result["squares"] == [i * i for i in range(6)]


def test_an_error_is_raised_once_and_no_worker_is_left() -> None:
    result = _run(
        _CHILDREN
        + """
import json, os, time
from gputriage.tracing import pool
CALLER = os.getpid()
def job(i):
    if i == 3:
        raise ValueError(f"job {i}")
    time.sleep(0.05)
    return i
try:
    pool.in_processes(job, list(range(8)), 2)
    raised = None
except ValueError as exc:
    raised = str(exc)
time.sleep(0.2)
print(json.dumps({"raised": raised, "children": running_children()}))
"""
    )
    assert result["raised"] == "job 3"
    assert result["children"] == []


def test_begun_workers_are_ended_when_the_caller_gives_up(tmp_path: Path) -> None:
    path = training_loop(steps=200).write(tmp_path / "t.json")
    result = _run(
        _CHILDREN
        + """
import json, sys, time
from pathlib import Path
from gputriage.tracing import split
from gputriage.tracing.limits import DEFAULT_LIMITS
from gputriage.tracing.store import SpillDir
split.SPLIT_MIN_BYTES = 0
split._MIN_RANGE_BYTES = 1 << 14
spill = SpillDir()
begun = split.begin(Path(sys.argv[1]), DEFAULT_LIMITS, spill, jobs=2)
started = begun is not None and len(running_children()) == 1
begun.abandon()
spill.cleanup()
time.sleep(0.2)
print(json.dumps({"started": started, "children": running_children()}))
""",
        str(path),
    )
    assert result == {"started": True, "children": []}


def test_the_trace_command_begins_reading_before_its_imports_and_says_the_same(tmp_path: Path) -> None:
    """`trace` forks its readers before it imports the analysis, the rules and the report: the report is the one
    a single process writes, byte for byte but the time it was made."""
    path = training_loop(steps=300, loader_us=700, sync_idle_us=400).write(tmp_path / "t.json")
    result = _run(
        """
        import contextlib, io, json, sys
        from gputriage.tracing import split
        split.SPLIT_MIN_BYTES = 0
        split._MIN_RANGE_BYTES = 1 << 16
        begun = []
        real_begin = split.begin
        def spy(*a, **k):
            got = real_begin(*a, **k)
            begun.append(got is not None and "gputriage.rules" not in sys.modules)
            return got
        split.begin = spy
        from gputriage.cli import main
        docs = []
        for jobs in ("2", "1"):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                out.buffer = io.BytesIO()  # the JSON report is written as bytes
                main(["trace", sys.argv[1], "--json", "--jobs", jobs])
            doc = json.loads(out.buffer.getvalue())
            doc.pop("created_at_s")
            docs.append(doc)
        print(json.dumps({"same": docs[0] == docs[1], "begun_before_the_rules": begun[0]}))
        """,
        str(path),
    )
    assert result == {"same": True, "begun_before_the_rules": True}


def test_begin_leaves_no_folder_where_it_cannot_fork(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """With a thread alive (a test session, a program's own threads) nothing is forked: begin() says so before it
    makes its spill folder (two empty gputriage-trace-* folders were left in $TMPDIR by in-process runs)."""
    from gputriage.tracing import split
    from gputriage.tracing.limits import DEFAULT_LIMITS
    from gputriage.tracing.store import SpillDir

    path = training_loop(steps=200).write(tmp_path / "t.json")
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(split, "_MIN_RANGE_BYTES", 1 << 14)
    monkeypatch.setattr(split, "can_fork", lambda: False)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    assert split.begin(path, DEFAULT_LIMITS, SpillDir(), jobs=2) is None
    assert list(scratch.iterdir()) == []
