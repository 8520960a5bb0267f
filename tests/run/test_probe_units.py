"""The probe's clock and transition table, with an injected clock."""

from __future__ import annotations

import pytest

from gputriage.collectors.probe.clock import PhaseClock
from gputriage.collectors.probe.window import Switch, WindowDriver, active_probes
from gputriage.collectors.windows import CENSUS, MIXED, PLACEMENT, TIMING


class FakeClock:
    def __init__(self) -> None:
        self.now_s = 100.0

    def __call__(self) -> float:
        return self.now_s

    def advance(self, seconds: float) -> None:
        self.now_s += seconds


def test_phases_are_exclusive_and_add_up_to_the_wall_time() -> None:
    fake = FakeClock()
    clock = PhaseClock(fake)
    clock.begin()
    clock.push("data_wait")
    fake.advance(0.5)
    clock.pop()
    clock.push("forward")
    fake.advance(0.25)
    clock.push("h2d")  # a .to() inside forward counts as h2d only
    fake.advance(0.125)
    clock.pop()
    fake.advance(0.25)
    clock.pop()
    fake.advance(0.0625)
    times = clock.cut()
    assert times is not None
    assert times.wall_s == 1.1875
    assert times.phases_s["data_wait"] == 0.5
    assert times.phases_s["forward"] == 0.5
    assert times.phases_s["h2d"] == 0.125
    assert times.phases_s["other"] == 0.0625
    assert sum(times.phases_s.values()) == times.wall_s


def test_time_before_the_first_step_is_not_a_step() -> None:
    fake = FakeClock()
    clock = PhaseClock(fake)
    fake.advance(3.0)  # imports, model construction
    assert clock.cut() is None
    clock.begin()
    fake.advance(0.5)
    times = clock.cut()
    assert times is not None and times.wall_s == 0.5


def test_window_table() -> None:
    assert active_probes(0, None) == {TIMING, PLACEMENT, MIXED}  # step 0: the tensors' look only, no census
    assert active_probes(1, None) == {TIMING, PLACEMENT, CENSUS}
    assert active_probes(3, None) == {TIMING, CENSUS}
    assert active_probes(4, None) == {TIMING}
    assert active_probes(2, steps_limit=2) == frozenset()


def test_driver_starts_and_stops_each_probe_once() -> None:
    log: list[str] = []
    switches = {
        name: Switch(lambda n=name: log.append(f"+{n}"), lambda n=name: log.append(f"-{n}"))
        for name in (TIMING, PLACEMENT, CENSUS)
    }
    driver = WindowDriver(switches, steps_limit=5)
    for step in range(7):
        driver.enter_step(step)
    driver.stop_all()
    assert log == [
        "+placement",
        "+timing",
        "+census",
        "-placement",
        "-census",
        "-timing",
    ]


def test_a_stand_ins_time_is_known_per_phase() -> None:
    """A preflight's stand-in computes in forward and backward; the clock reads it at each phase change, so each part
    loses its own stand-in time (not a share of the step's total taken from forward first: forward read 0 ms). Its
    time before the step, or between steps, is not the step's."""
    from gputriage.record.numbers import PARTS, host_parts_s
    from gputriage.record.steps import Step

    fake, stand_in = FakeClock(), FakeClock()
    clock = PhaseClock(fake)
    clock.stand_in = stand_in
    stand_in.advance(9.0)  # before the step
    clock.begin()
    for phase, wall_s, stand_in_s in (("forward", 0.25, 0.125), ("backward", 0.5, 0.5), ("optimizer", 0.125, 0.0)):
        clock.push(phase)
        fake.advance(wall_s)
        stand_in.advance(stand_in_s)
        clock.pop()
    fake.advance(0.125)
    stand_in.advance(0.0625)  # in "other"
    times = clock.cut()
    assert times is not None and times.stand_in_phases_s == {"forward": 0.125, "backward": 0.5, "other": 0.0625}
    p = times.phases_s
    step = Step(0, 0.0, times.wall_s, forward_s=p["forward"], backward_s=p["backward"], optimizer_s=p["optimizer"],
                other_s=p["other"], stand_in_s=0.6875, stand_in_phases_s=times.stand_in_phases_s)  # fmt: skip
    host = dict(zip([spec.key for spec in PARTS], host_parts_s(step), strict=True))
    assert host["forward"] == 0.125 and host["backprop"] == 0.125 and host["other"] == 0.0625
    step.stand_in_phases_s = None  # a record from before: the step's total comes off forward first
    assert host_parts_s(step)[[spec.key for spec in PARTS].index("forward")] == 0.0


def test_the_stand_ins_clock_counts_a_call_still_running() -> None:
    """`loss.backward()` is one timed call around the whole pass: the phase clock reads the stand-in's clock inside
    it, at the end of the backward phase, and must see the time so far (it saw none, and "other" got it all)."""
    import time

    from gputriage.collectors.preflight.state import STATE, Backing

    STATE.reset(Backing.CPU, device_count=1)
    before_s = STATE.spent_s()
    with STATE.timed():
        time.sleep(0.02)
        inside_s = STATE.spent_s() - before_s
    after_s = STATE.spent_s() - before_s
    assert 0.02 <= inside_s <= after_s


def test_the_expected_device_is_told_without_starting_cuda(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA reads CUDA_VISIBLE_DEVICES once, when it starts: torch.cuda.is_available() before the script's first line
    started it, and a script's own `os.environ["CUDA_VISIBLE_DEVICES"] = "1"` then chose nothing (the job ran on GPU
    0). A CUDA build on a machine whose NVML lists GPUs is told without it."""
    import torch

    from gputriage.collectors.probe import devices

    asked: list[str] = []
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: asked.append("is_available") or False)
    monkeypatch.setattr(devices, "nvidia_gpu_count", lambda: 2)
    assert devices.resolve_expected_device(None) == "cuda"
    assert asked == []
    monkeypatch.setattr(devices, "nvidia_gpu_count", lambda: 0)  # NVML lists none: torch's own answer is asked
    assert devices.resolve_expected_device(None) == "cpu"
    assert asked == ["is_available"]
