"""One number per concept: the step quantities that rules and renderers show, each defined once, with its window.

The window: the steps after warm-up. Step 0 pays for worker start-up, lazy initialisation and allocator growth, so it
is always left out; a run that completed only step 0 has no steady step, and its step numbers are "not measured".

The quantities, all over that window:
- the step time: the mean wall time per step (total wall time / steps);
- each part of the step, as the sequence diagram draws it (load data, send data, perform computation, return results,
  backpropagate) plus "other", the time no probe attributed: its mean time per step and its share of the step, both
  from the window's totals (part total / wall total), so the parts add up to the step time and the shares to 100%.
  Shares are rounded to 0.1% by the largest remainder, so the rounded shares still add up to exactly 100.0.

Every renderer and every rule reads these values (and writes a share with `pct_text`), so the table, the diagram and
a finding's title and evidence never disagree.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Sequence

import msgspec

from gputriage.record.gpu import GpuTrack
from gputriage.record.steps import WARMUP_STEPS, Step, steady_steps
from gputriage.stdlib import statistics


class PartSpec(msgspec.Struct, frozen=True):
    key: str
    label: str  # the arrow's words in the sequence diagram
    detail: str  # what it covers
    fields: tuple[str, ...]  # the Step attributes it adds up


# The sequence people draw for one step, then the rest. Keys are stable: evidence and tests name them.
PARTS: tuple[PartSpec, ...] = (
    PartSpec("data_wait", "load data", "waiting in DataLoader.__next__", ("data_wait_s",)),
    PartSpec("h2d", "send data", "copying the batch to the device", ("h2d_s",)),
    PartSpec("forward", "perform computation", "forward", ("forward_s",)),
    PartSpec("sync", "return results", "host syncs: .item(), .cpu(), synchronize", ("sync_s",)),
    PartSpec("backprop", "backpropagate", "backward + optimizer step", ("backward_s", "optimizer_s")),
    PartSpec("other", "other", "time no probe attributed to an arrow (Python, CPU work in the loop)", ("other_s",)),
)
PART_KEYS = tuple(p.key for p in PARTS)


class StepWindow(msgspec.Struct, frozen=True):
    """Which steps a number rests on."""

    recorded: int  # steps the record holds
    count: int  # steps in the window
    first_index: int | None
    last_index: int | None
    warmup_excluded: int

    def describe(self) -> str:
        """'steps 1-39 (39 steps; warm-up step 0 left out)'."""
        if self.count == 0:
            return "no step after the warm-up step" if self.recorded else "no step"
        span = f"step {self.first_index}" if self.count == 1 else f"steps {self.first_index}-{self.last_index}"
        noun = "step" if self.count == 1 else "steps"
        warm = f"; warm-up step {self.first_index - 1} left out" if self.warmup_excluded and self.first_index else ""
        return f"{span} ({self.count} {noun}{warm})"


class Part(msgspec.Struct, frozen=True):
    key: str
    label: str
    detail: str
    time_s: float  # mean per step over the window
    share_pct: float  # of the step's wall time, rounded to 0.1; the parts add up to 100.0


class StepNumbers(msgspec.Struct, frozen=True):
    window: StepWindow
    step_time_s: float  # mean wall time per step over the window
    parts: tuple[Part, ...]
    median_s: float = 0.0  # the window's median step (host time), beside the mean: one slow step moves only the mean
    slowest_s: float = 0.0

    def outlier(self) -> bool:
        """One step far slower than the rest (a sample generated every 500 steps, a checkpoint): the mean is then no
        typical step, and the views say so."""
        return self.window.count >= OUTLIER_MIN_STEPS and self.slowest_s > OUTLIER_RATIO * self.median_s > 0

    def part(self, key: str) -> Part:
        return next(p for p in self.parts if p.key == key)


OUTLIER_MIN_STEPS = 3
OUTLIER_RATIO = 3.0  # the slowest step over the median: beyond this the mean is said to rest on it


def step_numbers(steps: Sequence[Step]) -> StepNumbers | None:
    """The step's numbers over the window; None when no step after warm-up has a positive wall time.

    On a preflight's stand-in device the numbers are the host's: the stand-in computes on the CPU what a GPU runs
    asynchronously (Step.stand_in_s), so that time is left out of the step and of the parts it fell in (the
    computation first), here and nowhere else.
    """
    window = steady_steps(list(steps))
    wall_s = sum(s.host_s() for s in window)
    if not window or not math.isfinite(wall_s) or wall_s <= 0:
        return None
    totals = [0.0] * len(PARTS)
    for step in window:
        for i, part_s in enumerate(host_parts_s(step)):
            totals[i] += part_s
    raw_shares = [100.0 * t / wall_s for t in totals]
    if not all(math.isfinite(share) for share in raw_shares):
        return None  # parts too large for a float (a hand-edited record), as a wall time that is
    shares = largest_remainder(raw_shares, total=100.0, step=0.1)
    parts = tuple(
        Part(spec.key, spec.label, spec.detail, total / len(window), share)
        for spec, total, share in zip(PARTS, totals, shares, strict=True)
    )
    info = StepWindow(
        recorded=len(steps),
        count=len(window),
        first_index=window[0].index,
        last_index=window[-1].index,
        warmup_excluded=min(WARMUP_STEPS, len(steps)),
    )
    hosts = sorted(s.host_s() for s in window)
    return StepNumbers(info, wall_s / len(window), parts, statistics.median(hosts), hosts[-1])


def stand_in_left_out_s(steps: Sequence[Step], key: str) -> float:
    """The stand-in's time taken out of one part of the step (`host_parts_s`), per step over the window: what a
    preflight's number for that part no longer holds, and so how far off it can be where that cost was misjudged."""
    window = steady_steps(list(steps))
    if not window:
        return 0.0
    index = PART_KEYS.index(key)
    spec = PARTS[index]
    left_out = sum(_part_s(step, spec.fields) - host_parts_s(step)[index] for step in window)
    return max(left_out, 0.0) / len(window)


