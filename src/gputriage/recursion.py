"""The job's recursion limit, as the job sets it, counted from its script's first frame.

Under `gputriage run` the script's `<module>` runs about 15 frames deeper than under `python`, so the runner raises
the limit by as many. A job that sets its own limit (`sys.setrecursionlimit(120)`) would lose that: its recursion of
110 that fits under python met RecursionError (a trial). From the job's start, the job's calls of
`sys.setrecursionlimit(n)` set `n` plus those frames; gputriage's own code sets limits through `set_limit`.
"""

from __future__ import annotations

import functools
import sys

_BUILTIN = sys.setrecursionlimit  # taken before any wrapper is installed


class _Below:
    frames = 0  # gputriage's frames under the script's first one, once the job runs


def set_limit(limit: int) -> None:
    """gputriage's own limits, never offset."""
    _BUILTIN(limit)


def offset_job_limits(frames: int) -> None:
    """Raise the limit by `frames`, and every later `sys.setrecursionlimit(n)` to `n + frames`."""
    _Below.frames = frames
    _BUILTIN(sys.getrecursionlimit() + frames)
    sys.setrecursionlimit = _job_setrecursionlimit


@functools.wraps(_BUILTIN)
def _job_setrecursionlimit(limit: int, /) -> None:
    if type(limit) is not int or limit < 1:
        _BUILTIN(limit)  # the builtin's own TypeError / ValueError, word for word
    _BUILTIN(limit + _Below.frames)
