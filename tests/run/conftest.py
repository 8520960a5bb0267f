"""Runs the tiny target scripts under the real `gputriage run` CLI, several at a time, once per session.

Each case is one subprocess (a torch import costs seconds), shared by every assertion about it.
"""

from __future__ import annotations

import signal
from concurrent.futures import ThreadPoolExecutor

import pytest
from run_cases import CASES, PARALLEL_RUNS, Result, run_case


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    base = tmp_path_factory.mktemp("runs")
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # started from a non-interactive shell's background job: children would inherit "ignore SIGINT", unlike a
        # job in a terminal; a handled signal is reset to the default in the child
        signal.signal(signal.SIGINT, signal.default_int_handler)
    with ThreadPoolExecutor(PARALLEL_RUNS) as pool:
        # the slowest (spawned workers import torch twice more) first, so it overlaps the rest
        order = sorted(CASES, key=lambda name: name != "workers_spawn")
        futures = {name: pool.submit(run_case, CASES[name], base / name) for name in order}
        return {name: future.result() for name, future in futures.items()}
