"""The extension point of `gputriage run`: observers that watch the user's job and fill the Run record."""

from __future__ import annotations

from typing import Protocol

from gputriage.record import Run


class Observer(Protocol):
    """Something that watches the user's job: a hook set, a sampler thread, a profiler window.

    `start` runs before the user's code; `finish` runs once after it ends (normally, by exception, sys.exit or a
    signal) and fills this observer's section of the Run record. Neither may raise into the user's job.
    """

    def start(self, run: Run) -> None: ...

    def finish(self, run: Run) -> None: ...
