"""`run --trace`: torch's profiler logs its own life (`USDT: ... profiler_start`) to the process's stderr. gputriage
keeps those lines out of the user's output, and lets the profiler's warnings and errors through."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gputriage.collectors.profiler_window import quiet_profiler_chatter

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"
CHATTER = [
    b"USDT:2026-11-30 23:07:36 11064:11064 SyncActivityProfilerHandler.cpp:52] profiler_start\n",
    b"STAGE:2024-02-01 10:00:00 4242:4242 ActivityProfilerController.cpp:312] Completed Stage: Warm Up\n",
]
KEPT = [
    b"ERROR:2026-11-30 23:07:36 11064:11064 CuptiActivityApi.cpp:60] CUPTI could not be initialised\n",
    b"WARNING:2026-11-30 23:07:36 11064:11064 init.cpp:155] function cbapi->getCuptiStatus() failed\n",
    b"the user's own line\n",
]


def test_chatter_is_dropped_and_everything_else_is_written_back(capfd: pytest.CaptureFixture[str]) -> None:
    with quiet_profiler_chatter():
        for line in [CHATTER[0], KEPT[0], CHATTER[1], KEPT[1], KEPT[2]]:
            os.write(2, line)
    err = capfd.readouterr().err
    assert "USDT:" not in err and "STAGE:" not in err
    assert err.splitlines() == [line.decode().rstrip("\n") for line in KEPT]  # in their order


def test_run_trace_keeps_the_users_output_clean(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "gputriage", "run", "--trace", "--out", str(tmp_path), str(SCRIPTS / "trace_steps.py")],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "USDT:" not in done.stderr and "profiler_start" not in done.stderr
    assert done.stdout == "profiler_on_at_end=False\n"  # the script's own output, untouched
    assert (tmp_path / "profiler_trace.json.gz").is_file()
