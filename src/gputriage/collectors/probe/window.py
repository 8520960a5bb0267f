"""The transition table: which probes are on at which step.

Cheap hooks (step timing) run for every observed step. The placement hooks run at the first steps, the op census
and the sync census for a short window after the first (warm-up) step, so that their cost stays out of the rest of the
job. `--steps N` ends every probe after step N.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from gputriage.collectors.windows import PROBE_STEPS, TIMING


def active_probes(step: int, steps_limit: int | None) -> frozenset[str]:
    """The probes that should be on while step `step` runs."""
    if steps_limit is not None and step >= steps_limit:
        return frozenset()
    on = {TIMING}
    on.update(name for name, steps in PROBE_STEPS.items() if step in steps)
    return frozenset(on)


class Switch(msgspec.Struct):
    start: Callable[[], None]
    stop: Callable[[], None]


class WindowDriver:
    """Applies the table at each step boundary: starts what turns on, stops what turns off."""

    def __init__(self, switches: dict[str, Switch], steps_limit: int | None) -> None:
        self._switches = switches
        self._steps_limit = steps_limit
        self._on: frozenset[str] = frozenset()

    @property
    def on(self) -> frozenset[str]:
        return self._on

    def enter_step(self, step: int) -> None:
        self._apply(active_probes(step, self._steps_limit))

    def turn_off(self, name: str) -> None:
        """Stop one probe now; the next step that wants it starts it again."""
        if name in self._on:
            self._apply(self._on - {name})

    def stop_all(self) -> None:
        self._apply(frozenset())

    def _apply(self, wanted: frozenset[str]) -> None:
        for name in sorted(self._on - wanted):
            if name in self._switches:
                self._switches[name].stop()
        for name in sorted(wanted - self._on):
            if name in self._switches:
                self._switches[name].start()
        self._on = wanted
