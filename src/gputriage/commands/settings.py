"""Every GPUTRIAGE_* environment variable gputriage reads, checked once before a command starts.

A bad value is one line and exit 2 (InputError), never a traceback or a silent default deep inside a job. An empty
value is the same as an unset one. The modules that read a variable name it by their own constant; this table is the
one place that says what each may hold.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping

from gputriage import envnames
from gputriage.commands.common import device_problem
from gputriage.errors import InputError
from gputriage.outdir import record_limit_mb


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
    return None if device_problem(value) is None else "a device torch knows (cuda, cuda:1, mps, xpu, meta, cpu)"


def _scenario(value: str) -> str | None:
    # Imported only when the variable is set: nvml.py brings the whole record (70 ms before every command's work).
    from gputriage.hardware.nvml import fake_scenario_names

    names = fake_scenario_names()
    return None if value in names else f"one of the fake scenarios: {', '.join(names)}"


# name -> (what it does, the check: None when the value is good, else what it should be)
VARIABLES: dict[str, tuple[str, Callable[[str], str | None]]] = {
    envnames.FAKE_NVML: ("a fake NVML scenario, for demos and docs", _scenario),
    envnames.FAKE_JOB_PID: ("the process the fake scenario's job is", _pid),
    envnames.MERGE_WAIT_S: ("how long rank 0 waits for the other ranks' records", _seconds),
    envnames.DDP_COMM_TIMING: ("time DDP's gradient communication", _switch),
    envnames.DEMO_DEVICE: ("the device the demo's script names", _device),
    envnames.REPORT_WORKER: ("0: write `run`'s report in the job's own process, without the report worker", _switch),
    envnames.MAX_RECORD_MB: ("the largest record or report.json gputriage reads", _megabytes),
    envnames.PURE_PYTHON: ("1: read traces with the pure-Python decoder instead of the compiled scanner", _switch),
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
