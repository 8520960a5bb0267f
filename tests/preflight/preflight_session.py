"""A preflight in this process, around a test: the fake probe it reports to, and the session the fixtures yield."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gputriage.collectors.preflight import Backing, Preflight
from gputriage.collectors.probe.state import ProbeState
from gputriage.record import Run
from gputriage.record.steps import StepsSection


@dataclass
class FakeProbe:
    """What the preflight needs from the run probe, recording what it is told."""

    state: ProbeState = field(default_factory=lambda: ProbeState(expected_device="cuda"))
    step_listeners: list[Any] = field(default_factory=list)
    syncs: list[tuple[str, str]] = field(default_factory=list)
    steps_section: StepsSection = field(default_factory=StepsSection)

    def record_host_sync(self, kind: str, device: str) -> None:
        self.syncs.append((kind, device))

    def step(self, index: int) -> None:
        for listener in list(self.step_listeners):
            listener(index)


@dataclass
class Session:
    probe: FakeProbe
    preflight: Preflight
    run: Run


def session(backing: Backing, stop_after_steps: int | None = None) -> Iterator[Session]:
    probe = FakeProbe()
    preflight = Preflight(probe, stop_after_steps=stop_after_steps, backing=backing)
    run = Run(command="run")
    preflight.start(run)
    try:
        yield Session(probe, preflight, run)
    finally:
        preflight.finish(run)
