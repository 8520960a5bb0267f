"""Rung 5's honesty: a finding rests on enough steps after warm-up and a margin that survives noise."""

from __future__ import annotations

import random

import pytest
from records import meta_run, steps

from gputriage.findings import Severity
from gputriage.record.numbers import bootstrap_share_pct, largest_remainder, step_numbers, wilson_interval_pct
from gputriage.rules.steps import input_pipeline_bound


def _waits(count: int, mean_s: float, jitter_s: float, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [1.0] + [max(0.0, mean_s + rng.uniform(-jitter_s, jitter_s)) for _ in range(count)]  # slow warm-up


def test_the_warm_up_step_never_counts() -> None:
    numbers = step_numbers(steps([1.0, 0.0, 0.0, 0.0]).steps)
    assert numbers is not None
    assert numbers.window.count == 3 and numbers.window.first_index == 1
    assert numbers.part("data_wait").share_pct == 0.0


def test_few_steps_make_a_borderline_note_with_the_step_count() -> None:
    run = meta_run(steps=steps(_waits(3, 0.06, 0.0)))
    (finding,) = input_pipeline_bound(run)
    assert finding.severity is Severity.INFO
    # the reason it is a note is the step count, not the share (a trial: "not clearly over 20%" beside 86.7%-92.4%)
    assert finding.title.startswith("From 3 steps only (a judgement needs 5): the step waits for the DataLoader")
    assert finding.evidence["steps_measured"] == 3


def test_a_share_just_over_the_threshold_is_borderline() -> None:
    # 13.5 ms of 63.5 ms: 21%, with a few ms of jitter, like one worker on two cores
    run = meta_run(steps=steps(_waits(60, 0.0135, 0.004)))
    (finding,) = input_pipeline_bound(run)
    assert finding.severity is Severity.INFO
    low, high = finding.evidence["data_wait_pct_interval_90"]
    assert low < 23.0 < high or high < 23.0


def test_a_clear_margin_is_a_warning_and_half_the_step_is_critical() -> None:
    (warning,) = input_pipeline_bound(meta_run(steps=steps(_waits(40, 0.025, 0.002))))
    assert warning.severity is Severity.WARNING
    (critical,) = input_pipeline_bound(meta_run(steps=steps(_waits(40, 0.15, 0.01))))
    assert critical.severity is Severity.CRITICAL


def test_one_slow_step_widens_the_interval_instead_of_deciding() -> None:
    waits = [1.0] + [0.001] * 30 + [2.0]  # one batch that waited 2 s (a worker restart)
    (finding,) = input_pipeline_bound(meta_run(steps=steps(waits)))
    assert finding.severity is Severity.INFO
    low, _ = finding.evidence["data_wait_pct_interval_90"]
    assert low < 20.0


def test_the_interval_is_deterministic() -> None:
    window = steps(_waits(50, 0.02, 0.01)).steps[1:]
    assert bootstrap_share_pct(window, ("data_wait_s",)) == bootstrap_share_pct(window, ("data_wait_s",))


@pytest.mark.parametrize(
    ("values", "expected"), [([33.33, 33.33, 33.34], [33.3, 33.3, 33.4]), ([99.96, 0.04], [100.0, 0.0])]
)
def test_largest_remainder_keeps_the_total(values: list[float], expected: list[float]) -> None:
    assert largest_remainder(values, 100.0, 0.1) == expected
    assert round(sum(largest_remainder(values, 100.0, 0.1)), 6) == 100.0


def test_wilson_interval_holds_the_proportion() -> None:
    interval = wilson_interval_pct(30, 100)
    assert interval.low < 30.0 < interval.high
    assert wilson_interval_pct(0, 0).high == 100.0


def test_step_numbers_of_a_record_with_out_of_scale_times_are_none_not_a_crash() -> None:
    """Found by bench/fuzz.py: a hand-edited rank record whose times are finite but too large to add, or whose
    stand-in time is negative, gives no step numbers (as a wall time that is not finite does), never OverflowError."""
    from gputriage.record.numbers import step_numbers
    from gputriage.record.steps import Step

    huge = [Step(index=i, start_s=float(i), wall_s=0.1, optimizer_s=1e308, other_s=0.1) for i in range(4)]
    assert step_numbers(huge) is None
    negative = [Step(index=i, start_s=float(i), wall_s=0.1, other_s=0.1, stand_in_s=-1e308) for i in range(4)]
    numbers = step_numbers(negative)
    assert numbers is not None and abs(numbers.step_time_s - 0.1) < 1e-9  # a negative stand-in time takes nothing
    assert Step(index=0, start_s=0.0, wall_s=0.1, stand_in_s=0.5).host_s() == 0.0  # nor more than the step