def window_of(steps: Sequence[Step]) -> StepWindow:
    """The window alone (also when it is empty)."""
    window = steady_steps(list(steps))
    return StepWindow(
        recorded=len(steps),
        count=len(window),
        first_index=window[0].index if window else None,
        last_index=window[-1].index if window else None,
        warmup_excluded=min(WARMUP_STEPS, len(steps)),
    )


def _part_s(step: Step, fields: tuple[str, ...]) -> float:
    return sum(float(getattr(step, name)) for name in fields)


# Where the stand-in's time is not known per phase (records made before the phase clock read it, and what no phase
# held), the parts it is taken out of, in this order. Last the data wait: a collate_fn or Dataset that builds the
# batch on the device computes there, and what is left of the stand-in's time can only have been spent in it (so the
# parts add up to the host's step, and no share passes 100%).
_STAND_IN_PARTS = ("forward", "backprop", "sync", "other", "h2d", "data_wait")


def host_parts_s(step: Step) -> list[float]:
    """Each part's time in this step (PARTS order), without a stand-in device's own compute: each part's own stand-in
    time where the phase clock measured it (older records: the part measured inside the data wait comes off the wait),
    then whatever is left off the parts it can have fallen in."""
    parts = {spec.key: _part_s(step, spec.fields) for spec in PARTS}
    left_s = step.stand_in_spent_s()
    for key, own_s in _stand_in_by_part(step).items():
        taken = min(left_s, max(own_s, 0.0), parts[key])
        parts[key] -= taken
        left_s -= taken
    for key in _STAND_IN_PARTS:
        taken = min(left_s, parts[key])
        parts[key] -= taken
        left_s -= taken
    return [parts[spec.key] for spec in PARTS]


def _stand_in_by_part(step: Step) -> dict[str, float]:
    """The stand-in's time in each part of the step, as measured: per phase, or in the data wait alone."""
    if step.stand_in_phases_s is None:
        return {"data_wait": step.wait_stand_in_s or 0.0}
    return {spec.key: sum(step.stand_in_phases_s.get(f.removesuffix("_s"), 0.0) for f in spec.fields) for spec in PARTS}


