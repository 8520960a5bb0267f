"""GPU idle gaps (the holes between busy spans), followed across windows, with what happened during each.

Within a window the busy spans are known, so the gaps between them are too. A gap can also start before the
window (the GPU was idle at the cut) or run past it; its pieces are measured in each window and summed when the
gap closes. Everything measured per piece is additive (an overlap in ns), so a gap cut in two adds up exactly;
only the description of a gap that spans a cut (its longest op, its line) comes from its last window.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import numpy as np
import numpy.typing as npt

from gputriage.tracing import names as N
from gputriage.tracing.intervals import Spans, intersect, union
from gputriage.tracing.sweep import Window

I64 = npt.NDArray[np.int64]
F64 = npt.NDArray[np.float64]

SHORT_GAP_NS = 100_000  # idle gaps under 100 µs between kernels are launch latency, not a stall
LONG_GAP_NS = 1_000_000  # a GPU idle gap of 1 ms or more is worth explaining
# The order decides who gets an instant that two activities share: the more specific explanation first. "runtime" is
# a kernel launch the host sits in while the GPU idles: one that loads its module or sets cuDNN/cuBLAS up at first
# use (626 ms inside one cudaLaunchKernel of a first convolution, in trial 10), before the op around it, which only
# waits for it. (A copy call stays the op's: a pageable copy is the host's own work.)
ACTIVITIES = ("dataloader", "sync", "optimizer", "allocator", "runtime", "cpu-op")


class Gaps(msgspec.Struct):
    """Complete gaps (closed in this window): true start and end, and every per-gap value summed over its pieces."""

    start: I64
    end: I64
    values: dict[str, F64]
    crossed: npt.NDArray[np.bool_]  # began in an earlier window

    @property
    def length(self) -> I64:
        out: I64 = self.end - self.start
        return out


class GapTracker(msgspec.Struct):
    last_busy_end: int | None = None  # where the most recent busy span ended (None: no GPU work yet)
    open_start: int | None = None  # true start of the gap still open at the last cut
    open_values: dict[str, float] = msgspec.field(default_factory=dict)

    def window(self, w: Window, measure: Callable[[Window, Spans, npt.NDArray[np.bool_]], dict[str, F64]]) -> Gaps:
        """The gaps that close in this window; pieces that stay open are remembered for the next window."""
        busy = w.busy
        starts: list[int] = []
        ends: list[int] = []
        true_starts: list[int] = []
        leading = trailing = False
        if len(busy):
            if self.last_busy_end is not None and busy.start[0] > max(self.last_busy_end, w.lo - 1):
                leading = True
                true_starts.append(self.last_busy_end)
                starts.append(max(self.last_busy_end, w.lo))
                ends.append(int(busy.start[0]))
            if not w.final and busy.end[-1] < w.hi:
                trailing = True
        elif self.last_busy_end is not None and not w.final:
            # No GPU work in the whole window: one piece of a gap that is still open.
            piece = Spans(np.array([max(self.last_busy_end, w.lo)]), np.array([w.hi]))
            values = measure(w, piece, np.array([self.last_busy_end >= w.lo]))
            self._keep_open(self.last_busy_end, values, 0)
            return _no_gaps()
        inner_start, inner_end = busy.end[:-1], busy.start[1:]
        all_start = np.concatenate((np.array(starts, np.int64), inner_start))
        all_end = np.concatenate((np.array(ends, np.int64), inner_end))
        tail_start = int(busy.end[-1]) if trailing else None
        if tail_start is not None:
            all_start = np.append(all_start, tail_start)
            all_end = np.append(all_end, w.hi)
        true = np.concatenate((np.array(true_starts, np.int64), all_start[len(true_starts) :]))
        values = measure(w, Spans(all_start, all_end), true >= w.lo) if len(all_start) else {}
        closed = len(all_start) - (1 if trailing else 0)
        gaps = self._close(true[:closed], all_end[:closed], values, closed, leading)
        if trailing:
            assert tail_start is not None
            self.open_start = None
            self._keep_open(tail_start, values, len(all_start) - 1)
        else:
            self.open_start = None
            self.open_values = {}
        if len(busy):
            self.last_busy_end = int(busy.end[-1])
        return gaps

    def _keep_open(self, start: int, values: dict[str, F64], index: int) -> None:
        if self.open_start != start:
            self.open_start, self.open_values = start, {}
        for key, column in values.items():
            self.open_values[key] = self.open_values.get(key, 0.0) + float(column[index])

    def _close(self, start: I64, end: I64, values: dict[str, F64], count: int, leading: bool) -> Gaps:
        merged = {key: column[:count].astype(np.float64) for key, column in values.items()}
        crossed = np.zeros(count, dtype=bool)
        if leading and count and self.open_start is not None and self.open_start == int(start[0]):
            for key, total in self.open_values.items():
                merged.setdefault(key, np.zeros(count))[0] += total
            crossed[0] = True
        return Gaps(start, end, merged, crossed)


def _no_gaps() -> Gaps:
    return Gaps(np.zeros(0, np.int64), np.zeros(0, np.int64), {}, np.zeros(0, dtype=bool))


def activity_layers(w: Window) -> list[Spans]:
    """What the main thread does, one layer per activity, clipped to the window (see ACTIVITIES)."""
    main_rt = w.runtime_on_main
    cpu_main = w.cpu_on_main & w.cpu_not_python
    sync_rt = w.runtime_sync & main_rt
    sync_ops = w.cpu_has(N.SYNC_OP) & cpu_main
    sync = union(
        np.concatenate((w.runtime["ts"][sync_rt], w.cpu["ts"][sync_ops])),
        np.concatenate((w.runtime["end"][sync_rt], w.cpu["end"][sync_ops])),
    ).clip(w.lo, w.hi)
    busy_ops = cpu_main & ~w.cpu_has(N.STEP)
    busy_cpu = union(
        np.concatenate((w.cpu["ts"][busy_ops], w.runtime["ts"][main_rt])),
        np.concatenate((w.cpu["end"][busy_ops], w.runtime["end"][main_rt])),
    ).clip(w.lo, w.hi)
    return [
        w.dataloader,
        sync,
        w.spans(w.cpu, w.cpu_has(N.OPTIMIZER) & cpu_main),
        w.spans(w.runtime, w.runtime_has(N.ALLOC) & main_rt),
        w.spans(w.runtime, main_rt & w.runtime_has(N.LAUNCH) & ~w.runtime_sync),
        busy_cpu,
    ]


def claim_activities(w: Window, pieces: Spans) -> dict[str, F64]:
    """Per piece, the time each activity covers, each instant given to the first activity that covers it."""
    claimed = Spans.empty()
    out: dict[str, F64] = {}
    for label, layer in zip(ACTIVITIES, activity_layers(w), strict=True):
        mine = intersect(layer, pieces).minus(claimed)
        out[label] = mine.overlap_each(pieces.start, pieces.end).astype(np.float64)
        claimed = union(np.concatenate((claimed.start, mine.start)), np.concatenate((claimed.end, mine.end)))
    out["claimed"] = claimed.overlap_each(pieces.start, pieces.end).astype(np.float64)
    return out
