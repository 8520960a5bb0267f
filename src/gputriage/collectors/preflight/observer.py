"""The seam into `gputriage run`: observers that put the stand-in in place for the job, and take it away after.

`Preflight` simulates CUDA for a script written for it; `MetaStandIn` lets a script written for `meta` read its
tensors. Both only patch torch's own modules and classes (restored in `finish`, on every way the job can end) and push
one mode on the job's thread; nothing is attached to the user's objects.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

import torch

from gputriage.collectors.patching import Patches
from gputriage.collectors.preflight import autocast, cpp_devices, cuda_api, eager, loading, mode_cost, parallel
from gputriage.collectors.preflight.checks import is_host_read
from gputriage.collectors.preflight.placeholders import MetaHostReads, placeholder_sites
from gputriage.collectors.preflight.redirect import CudaRedirect, is_pinned, pin_memory, record_stream
from gputriage.collectors.preflight.state import STATE, Backing
from gputriage.collectors.runner import StopRun
from gputriage.collectors.stack_sampler import FIRST_SAMPLED_STEP
from gputriage.record import Run
from gputriage.record.stand_in import PlaceholderSite, StandInSection, preflight_section
from gputriage.wording import counted

# With `min_steps`: the job ends at the first step boundary past min_steps once the steps the stack sampler samples
# (after warm-up and the op census) have lasted this long: it then has a few hundred samples (see commands/run.py).
MIN_WINDOW_S = 1.0


class StepSource(Protocol):
    """What the preflight needs from the run probe: the step counter, the sync recorder, the step clock."""

    step_listeners: list[Any]
    steps_section: Any  # the record's steps, as the probe cut them

    @property
    def state(self) -> Any: ...

    def record_host_sync(self, kind: str, device: str) -> None: ...


class Preflight:
    """Observer: the job sees a CUDA device, backed by the CPU (or meta); it is ended after `stop_after_steps`."""

    def __init__(
        self,
        probe: StepSource,
        stop_after_steps: int | None,
        backing: Backing = Backing.CPU,
        min_steps: int | None = None,
    ) -> None:
        self._probe = probe
        self._stop_after_steps = stop_after_steps
        self._backing = backing
        self._patches = Patches()
        self._mode: CudaRedirect | None = None
        self._stopped_at: int | None = None
        self._compiled_eagerly = False
        self._min_steps = min_steps  # end early, after this many steps, once they lasted MIN_WINDOW_S
        self._sampled_s = 0.0  # the walls of the steps the stack sampler sampled, as the record has them

    def start(self, run: Run) -> None:
        STATE.reset(self._backing, device_count=1)
        STATE.mode_call_s = mode_cost.per_call_s(CudaRedirect)
        STATE.mode_calls = 0  # the measurement's own calls are not the job's
        try:
            cuda_api.install(self._patches)
            autocast.install(self._patches)
            parallel.install(self._patches)
            loading.install(self._patches)
            cpp_devices.install(self._patches)
            eager.install(self._patches, self._on_compile)
            # pinning happens in the DataLoader's pin-memory thread too, where the mode below does not reach
            self._patches.set(torch.Tensor, "pin_memory", pin_memory)
            self._patches.set(torch.Tensor, "is_pinned", is_pinned)
            self._patches.set(torch.Tensor, "record_stream", record_stream)
            mode = CudaRedirect()
            mode.__enter__()  # type: ignore[no-untyped-call]  # torch leaves the modes untyped
            self._mode = mode
        except BaseException:
            self._patches.restore()
            raise
        STATE.sync_listeners.append(self._on_host_sync)
        self._probe.step_listeners.append(self._on_step)
        self._probe.state.stand_in_clock = _stand_in_seconds
        self._probe.state.stand_in_host_read = is_host_read

    def finish(self, run: Run) -> None:
        self._take_down()
        run.stand_in = preflight_section(
            self._backing.value,
            device_name=cuda_api.DEVICE_NAME,
            device_count=STATE.device_count,
            stopped_after_steps=self._stopped_at,
            compiled_eagerly=self._compiled_eagerly,
            stand_in_s=round(STATE.spent_s(), 6),
            mode_calls=STATE.mode_calls,
            mode_call_us=round(1e6 * STATE.mode_call_s, 3),
            placeholder_reads=_sites(),
        )

    def _take_down(self) -> None:
        if self._mode is not None:
            with contextlib.suppress(Exception):  # the job may have left a mode of its own above ours
                self._mode.__exit__(None, None, None)  # type: ignore[no-untyped-call]
            self._mode = None
        self._patches.restore()
        STATE.sync_listeners.clear()
        with contextlib.suppress(ValueError):
            self._probe.step_listeners.remove(self._on_step)
        self._probe.state.stand_in_clock = None
        self._probe.state.stand_in_host_read = None

    def _on_step(self, step: int) -> None:
        # `step` steps have closed. The window is the sum of the sampled steps' walls in the record, not a clock of
        # its own: the sampler starts at FIRST_SAMPLED_STEP, in a listener that may run before this one, and a clock
        # read here would start late by that and let the steps in the record run past the second.
        steps = self._probe.steps_section.steps
        if step > FIRST_SAMPLED_STEP and steps:
            self._sampled_s += steps[-1].wall_s
        at_most = self._stop_after_steps is not None and step >= self._stop_after_steps
        if at_most or self._long_enough(step):
            self._stopped_at = step
            raise StopRun(f"the preflight ends the job after {counted(step, 'step')}")

    def _long_enough(self, step: int) -> bool:
        return self._min_steps is not None and step >= self._min_steps and self._sampled_s >= MIN_WINDOW_S

    def _on_compile(self) -> None:
        self._compiled_eagerly = True

    def _on_host_sync(self, kind: str) -> None:
        self._probe.record_host_sync(kind, "cuda")


class MetaStandIn:
    """Observer for `--expect-device meta`: host reads of meta tensors return placeholders instead of raising."""

    def __init__(self) -> None:
        self._mode: MetaHostReads | None = None

    def start(self, run: Run) -> None:
        STATE.reset(Backing.META, device_count=0)
        mode = MetaHostReads()  # type: ignore[no-untyped-call]
        mode.__enter__()  # type: ignore[no-untyped-call]
        self._mode = mode

    def finish(self, run: Run) -> None:
        if self._mode is not None:
            with contextlib.suppress(Exception):
                self._mode.__exit__(None, None, None)  # type: ignore[no-untyped-call]
            self._mode = None
        run.stand_in = StandInSection(preflight=False, backing="meta", placeholder_reads=_sites())


def _stand_in_seconds() -> float:
    return STATE.spent_s()


def _sites() -> list[PlaceholderSite]:
    return [PlaceholderSite(r.kind, r.where, r.code, r.count) for r in placeholder_sites()]
