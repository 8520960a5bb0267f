"""The `run` observer that records the job's GPUs through NVML for the whole run (rung 5, live)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from gputriage.hardware.nvml import open_nvml
from gputriage.hardware.sampler import GpuSampler, JobSpec
from gputriage.record import Run
from gputriage.record.gpu import GpuSection


class GpuSamplerObserver:
    """Starts the NVML sampler thread before the user's code and puts its `gpu` section into the record at the end.

    The job is this process, its children (DataLoader workers) and, under torchrun, its sibling ranks, told apart by
    PID. Neither `start` nor `finish` raises: a broken NVML becomes `gpu.unavailable_reason`.
    """

    def __init__(
        self,
        *,
        interval_s: float = 0.2,
        process_interval_s: float = 1.0,
        lib: Any | None = None,
        clock: Callable[[], float] = time.time,
        environ: Mapping[str, str] | None = None,
        pid: int | None = None,
    ) -> None:
        self.interval_s = interval_s
        self.process_interval_s = process_interval_s
        self.lib = lib
        self.clock = clock
        self.environ = os.environ if environ is None else environ
        self.pid = os.getpid() if pid is None else pid
        self.sampler: GpuSampler | None = None
        self._stack = contextlib.ExitStack()
        self._error: str | None = None

    def start(self, run: Run) -> None:
        try:
            session = self._stack.enter_context(open_nvml(self.lib))
            under_torchrun = "RANK" in self.environ or "LOCAL_RANK" in self.environ
            self.sampler = GpuSampler(
                session,
                interval_s=self.interval_s,
                process_interval_s=self.process_interval_s,
                clock=self.clock,
                job=JobSpec(root_pid=self.pid, with_ranks=under_torchrun),
                cuda_visible_devices=self.environ.get("CUDA_VISIBLE_DEVICES"),
                device_order=self.environ.get("CUDA_DEVICE_ORDER"),
            )
            self.sampler.start()
        except Exception as exc:  # the observer must never take the user's job down
            self._error = f"the NVML sampler could not start: {type(exc).__name__}: {exc}"

    def finish(self, run: Run) -> None:
        try:
            if self.sampler is None:
                run.gpu = GpuSection(available=False, unavailable_reason=self._error or "the sampler did not start")
                return
            self.sampler.stop()
            run.gpu = self.sampler.section()
        except Exception as exc:
            run.gpu = GpuSection(available=False, unavailable_reason=f"the NVML sampler failed: {exc}")
        finally:
            with contextlib.suppress(Exception):
                self._stack.close()
