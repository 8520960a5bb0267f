"""Interval arithmetic against a brute-force timeline of unit cells."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from gputriage.tracing.intervals import Spans, intersect, union

_pairs = st.lists(st.tuples(st.integers(0, 200), st.integers(0, 40)), max_size=15)


def _cells(pairs: list[tuple[int, int]]) -> np.ndarray:
    cells = np.zeros(260, dtype=bool)
    for start, length in pairs:
        cells[start : start + length] = True
    return cells


def _spans(pairs: list[tuple[int, int]]):  # type: ignore[no-untyped-def]
    start = np.array([s for s, _ in pairs], dtype=np.int64)
    end = np.array([s + n for s, n in pairs], dtype=np.int64)
    return union(start, end)


@given(_pairs, _pairs)
def test_union_intersect_minus_gaps_match_cells(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> None:
    sa, sb = _spans(a), _spans(b)
    ca, cb = _cells(a), _cells(b)
    assert sa.total() == ca.sum()
    assert intersect(sa, sb).total() == (ca & cb).sum()
    assert sa.minus(sb).total() == (ca & ~cb).sum()
    assert sa.overlap(sb) == (ca & cb).sum()
    if len(sa):
        inside = np.zeros(260, dtype=bool)
        inside[sa.start[0] : sa.end[-1]] = True
        assert sa.gaps().total() == (inside & ~ca).sum()


def test_contains_takes_the_start_and_not_the_end() -> None:
    spans = Spans(np.array([10, 30], np.int64), np.array([20, 40], np.int64))
    t = np.array([0, 10, 15, 20, 25, 30, 39, 40, 50], np.int64)
    assert spans.contains(t).tolist() == [False, True, True, False, False, True, True, False, False]
    assert Spans.empty().contains(t).tolist() == [False] * len(t)