def largest_remainder(values: Sequence[float], total: float, step: float) -> list[float]:
    """Round `values` (which add up to `total`) to multiples of `step` so that the rounded values still add up to it."""
    units = round(total / step)
    scaled = [max(0.0, v) / step for v in values]
    floors = [math.floor(v) for v in scaled]
    missing = units - sum(floors)
    order = sorted(range(len(values)), key=lambda i: (-(scaled[i] - floors[i]), i))
    for i in order[: max(0, missing)]:
        floors[i] += 1
    return [round(f * step, 10) for f in floors]


def duration_text(seconds: float) -> str:
    """A step-scale time as every view and finding writes it: '1.08 s', '22.2 ms', '54 µs' (the unit that reads
    best, at its one precision), so a compare row and the report's table show the same number."""
    magnitude = abs(seconds)
    if magnitude >= 1:
        return f"{seconds:.2f} s"
    if magnitude >= 1e-3:
        return f"{seconds * 1e3:.1f} ms"
    if magnitude == 0:
        return "0 ms"
    return f"{seconds * 1e6:.0f} µs"


def pct_text(share_pct: float) -> str:
    """A step share as every view and finding writes it: one decimal, e.g. '30.8%'; a share that is not zero but
    under 0.05% with its first digit ('0.03%'), never '0.0%' beside evidence that says 0.033."""
    if 0 < abs(share_pct) < 0.05:
        return f"{share_pct:.1g}%"
    return f"{share_pct:.1f}%"


# -- the GPU's busy share (NVML) ---------------------------------------------------------------------------------------


def gpu_util_mean_pct(track: GpuTrack) -> float | None:
    """A GPU's mean NVML utilisation (GpuTrack.util_mean_pct)."""
    return track.util_mean_pct()


def gpu_util_readings(track: GpuTrack) -> int:
    """How many utilisation readings `gpu_util_mean_pct` rests on (GpuTrack.util_readings)."""
    return track.util_readings()


def util_text(util_pct: float) -> str:
    """GPU utilisation as every view and finding writes it: a whole percent, e.g. '31%'."""
    return f"{util_pct:.0f}%"


# -- how sure a share is ----------------------------------------------------------------------------------------------

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_CONFIDENCE = 0.90
# Fixed, so that re-rendering a saved report.json gives the same interval on any machine.
BOOTSTRAP_SEED = 20240611


class Interval(msgspec.Struct, frozen=True):
    low: float
    high: float

    def text(self, fmt: Callable[[float], str] = pct_text) -> str:
        return f"{fmt(self.low)}-{fmt(self.high)}"


def bootstrap_share_pct(steps: Sequence[Step], fields: tuple[str, ...]) -> Interval:
    """A 90% bootstrap interval of a part's share of the step (total part / total wall, steps resampled).

    The same statistic as `step_numbers`' share, so the interval is around the number the report shows. Deterministic
    (fixed seed). Steps are resampled whole: a few slow steps widen the interval instead of deciding the share.
    """
    spec = next((i for i, p in enumerate(PARTS) if p.fields == fields), None)
    parts = [host_parts_s(s)[spec] if spec is not None else _part_s(s, fields) for s in steps]
    walls = [s.host_s() for s in steps]  # the same denominator as step_numbers
    n = len(steps)
    rng = random.Random(BOOTSTRAP_SEED)
    shares = []
    indices = range(n)
    for _ in range(BOOTSTRAP_RESAMPLES):
        picks = rng.choices(indices, k=n)
        wall_s = sum(walls[i] for i in picks)
        shares.append(100.0 * sum(parts[i] for i in picks) / wall_s if wall_s > 0 else 0.0)
    shares.sort()
    tail = (1.0 - BOOTSTRAP_CONFIDENCE) / 2
    low = shares[int(tail * (BOOTSTRAP_RESAMPLES - 1))]
    high = shares[math.ceil((1.0 - tail) * (BOOTSTRAP_RESAMPLES - 1))]
    return Interval(round(low, 1), round(high, 1))


def wilson_interval_pct(hits: int, total: int, z: float = 1.645) -> Interval:
    """A 90% Wilson interval of a proportion (samples of a stack sampler that landed on one line), in percent."""
    if total <= 0:
        return Interval(0.0, 100.0)
    p = hits / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return Interval(round(100 * max(0.0, centre - half), 1), round(100 * min(1.0, centre + half), 1))
