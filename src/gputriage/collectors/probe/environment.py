"""Rung 1 inside `run`: the environment probe, run once the job has ended so it neither delays the job's start nor
touches CUDA state before the user's code does."""

from __future__ import annotations

from gputriage.record import Run


class EnvironmentObserver:
    def __init__(self, expect_device: str | None) -> None:
        self.expect_device = expect_device

    def start(self, run: Run) -> None:
        return None

    def finish(self, run: Run) -> None:
        # In-process: torch is imported already (the import is paid) and a child interpreter would cost seconds.
        from gputriage.collectors.env_probe import probe_environment  # at the end: not on the job's start-up path

        run.environment = probe_environment(self.expect_device, in_process=True)
