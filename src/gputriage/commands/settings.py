"""Every GPUTRIAGE_* environment variable gputriage reads, checked once before a command starts.

A bad value is one line and exit 2 (InputError), never a traceback or a silent default deep inside a job. An empty
value is the same as an unset one. The modules that read a variable name it by their own constant; this table is the
one place that says what each may hold.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping

from gputriage.collectors.distributed import DDP_TIMING_ENV
from gputriage.commands.common import DEVICE_NAME_RE
from gputriage.commands.rank_report import MERGE_WAIT_ENV
from gputriage.commands.run_worker import DISABLE_ENV as REPORT_WORKER_ENV
from gputriage.errors import InputError
from gputriage.hardware.nvml import FAKE_ENV_VAR, FAKE_JOB_PID_ENV_VAR, fake_scenario_names
from gputriage.outdir import MAX_RECORD_MB_ENV, record_limit_mb

DEMO_DEVICE_ENV = "GPUTRIAGE_DEMO_DEVICE"


def _seconds(value: str) -> str | None:
    try:
        seconds = float(value)
    except ValueError:
        return "a number of seconds"
    return None if math.isfinite(seconds) and seconds >= 0 else "a number of seconds, 0 or more"


def _switch(value: str) -> str | None:
    return None if value in ("0", "1") else "0 (off) or 1 (on)"


def _pid(value: str) -> str | None:
    return None if value == "self" or (value.isdigit() and int(value) > 0) else "'self' or a process id"


def _megabytes(value: str) -> str | None:
    limit_mb = record_limit_mb(value)
    return None if limit_mb is not None and limit_mb > 0 else "a size in MiB, 1 to 9999999"


def _device(value: str) -> str | None:
    return None if DEVICE_NAME_RE.match(value) else "a device name (cuda, cuda:1, mps, meta, cpu)"


def _scenario(value: str) -> str | None:
    names = fake_scenario_names()
    return None if value in names else f"one of the fake scenarios: {', '.join(names)}"


# name -> (what it does, the check: None when the value is good, else what it should be)
VARIABLES: dict[str, tuple[str, Callable[[str], str | None]]] = {
    FAKE_ENV_VAR: ("a fake NVML scenario, for demos and docs", _scenario),
    FAKE_JOB_PID_ENV_VAR: ("the process the fake scenario's job is", _pid),
    MERGE_WAIT_ENV: ("how long rank 0 waits for the other ranks' records", _seconds),
    DDP_TIMING_ENV: ("time DDP's gradient communication", _switch),
    DEMO_DEVICE_ENV: ("the device the demo's script names", _device),
    REPORT_WORKER_ENV: ("0: write `run`'s report in the job's own process, without the report worker", _switch),
    MAX_RECORD_MB_ENV: ("the largest record or report.json gputriage reads", _megabytes),
}


def check_environment(environ: Mapping[str, str] | None = None) -> None:
    """Raise InputError naming the first GPUTRIAGE_* variable whose value is not one gputriage can use."""
    env = os.environ if environ is None else environ
    for name, (meaning, check) in VARIABLES.items():
        value = env.get(name, "")
        if not value:
            continue
        expected = check(value)
        if expected is not None:
            raise InputError(f"{name}={value!r} ({meaning}): expected {expected}; fix or unset it")
