"""How a gputriage command's own process asks glibc's malloc to keep the memory it frees, for the next allocation.

glibc serves an allocation above its mmap threshold (128 KiB at first, raised as such blocks are freed) with a fresh
mmap, and returns it to the kernel when freed; the next one starts again from fresh pages, and the kernel zeroes and
maps each page at its first touch. Reading a trace allocates and frees the same large buffers batch after batch (4 MiB
of file, the scanner's columns, the sorted runs), so a `trace` run spent a tenth of its time in page faults, and its
forked workers more. With a fixed threshold of 32 MiB (glibc's own ceiling for the moving one) and freed memory kept
up to 128 MiB, those buffers are reused in place. The peak memory is the same: only what was freed stays mapped,
bounded by the trim threshold.

Never for a job's process (`run`, `demo`): how the user's job allocates is the job's own. Linux with glibc only;
elsewhere nothing changes.
"""

from __future__ import annotations

import sys

# mallopt(3) parameters (malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_BYTES = 32 << 20
TRIM_THRESHOLD_BYTES = 128 << 20


def keep_freed_memory() -> bool:
    """Set the two thresholds for this process (and the workers it forks later). False where it cannot (not glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None)
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # musl and others have no mallopt
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
