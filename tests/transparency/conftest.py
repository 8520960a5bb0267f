"""Runs every case of the transparency suite once per session, several at a time (each case is two processes that
import torch), and shares the results with the tests."""

from __future__ import annotations

import signal

import pytest
from harness import CASES, Compared, run_cases


@pytest.fixture(scope="session")
def compared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Compared]:
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        # started from a non-interactive shell's background job: children would inherit "ignore SIGINT", unlike a
        # job in a terminal; a handled signal is reset to the default in the child
        signal.signal(signal.SIGINT, signal.default_int_handler)
    return run_cases(list(CASES), tmp_path_factory.mktemp("transparency"))
