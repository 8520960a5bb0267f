"""Work spread over processes, the calling process taking the first share itself.

Fork where it is safe (Linux, and no other thread alive in this process: the `trace` command), so a worker costs
milliseconds instead of a fresh interpreter's imports; spawn otherwise. Spawning re-imports the caller's __main__,
which fails for code read from stdin or a script without a main guard; the work then runs here, slower but with the
same result.

Workers never outlive the work: when this process stops waiting (an error, Ctrl-C, SIGTERM turned into an exception
by the command), they are terminated, and on Linux each one dies with this process even if it is killed outright
(PR_SET_PDEATHSIG). A worker left behind sat blocked forever on the pipe of results nobody read.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import multiprocessing.context

_Job = TypeVar("_Job")
_Result = TypeVar("_Result")


def in_processes(fn: Callable[[_Job], _Result], jobs: list[_Job], workers: int) -> list[_Result]:
    """Map `fn` over `jobs` with up to `workers` processes (this one included); results in the jobs' order."""
    if workers <= 1 or len(jobs) <= 1:
        return [fn(job) for job in jobs]
    ctx = _context()
    if ctx is None:
        return [fn(job) for job in jobs]
    # Imported here: one process (a small trace, --jobs 1) does not pay their 20 ms.
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:
        size = min(workers - 1, len(jobs) - 1)
        with ProcessPoolExecutor(size, mp_context=ctx, initializer=_worker_start, initargs=(os.getpid(),)) as pool:
            try:
                futures = [pool.submit(fn, job) for job in jobs[1:]]
                first = fn(jobs[0])
                return [first, *(f.result() for f in futures)]
            except BaseException:
                _stop_workers(pool)  # their results are not wanted: do not wait for them
                raise
    except BrokenProcessPool:  # a worker died (the OOM killer): the work is done here instead
        return [fn(job) for job in jobs]


def _worker_start(parent: int) -> None:
    """In each worker: SIGTERM and SIGHUP end it at once (the parent cleans up), and it dies with its parent."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    if sys.platform == "linux":
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before that took effect
        os._exit(1)


def _stop_workers(pool: object) -> None:
    # ProcessPoolExecutor gained terminate_workers() only in Python 3.14; before it, its processes are a private dict.
    processes = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        with contextlib.suppress(Exception):
            process.terminate()


def can_fork() -> bool:
    """Whether workers can be forked: on Linux, from a process with no other thread alive."""
    return sys.platform == "linux" and threading.active_count() == 1


def _context() -> multiprocessing.context.BaseContext | None:
    import multiprocessing

    if can_fork():
        return multiprocessing.get_context("fork")
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file is not None and not Path(main_file).is_file():
        return None  # spawned children re-import __main__ from its file; code from stdin has none
    return multiprocessing.get_context("spawn")
