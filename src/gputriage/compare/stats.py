"""Is a before -> after difference real, or run-to-run noise? Pure statistics on the per-step distributions.

The statistic is the one the reports show: the mean time per step over the steps after warm-up (`step_numbers`), and
the mean NVML utilisation; a change must move the median the same way, by the same share (a few stalled steps move
the mean alone). Its uncertainty is a 90% bootstrap interval of the difference (after - before), each run's
steps resampled on their own (a fixed seed, like `bootstrap_share_pct`, so a saved pair re-renders the same). A
change is called real only when that interval excludes zero AND it is larger than a floor that stands for what the
per-step spread cannot see: two runs differ by clocks, caches and neighbours on the machine by a few percent.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import msgspec

from gputriage.record.numbers import BOOTSTRAP_CONFIDENCE, BOOTSTRAP_RESAMPLES, BOOTSTRAP_SEED, Interval

# Below 10% of the before value, a step-time change is run-to-run noise whatever the interval says: two runs of the
# same unchanged script on a shared 2-core machine differed by 5.5% (54.1 vs 57.1 ms per step, tests/compare), with
# an interval that excluded 0, because the per-step spread does not see what changed between the runs. GPU busy
# moves by whole points: 5 of them.
MIN_CHANGE_PCT = 10.0
MIN_BUSY_CHANGE_POINTS = 5.0
# Fewer steady steps than this on either side: no interval is worth giving; the change is "not enough steps".
MIN_STEPS = 5

BETTER, WORSE, NOISE, UNMEASURED = "better", "worse", "within noise", "not measured"


class Judgement(msgspec.Struct, frozen=True):
    direction: str  # better | worse | within noise | not measured
    interval: Interval | None  # 90% interval of after - before, in the quantity's unit
    reason: str  # one phrase: what the call rests on


def mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def diff_interval(before: Sequence[float], after: Sequence[float]) -> Interval:
    """A 90% bootstrap interval of mean(after) - mean(before), each side resampled on its own."""
    rng = random.Random(BOOTSTRAP_SEED)
    diffs = []
    for _ in range(BOOTSTRAP_RESAMPLES):
        b = rng.choices(before, k=len(before))
        a = rng.choices(after, k=len(after))
        diffs.append(mean(a) - mean(b))
    diffs.sort()
    tail = (1.0 - BOOTSTRAP_CONFIDENCE) / 2
    low = diffs[int(tail * (BOOTSTRAP_RESAMPLES - 1))]
    high = diffs[math.ceil((1.0 - tail) * (BOOTSTRAP_RESAMPLES - 1))]
    return Interval(low, high)


def judge(
    before: Sequence[float], after: Sequence[float], floor: float, *, higher_is_better: bool, what: str
) -> Judgement:
    """Better, worse or within noise: the difference of the means, its interval, and the floor (same unit)."""
    if not before or not after:
        return Judgement(UNMEASURED, None, f"{what}: not measured in {'the before' if not before else 'the after'} run")
    if min(len(before), len(after)) < MIN_STEPS:
        n = min(len(before), len(after))
        return Judgement(NOISE, None, f"{what}: {n} value{'s' if n != 1 else ''}, fewer than {MIN_STEPS} to judge")
    interval = diff_interval(before, after)
    change = mean(after) - mean(before)
    counts = f"{len(before)} vs {len(after)}"
    if interval.low <= 0.0 <= interval.high:
        return Judgement(NOISE, interval, f"{what}: the 90% interval of the change includes 0 ({counts})")
    if abs(change) < floor:
        return Judgement(NOISE, interval, f"{what}: real but under the run-to-run floor ({counts})")
    up = change > 0
    typical = median(after) - median(before)
    if (typical > 0) != up or abs(typical) < floor * median(before) / max(mean(before), 1e-12):
        # A few steps the OS stalled (a process descheduled on a shared machine: 7 steps of 79 at 50-200x the
        # median) moved a mean 10x while the typical step did not change: the same floor, as a share, on the medians
        # too. A slow step every tenth one (an evaluation) moves the mean alone as well: the reason says so.
        slow = sum(v > 3 * median(after) for v in after)
        return Judgement(
            NOISE,
            interval,
            f"{what}: the mean moved with {slow} slow step{'s' if slow != 1 else ''} of {len(after)}; the median did "
            f"not ({counts})",
        )
    return Judgement(
        BETTER if up == higher_is_better else WORSE, interval, f"{what}: 90% interval excludes 0 ({counts})"
    )


def judge_single(
    before: float | None, after: float | None, floor: float, *, higher_is_better: bool, what: str
) -> Judgement:
    """One value per run (a trace's step time or busy share): only the floor separates a change from noise."""
    if before is None or after is None:
        return Judgement(
            UNMEASURED, None, f"{what}: not measured in {'the before' if before is None else 'the after'} run"
        )
    change = after - before
    if abs(change) < floor:
        return Judgement(NOISE, None, f"{what}: one value per run, change under the floor")
    up = change > 0
    return Judgement(
        BETTER if up == higher_is_better else WORSE, None, f"{what}: one value per run, change over the floor"
    )
