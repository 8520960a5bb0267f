"""One BLAS thread for a gputriage command's own process: it multiplies no matrix.

numpy's OpenBLAS starts one thread per core when numpy is imported, and each spins for a while before it sleeps:
60 ms of CPU at every start on 2 cores, taken from `trace`'s workers (which run on those same cores) and from the
training job that `run`'s report worker starts beside. The count is read once, when the library loads, from the
environment; a value the user set is kept.
"""

from __future__ import annotations

import os

# OpenBLAS reads the first of these it finds; numpy wheels ship OpenBLAS (scipy-openblas), conda's numpy may use MKL.
THREAD_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def one_thread(env: dict[str, str] | os._Environ[str] | None = None) -> None:
    """Set the BLAS thread count to 1 in `env` (this process's environment by default), before numpy is imported."""
    target = os.environ if env is None else env
    for name in THREAD_VARIABLES:
        target.setdefault(name, "1")
