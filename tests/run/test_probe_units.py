"""The probe's clock and transition table, with an injected clock."""

from __future__ import annotations

from gputriage.collectors.probe.clock import PhaseClock
from gputriage.collectors.probe.window import CENSUS, MIXED, PLACEMENT, TIMING, Switch, WindowDriver, active_probes


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
