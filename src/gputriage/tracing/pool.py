"""Work spread over spawned processes, with a fallback to this process."""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TypeVar

_Job = TypeVar("_Job")
_Result = TypeVar("_Result")


def in_processes(fn: Callable[[_Job], _Result], jobs: list[_Job], workers: int) -> list[_Result]:
    """Map `fn` over `jobs` in spawned processes; in this process when there is one worker or spawning fails.

    Spawn (not fork): the caller may be a training process holding CUDA and threads. Spawning re-imports the
    caller's __main__, which fails for code read from stdin or a script without a main guard; the work then runs
    here, slower but with the same result.
    """
    if workers <= 1 or len(jobs) <= 1 or not _main_is_importable():
        return [fn(job) for job in jobs]
    ctx = multiprocessing.get_context("spawn")
    try:
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            return list(pool.map(fn, jobs))
    except BrokenProcessPool:
        return [fn(job) for job in jobs]


def _main_is_importable() -> bool:
    """Spawned children re-import __main__ from its file; code from stdin ("<stdin>") has none to import."""
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    return main_file is None or Path(main_file).is_file()
