"""Python's cycle collector, where gputriage's own work makes it pay for nothing.

The collector runs after every 700 net allocations of container objects, and each run walks the objects of its
generation: it finds reference cycles, and gputriage's start-up (importing modules, defining dataclasses) and its
trace reading allocate millions of objects and no cycle. Never used around the user's job: `run` pauses it only
while gputriage imports its own modules, before the job starts, and leaves the job's exit to Python.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No cycle collection inside; afterwards the collector is on again if it was on before."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def skip_at_exit() -> None:
    """Spare the process's exit its last full collection: Python collects once more at exit and walks every object
    still alive (numpy's, the record's, the analysis's: 15-25 ms after a trace, a twentieth of the command). Only for
    a gputriage command's own process, whose objects need no finalizer at exit: frozen objects are still freed as
    usual, only no longer searched for cycles."""
    gc.freeze()
