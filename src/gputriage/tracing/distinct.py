"""The distinct values of an integer column, sorted: what `np.unique(values)` gives, without what it costs first.

numpy 2's plain `np.unique` asks `np.ma.is_masked` of its input, and the first such call imports numpy.ma: about
7 ms of every `trace` command's start-up (a sixth of numpy's own import), for masked arrays that never reach it.
"""

from __future__ import annotations

from typing import TypeVar

import numpy as np
import numpy.typing as npt

_Int = TypeVar("_Int", bound=np.integer)


def distinct(values: npt.NDArray[_Int]) -> npt.NDArray[_Int]:
    """The sorted distinct values of a 1-D integer array (a new array)."""
    ordered = np.sort(values)
    if len(ordered) < 2:
        return ordered
    keep = np.empty(len(ordered), dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]
