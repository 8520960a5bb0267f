"""The run probe: the hooks that watch the user's training job from inside its process.

`RunProbe` is an Observer (see gputriage.collectors.observer). It wires the pieces together and lets the transition
table in `window.py` decide which of them are on at each step:

- always, for the observed steps: step detection, DataLoader wait, h2d / forward / backward / optimizer / sync timing;
- the first steps: placement (global forward pre-hooks, functional losses, where modules and tensors were made);
- a short window after warm-up: the op census and the host-sync census.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle

from gputriage.collectors.patching import Patches
from gputriage.collectors.probe.census import MixedDeviceMode, MixedDevices, OpCensus
from gputriage.collectors.probe.clock import PhaseClock
from gputriage.collectors.probe.loader import LoaderProbe
from gputriage.collectors.probe.placement import PlacementProbe
from gputriage.collectors.probe.state import ProbeState
from gputriage.collectors.probe.steps import StepTracker
from gputriage.collectors.probe.syncs import CudaSyncDebug, SyncRecorder, TensorTimers
from gputriage.collectors.probe.window import CENSUS, MIXED, PLACEMENT, TIMING, Switch, WindowDriver
from gputriage.collectors.usercode import traceback_user_where
from gputriage.record import Run
from gputriage.record.compute import ComputeSection
from gputriage.record.placement import PlacementSection
from gputriage.record.steps import Step, StepsSection

__all__ = ["RunProbe", "usable_cpu_count"]


class RunProbe:
    """Observer for rungs 2-5 on the user's own process."""

    def __init__(self, expected_device: str, steps_limit: int | None = None, clock: PhaseClock | None = None) -> None:
        self.state = ProbeState(expected_device=expected_device, clock=clock or PhaseClock())
        self.placement_section = PlacementSection()
        self.steps_section = StepsSection(cpu_count=usable_cpu_count())
        self._syncs = SyncRecorder(self.state)
        self._census: OpCensus | None = None
        self._mixed = MixedDevices(self.state)
        self._mixed_mode: MixedDeviceMode | None = None
        self._census_steps: list[int] = []
        self._cuda_debug = CudaSyncDebug(self._syncs)
        self._cuda_debug_used = False
        self._loader = LoaderProbe(self.state)
        self._placement = PlacementProbe(self.state, self.placement_section)
        self._timers = TensorTimers(self.state, self._syncs)
        self._tracker = StepTracker(self.state, self.steps_section, self._on_step)
        self._autograd = Patches()
        self._forward_hooks: list[RemovableHandle] = []
        self._open_forwards: dict[int, int] = {}
        self._finished = False
        # Other observers that follow the step counter (`run --trace`'s profiler window); called with each new step.
        self.step_listeners: list[Callable[[int], None]] = []
        self._driver = WindowDriver(
            {
                TIMING: Switch(self._start_timing, self._stop_timing),
                PLACEMENT: Switch(self._placement.start_hooks, self._placement.stop),
                CENSUS: Switch(self._start_census, self._stop_census),
                MIXED: Switch(self._start_mixed, self._stop_mixed),
            },
            steps_limit,
        )
        self._loader.on_batch_start = self._tracker.batch_start
        self._loader.on_exhausted = self._tracker.loader_exhausted
        self._placement.on_new_model = self._time_model

    # -- Observer ------------------------------------------------------------------------------------------------------

    def start(self, run: Run) -> None:
        self._placement.start_sites()
        self._tracker.start()
        self._driver.enter_step(0)

    def finish(self, run: Run) -> None:
        if self._finished:
            return
        self._finished = True
        self._driver.stop_all()
        self._placement.stop()
        self._tracker.stop()
        self.steps_section.loader = self._loader.busiest()
        run.placement = self.placement_section
        # no completed step (a crash in the first one): rung 5's step timing has nothing to say
        run.steps = self.steps_section if self.steps_section.steps else None
        run.compute = self._compute_section()

    def record_host_sync(self, kind: str, device: str) -> None:
        """A host sync that only a stand-in device sees (`torch.cuda.synchronize()` under a preflight)."""
        if self._syncs.recording and not self.state.in_child and not self.state.in_sync_call:
            self._syncs.record(kind, device, 0.0)

    def explain_crash(self, exc: BaseException) -> tuple[str | None, str | None]:
        """(file:line in the user's code, the nn.Module whose forward was running) for a crash."""
        self._placement.rescan_models()  # a mask cached inside the forward that crashed exists only now
        where = traceback_user_where(exc.__traceback__)
        module = None
        tb = exc.__traceback__
        while tb is not None:
            candidate = tb.tb_frame.f_locals.get("self")
            if isinstance(candidate, nn.Module) and tb.tb_frame.f_code.co_name == "forward":
                module = candidate
            tb = tb.tb_next
        return where, self._placement.describe_module(module) if module is not None else None

    # -- window switches ---------------------------------------------------------------------------------------------

    def _on_step(self, step: int) -> None:
        self._driver.enter_step(step)
        for listener in self.step_listeners:
            listener(step)

    def _start_timing(self) -> None:
        self._loader.start()
        self._timers.start()
        self._autograd.set(torch.autograd, "backward", self._wrap_backward(torch.autograd.backward))

    def _stop_timing(self) -> None:
        self._tracker.recording = False
        self._loader.stop()
        self._timers.stop()
        self._autograd.restore()
        for handle in self._forward_hooks:
            handle.remove()
        self._forward_hooks.clear()

    def _start_census(self) -> None:
        self._census_steps.append(self.state.step)
        self._syncs.recording = True
        if self.state.expected_device == "cuda":
            self._cuda_debug_used = self._cuda_debug.start() or self._cuda_debug_used
        census = OpCensus(self.state, self._syncs, self._mixed)
        try:
            census.__enter__()  # type: ignore[no-untyped-call]
        except Exception:
            return
        self._census = census

    def _stop_census(self) -> None:
        self._census_steps.append(self.state.step)
        self._syncs.recording = False
        self._cuda_debug.stop()
        if self._census is not None:
            # the user's own mode may be on top of ours; then leave the stack alone
            with contextlib.suppress(Exception):
                self._census.__exit__(None, None, None)  # type: ignore[no-untyped-call]

    def _start_mixed(self) -> None:
        mode = MixedDeviceMode(self._mixed)
        try:
            mode.__enter__()  # type: ignore[no-untyped-call]
        except Exception:
            return
        self._mixed_mode = mode

    def _stop_mixed(self) -> None:
        if self._mixed_mode is not None:
            with contextlib.suppress(Exception):  # the user's own mode may be on top of ours
                self._mixed_mode.__exit__(None, None, None)  # type: ignore[no-untyped-call]
            self._mixed_mode = None

    def _compute_section(self) -> ComputeSection | None:
        if self._census is None or len(self._census_steps) < 2:
            # no complete census window (a crash at step 0): rung 4 is not measured, but a CPU tensor that met the
            # device's tensors at step 0 is still evidence
            mixed = self._mixed.found()
            return ComputeSection(mixed_device_ops=mixed) if mixed else None
        first, last = self._census_steps[0], self._census_steps[1]
        covered = [s for s in self.steps_section.steps if first <= s.index < last]
        section = ComputeSection(
            window_steps=len(covered),
            window_wall_s=sum(s.wall_s for s in covered),
            window_stand_in_s=_stand_in_sum(covered),
            syncs=list(self._syncs.by_site.values()),
            sync_debug_mode=self._cuda_debug_used,
        )
        self._census.fill(section)
        return section if section.window_steps > 0 else None

    # -- forward and backward timing ---------------------------------------------------------------------------------

    def _time_model(self, model: nn.Module) -> None:
        """A new top-level model: time its forwards from now on (this first call was entered by the global hook)."""
        key = id(model)
        self._tracker.activity()
        self.state.clock.push("forward")
        self._open_forwards[key] = 1
        self._forward_hooks.append(model.register_forward_pre_hook(self._forward_pre, with_kwargs=True))
        self._forward_hooks.append(model.register_forward_hook(self._forward_post, always_call=True))

    def _forward_pre(self, model: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if self.state.in_child or self.state.in_loader:
            return
        self._tracker.activity()
        self.state.clock.push("forward")
        self._open_forwards[id(model)] = self._open_forwards.get(id(model), 0) + 1

    def _forward_post(self, model: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        key = id(model)
        if self._open_forwards.get(key, 0) > 0:
            self._open_forwards[key] -= 1
            self.state.clock.pop()

    def _wrap_backward(self, orig: Any) -> Any:
        state = self.state
        tracker = self._tracker

        @functools.wraps(orig)
        def backward(*args: Any, **kwargs: Any) -> Any:
            if state.in_child:
                return orig(*args, **kwargs)
            tracker.activity()
            state.clock.push("backward")
            try:
                return orig(*args, **kwargs)
            finally:
                state.clock.pop()

        return backward


def _stand_in_sum(steps: list[Step]) -> float | None:
    spent = [s.stand_in_s for s in steps if s.stand_in_s is not None]
    return sum(spent) if spent else None


def usable_cpu_count() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()
