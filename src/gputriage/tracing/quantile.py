"""An exact median of a column too long to keep: values in memory up to a budget, then in a temporary file.

The median is found by narrowing a range of values: one pass over the file counts the values in 65,536 equal slices
of the range (from the least value to the greatest, so no pass is spent on bits every value shares), keeps the
slices that hold the two middle ranks, and once the values left in the range fit in memory, numpy's partition
finds both ranks. Memory stays a histogram plus MEMORY_VALUES values however many there are; on real columns (a
trace's kernel times) it takes two passes for both middle values, where selecting by fixed 16-bit digits took four
per value. In memory it is numpy's own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import numpy as np
import numpy.typing as npt

from gputriage.tracing.store import SpillDir

I64 = npt.NDArray[np.int64]
MEMORY_VALUES = 1_000_000  # 8 MiB of int64 per column before it goes to disk
_READ = 1 << 20
_SIGN = np.uint64(1 << 63)
_OFFSET = 1 << 63  # a value's key is value + 2**63: int64 order as uint64 order
_SLICE_BITS = 16


class _Range(msgspec.Struct, frozen=True):
    """Keys from first to last (inclusive), with `below` values under first and `inside` values in the range."""

    first: int
    last: int
    below: int
    inside: int

    def slice(self, index: int, shift: int, cumulative: I64) -> _Range:
        """The index-th of the 2**shift-wide slices the range was counted in (cumulative: counts up to each)."""
        before = int(cumulative[index - 1]) if index else 0
        first = self.first + (index << shift)
        last = min(self.last, first + (1 << shift) - 1)
        return _Range(first, last, self.below + before, int(cumulative[index]) - before)


class Median(msgspec.Struct):
    spill: SpillDir
    stem: str
    chunks: list[I64] = msgspec.field(default_factory=list)
    in_memory: int = 0
    count: int = 0
    path: Path | None = None  # the file this column spills to
    more_paths: list[Path] = msgspec.field(default_factory=list)  # files of columns merged into this one (segments.py)
    least: int | None = None
    greatest: int | None = None

    def add(self, values: I64) -> None:
        if not len(values):
            return
        chunk = np.ascontiguousarray(values, dtype=np.int64)
        self.chunks.append(chunk)
        least, greatest = int(chunk.min()), int(chunk.max())
        self.least = least if self.least is None else min(self.least, least)
        self.greatest = greatest if self.greatest is None else max(self.greatest, greatest)
        self.in_memory += len(values)
        self.count += len(values)
        if self.in_memory > MEMORY_VALUES:
            self._flush()

    def merge(self, other: Median) -> None:
        """Take in another column's values: its file as it is, and its values in memory."""
        if other.path is not None:
            self.more_paths.append(other.path)
        self.more_paths.extend(other.more_paths)
        self.count += other.count - other.in_memory
        for bound in (other.least, other.greatest):
            if bound is not None:
                self.least = bound if self.least is None else min(self.least, bound)
                self.greatest = bound if self.greatest is None else max(self.greatest, bound)
        for chunk in other.chunks:
            self.add(chunk)

    def to_file(self) -> None:
        """Values held in memory go to the file now, when there are enough to be worth a file (a worker's column,
        before it is sent back: a write in the worker instead of a copy through a pipe)."""
        if self.in_memory >= _READ // 16:
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
        if self.path is None and not self.more_paths:
            values = np.concatenate(self.chunks)
            part = np.partition(values, (low, high))
            return int(part[low]), int(part[high])
        self._flush()
        return self._select(low, high)

    def _select(self, low: int, high: int) -> tuple[int, int]:
        """The values of the 0-based ranks low and high (high = low or low + 1), reading the file a few times."""
        assert self.least is not None and self.greatest is not None
        keys = _Range(self.least + _OFFSET, self.greatest + _OFFSET, 0, self.count)  # all of them
        return self._within(keys, low, high)

    def _within(self, keys: _Range, low: int, high: int) -> tuple[int, int]:
        while keys.inside > MEMORY_VALUES and keys.first < keys.last:
            shift = max(0, (keys.last - keys.first).bit_length() - _SLICE_BITS)
            counts = np.zeros(1 << _SLICE_BITS, dtype=np.int64)
            for chunk in self._keys_between(keys.first, keys.last):
                counts += np.bincount(
                    ((chunk - np.uint64(keys.first)) >> np.uint64(shift)).astype(np.int64), minlength=len(counts)
                )
            cumulative = np.cumsum(counts)
            slice_low = int(np.searchsorted(cumulative, low - keys.below, side="right"))
            slice_high = int(np.searchsorted(cumulative, high - keys.below, side="right"))
            if slice_low != slice_high:  # a gap in the values between the two ranks: one rank at a time
                return (
                    self._within(keys.slice(slice_low, shift, cumulative), low, low)[0],
                    self._within(keys.slice(slice_high, shift, cumulative), high, high)[0],
                )
            keys = keys.slice(slice_low, shift, cumulative)
        if keys.first == keys.last:  # one value fills the range (many equal values): it is both ranks
            return keys.first - _OFFSET, keys.first - _OFFSET
        values = np.concatenate([*self._keys_between(keys.first, keys.last), np.zeros(0, dtype=np.uint64)])
        part = np.partition(values, (low - keys.below, high - keys.below))
        return int(part[low - keys.below]) - _OFFSET, int(part[high - keys.below]) - _OFFSET

    def _keys_between(self, first: int, last: int) -> Iterator[npt.NDArray[np.uint64]]:
        for keys in self._keys():
            yield keys[(keys >= np.uint64(first)) & (keys <= np.uint64(last))]

    def _keys(self) -> Iterator[npt.NDArray[np.uint64]]:
        """The values as order-preserving unsigned keys, a chunk at a time (read from the files)."""
        for path in (*([self.path] if self.path is not None else []), *self.more_paths):
            with path.open("rb") as fh:
                while True:
                    chunk = np.fromfile(fh, dtype=np.int64, count=_READ)
                    if not len(chunk):
                        break
                    yield chunk.view(np.uint64) ^ _SIGN


def median_us(pair: tuple[int, int] | None, *, divide_first: bool) -> float | None:
    """numpy's median of the values in µs: of the ns values divided by 1000 (divide_first), or divided after."""
    if pair is None:
        return None
    a, b = pair
    if divide_first:
        return round(float((a / 1000 + b / 1000) / 2), 3)
    return round(float((float(a) + float(b)) / 2) / 1000, 3)
