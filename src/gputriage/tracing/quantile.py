"""An exact median of a column too long to keep: values in memory up to a budget, then in a temporary file.

The median is found by selection over 16-bit digits (most significant first), one pass over the values per digit,
so memory stays a histogram of 65,536 counts however many values there are. In memory it is numpy's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from gputriage.tracing.store import SpillDir

I64 = npt.NDArray[np.int64]
MEMORY_VALUES = 1_000_000  # 8 MiB of int64 per column before it goes to disk
_READ = 1 << 20
_SIGN = np.uint64(1 << 63)


@dataclass
class Median:
    spill: SpillDir
    stem: str
    chunks: list[I64] = field(default_factory=list)
    in_memory: int = 0
    count: int = 0
    path: Path | None = None

    def add(self, values: I64) -> None:
        if not len(values):
            return
        self.chunks.append(np.ascontiguousarray(values, dtype=np.int64))
        self.in_memory += len(values)
        self.count += len(values)
        if self.in_memory > MEMORY_VALUES:
            self._flush()

    def _flush(self) -> None:
        if self.path is None:
            self.path = self.spill.new_file(self.stem)
        with self.path.open("ab") as fh:
            for chunk in self.chunks:
                chunk.tofile(fh)
        self.chunks, self.in_memory = [], 0

    def middle(self) -> tuple[int, int] | None:
        """The two middle values (equal for an odd count); None when there are no values."""
        if not self.count:
            return None
        low, high = (self.count - 1) // 2, self.count // 2
        if self.path is None:
            values = np.concatenate(self.chunks)
            part = np.partition(values, (low, high))
            return int(part[low]), int(part[high])
        self._flush()
        return self._select(low), self._select(high)

    def _select(self, rank: int) -> int:
        """The value of the given 0-based rank, by one counting pass per 16-bit digit."""
        prefix = np.uint64(0)
        for shift in (48, 32, 16, 0):
            mask_high = np.uint64(0) if shift == 48 else ~np.uint64((1 << (shift + 16)) - 1)
            counts = np.zeros(1 << 16, dtype=np.int64)
            for keys in self._keys():
                match = keys[(keys & mask_high) == prefix] if shift != 48 else keys
                digits = ((match >> np.uint64(shift)) & np.uint64(0xFFFF)).astype(np.int64)
                counts += np.bincount(digits, minlength=1 << 16)
            cumulative = np.cumsum(counts)
            digit = int(np.searchsorted(cumulative, rank, side="right"))
            rank -= int(cumulative[digit - 1]) if digit else 0
            prefix |= np.uint64(digit) << np.uint64(shift)
        return int(np.array([prefix ^ _SIGN], dtype=np.uint64).view(np.int64)[0])

    def _keys(self) -> Iterator[npt.NDArray[np.uint64]]:
        """The values as order-preserving unsigned keys, a chunk at a time (read from the file)."""
        assert self.path is not None
        with self.path.open("rb") as fh:
            while True:
                chunk = np.fromfile(fh, dtype=np.int64, count=_READ)
                if not len(chunk):
                    return
                yield chunk.view(np.uint64) ^ _SIGN


def median_us(pair: tuple[int, int] | None, *, divide_first: bool) -> float | None:
    """numpy's median of the values in µs: of the ns values divided by 1000 (divide_first), or divided after."""
    if pair is None:
        return None
    a, b = pair
    if divide_first:
        return round(float((a / 1000 + b / 1000) / 2), 3)
    return round(float((float(a) + float(b)) / 2) / 1000, 3)
