"""Interval arithmetic on integer-nanosecond numpy arrays: unions, gaps, coverage and overlaps."""

from __future__ import annotations

import msgspec
import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]


class Spans(msgspec.Struct):
    """Sorted, disjoint intervals [start, end)."""

    start: I64
    end: I64

    @classmethod
    def empty(cls) -> Spans:
        return cls(np.zeros(0, np.int64), np.zeros(0, np.int64))

    def __len__(self) -> int:
        return len(self.start)

    def total(self) -> int:
        return int((self.end - self.start).sum())

    def gaps(self) -> Spans:
        """The holes between consecutive spans."""
        return Spans(self.end[:-1].copy(), self.start[1:].copy())

    def covered_before(self, t: I64) -> I64:
        """Covered length in (-inf, t] for each t (vectorised)."""
        if not len(self):
            return np.zeros(len(t), np.int64)
        cum = np.concatenate(([0], np.cumsum(self.end - self.start)))
        i = np.searchsorted(self.start, t, side="right")
        prev = np.maximum(i - 1, 0)
        inside = np.clip(t - self.start[prev], 0, self.end[prev] - self.start[prev])
        return np.where(i > 0, cum[prev] + inside, 0)

    def contains(self, t: I64) -> npt.NDArray[np.bool_]:
        """Whether each time lies inside a span (start included, end not)."""
        i = np.searchsorted(self.start, t, side="right") - 1
        inside = i >= 0
        inside[inside] = t[inside] < self.end[i[inside]]
        return inside

    def overlap_each(self, start: I64, end: I64) -> I64:
        """How much of each interval [start, end) these spans cover."""
        return self.covered_before(end) - self.covered_before(start)

    def overlap(self, other: Spans) -> int:
        return int(self.overlap_each(other.start, other.end).sum())

    def clip(self, lo: int, hi: int) -> Spans:
        keep = (self.end > lo) & (self.start < hi)
        return Spans(np.maximum(self.start[keep], lo), np.minimum(self.end[keep], hi))

    def minus(self, other: Spans) -> Spans:
        """self \\ other, as disjoint spans."""
        if not len(other) or not len(self):
            return self
        # Keep what lies in the holes of `other`, bounded just outside both sets.
        lo = min(int(self.start[0]), int(other.start[0])) - 1
        hi = max(int(self.end.max()), int(other.end.max())) + 1
        holes = Spans(np.concatenate(([lo], other.end)), np.concatenate((other.start, [hi])))
        return intersect(self, holes)


def union(start: I64, end: I64) -> Spans:
    """Merge intervals into sorted disjoint spans (touching ones merge, as in HTA's merge_kernel_intervals)."""
    if not len(start):
        return Spans.empty()
    order = np.argsort(start, kind="stable")
    s = start[order]
    e = np.maximum.accumulate(end[order])
    new_group = np.empty(len(s), dtype=bool)
    new_group[0] = True
    new_group[1:] = s[1:] > e[:-1]
    first = np.flatnonzero(new_group)
    last = np.concatenate((first[1:] - 1, [len(s) - 1]))
    return Spans(s[first], e[last])


def intersect(a: Spans, b: Spans) -> Spans:
    """a ∩ b for two sets of sorted disjoint spans, in O((n + m) log) without touching each instant."""
    if not len(a) or not len(b):
        return Spans.empty()
    # For each span of `a`, the spans of `b` that overlap it form one contiguous run [first, stop).
    first = np.searchsorted(b.end, a.start, side="right")
    stop = np.searchsorted(b.start, a.end, side="left")
    count = np.maximum(stop - first, 0)
    if not count.sum():
        return Spans.empty()
    owner = np.repeat(np.arange(len(a)), count)
    offset = np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count)
    other = np.repeat(first, count) + offset
    start = np.maximum(a.start[owner], b.start[other])
    end = np.minimum(a.end[owner], b.end[other])
    keep = end > start
    return Spans(start[keep], end[keep])
