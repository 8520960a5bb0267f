"""Runs the tiny target scripts under the real `gputriage run` CLI, several at a time, once per session.

Each case is one subprocess (a torch import costs seconds), shared by every assertion about it.
"""

from __future__ import annotations

import pytest
from run_cases import CASES, Result, run_many


@pytest.fixture(scope="session")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    return run_many(CASES, tmp_path_factory.mktemp("runs"), first="workers_spawn")  # spawned workers: slowest
