"""The run probe: what watches the user's training job from inside its process.

`RunProbe` is an Observer (see gputriage.collectors.observer). It wires the pieces together and lets the transition
table in `window.py` decide which of them are on at each step:

- for the observed steps (the probe window, `--steps N`): step detection, DataLoader wait, h2d / forward / backward /
  optimizer / sync timing;
- the first steps: placement (module calls, functional losses, where modules and tensors were made);
- a short window after warm-up: the op census and the host-sync census.

Nothing is attached to the user's objects: the probes observe through wrappers of torch's own classes and functions,
torch's process-wide optimizer hooks and modes, and keep what they learn in their own maps keyed weakly by identity.
When the window ends every one of them is taken out, so the rest of the job runs exactly as it would without
gputriage; `finish()` takes out whatever is still in (the job ended inside the window), on every way a job ends.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from gputriage.collectors.identity import IdentityMap
from gputriage.collectors.patching import Patches, remove_at_exit
from gputriage.collectors.probe.calls import ModuleCalls
from gputriage.collectors.probe.census import MixedDeviceMode, MixedDevices, OpCensus
from gputriage.collectors.probe.clock import PhaseClock
from gputriage.collectors.probe.debugenv import CudnnFlags, LaunchBlocking
from gputriage.collectors.probe.loader import LoaderProbe
from gputriage.collectors.probe.modes import enter_dispatch_mode, leave_dispatch_mode, release_deferred
from gputriage.collectors.probe.placement import PlacementProbe, has_tensors
from gputriage.collectors.probe.state import ProbeState, capturing, device_type_of, host_operand, own_reads
from gputriage.collectors.probe.steps import StepTracker
from gputriage.collectors.probe.syncs import CudaSyncDebug, SyncRecorder, TensorTimers
from gputriage.collectors.probe.window import Switch, WindowDriver
from gputriage.collectors.usercode import traceback_user_where
from gputriage.collectors.warnplace import WarningPlaces
from gputriage.collectors.windows import CENSUS, MIXED, PLACEMENT, TIMING
from gputriage.record import Run
from gputriage.record.compute import ComputeSection
from gputriage.record.placement import PlacementSection
from gputriage.record.steps import Step, StepsSection, steady_steps

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
        self._mixed_pending = False  # step 0's mixed-device look is due, and waits for the loop (_in_the_loop)
        self._census_steps: list[int] = []
        self._cuda_debug = CudaSyncDebug(self._syncs)
        self._cuda_debug_used = False
        self._launch_blocking = LaunchBlocking()
        self._loader = LoaderProbe(self.state)
        self._placement = PlacementProbe(self.state, self.placement_section)
        self._timers = TensorTimers(self.state, self._syncs)
        self._tracker = StepTracker(self.state, self.steps_section, self._on_step, self._on_rebase)
        self._calls = ModuleCalls(self.state, self._on_module_call)
        self._autograd = Patches()
        self._warnings = WarningPlaces()
        self._timed_modules: IdentityMap[nn.Module, bool] = IdentityMap()
        self._finished = False
        self.window_ended = False
        # Other observers that follow the step counter (`run --trace`'s profiler window); called with each new step.
        self.step_listeners: list[Callable[[int], None]] = []
        # Called once when the probe window ends before the job does (every probe is out by then): the distributed
        # observer takes its wrappers out too, and `run` flushes a partial record.
        self.window_end_listeners: list[Callable[[], None]] = []
        self._driver = WindowDriver(
            {
                TIMING: Switch(self._start_timing, self._stop_timing),
                PLACEMENT: Switch(self._start_placement, self._stop_placement),
                CENSUS: Switch(self._start_census, self._stop_census),
                MIXED: Switch(self._start_mixed, self._stop_mixed),
            },
            steps_limit,
        )
        self._loader.on_batch_start = self._batch_start
        self._loader.on_exhausted = self._tracker.loader_exhausted
        self._loader.on_wait_stand_in = self._tracker.stand_in_in_wait

    # -- Observer ------------------------------------------------------------------------------------------------------

    def start(self, run: Run) -> None:
        self._warnings.start()
        self._placement.start_sites()
        self._tracker.start()
        self._driver.enter_step(0)
        remove_at_exit(self._remove_everything)

    def finish(self, run: Run) -> None:
        if self._finished:
            return
        self._finished = True
        self._remove_everything()
        self.steps_section.loader = self._loader.busiest()
        # the steps every step number rests on (the warm-up step 0 left out): the evaluation's share is of their time
        recorded = {step.index for step in steady_steps(self.steps_section.steps)}
        self.steps_section.eval_loader = self._loader.busiest_evaluation(recorded)
        self.placement_section.batch_tensors = self._loader.last_batch_tensors
        run.placement = self.placement_section
        # no completed step (a crash in the first one): rung 5's step timing has nothing to say
        run.steps = self.steps_section if self.steps_section.steps else None
        run.compute = self._compute_section()

    def snapshot(self, run: Run) -> None:
        """Fill `run` with what the probes hold now, without stopping them (the partial record)."""
        self.placement_section.batch_tensors = self._loader.last_batch_tensors
        run.placement = self.placement_section
        run.steps = self.steps_section if self.steps_section.steps else None
        run.compute = self._compute_section()

    def record_host_sync(self, kind: str, device: str) -> None:
        """A host sync that only a stand-in device sees (`torch.cuda.synchronize()` under a preflight)."""
        if self._syncs.recording and not self.state.in_child and not self.state.in_sync_call:
            self._syncs.record(kind, device, 0.0)

    def explain_crash(self, exc: BaseException) -> tuple[str | None, str | None]:
        """(file:line in the user's code, the nn.Module whose forward was running) for a crash."""
        where = traceback_user_where(exc.__traceback__)
        module = None
        tb = exc.__traceback__
        while tb is not None:
            candidate = tb.tb_frame.f_locals.get("self")
            if isinstance(candidate, nn.Module) and tb.tb_frame.f_code.co_name == "forward":
                module = candidate
            tb = tb.tb_next
        # a mask cached inside the forward that crashed exists only now; the module that crashed surely ran
        if module is not None:
            self._placement.adopt_owner(module)
        self._placement.rescan_models(ran=module)
        self._placement.note_unmoved()
        host = host_operand()
        if host is not None and isinstance(exc, (RuntimeError, IndexError)):  # CUDA's device checks raise these
            self._placement.explain_operand(*host, exc.__traceback__)
        return where, self._placement.describe_module(module) if module is not None else None

    def _remove_everything(self) -> None:
        """Every wrapper, hook and mode out, whatever the window's state (idempotent)."""
        self._driver.stop_all()
        release_deferred()
        self._placement.stop()
        self._tracker.stop()
        self._warnings.stop()

    # -- window switches ---------------------------------------------------------------------------------------------

    def _on_step(self, step: int) -> None:
        self._driver.enter_step(step)
        for listener in self.step_listeners:
            listener(step)
        if not self._driver.on and not self.window_ended:
            self._end_window()

    def _on_rebase(self) -> None:
        """The step count went back (micro-batches folded into one optimizer step, optimizer steps into one batch): what
        the census saw was counted on the old count's steps, so it is dropped, and the census starts again at the new
        count's step 1. (The placement and mixed-device looks keep what they saw: any step shows where things are.)"""
        self._driver.turn_off(CENSUS)
        self._census_steps.clear()
        self._census = None
        self._syncs.forget()

    def _end_window(self) -> None:
        self.window_ended = True
        self._remove_everything()
        for listener in self.window_end_listeners:
            with contextlib.suppress(Exception):  # a listener must never break the user's step
                listener()

    def _start_timing(self) -> None:
        self._loader.start()
        self._timers.start()
        self._calls.start()
        self._autograd.wrap(torch.autograd, "backward", self._backward)

    def _stop_timing(self) -> None:
        self._loader.stop()
        self._timers.stop()
        self._calls.stop()
        self._autograd.restore()
        self._tracker.stop()

    def _start_placement(self) -> None:
        self._placement.start_watching()
        self._calls.watch_inner = True

    def _stop_placement(self) -> None:
        self._calls.watch_inner = False
        self._placement.stop()

    def _start_census(self) -> None:
        self._census_steps.append(self.state.step)
        self._syncs.recording = True
        if self.state.expected_device == "cuda":
            self._cuda_debug_used = self._cuda_debug.start() or self._cuda_debug_used
        census = OpCensus(self.state, self._syncs, self._mixed)
        if enter_dispatch_mode(census):
            self._census = census

    def _stop_census(self) -> None:
        self._census_steps.append(self.state.step)
        self._syncs.recording = False
        self._cuda_debug.stop()
        if self._census is not None:
            with contextlib.suppress(Exception):
                leave_dispatch_mode(self._census)

    def _start_mixed(self) -> None:
        """Due now, entered at the loop's first batch, module call or backward: in the loop's context. Entered at the
        probe's start (right after `import torch`), outside the `with torch.inference_mode():` an evaluation loop runs
        in, it was taken out inside the block, which cannot be done safely (modes.py: it then stays on, dormant, until
        the block ends, a Python call on every op of the loop)."""
        self._mixed_pending = True

    def _batch_start(self, iterator: int) -> None:
        self._in_the_loop()
        self._tracker.batch_start(iterator)

    def _in_the_loop(self) -> None:
        """The loop's own context (a batch, a module call, a backward): a mode left dormant inside an inference_mode
        block the job has left since comes off (modes.py), and step 0's mixed-device mode, when due, goes on."""
        release_deferred()
        if self._mixed_pending:
            self._enter_mixed()

    def _enter_mixed(self) -> None:
        self._mixed_pending = False
        mode = MixedDeviceMode(self._mixed)
        if enter_dispatch_mode(mode):
            self._mixed_mode = mode

    def _stop_mixed(self) -> None:
        self._mixed_pending = False
        if self._mixed_mode is not None:
            with contextlib.suppress(Exception):
                leave_dispatch_mode(self._mixed_mode)
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
        self._launch_blocking.fill(section)
        CudnnFlags().fill(section)
        return section if section.window_steps > 0 else None

    # -- forward and backward timing ---------------------------------------------------------------------------------

    def _on_module_call(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], outer: bool) -> bool:
        """A module call (see calls.py): shown to placement while it watches; an outermost call of a model (a module
        that holds tensors) or of a loss is the step's forward. Our reads of its tensors are unseen by the user's
        TorchFunctionMode and Tensor subclasses (`own_reads`)."""
        with own_reads():
            return self._see_module_call(module, args, kwargs, outer)

    def _see_module_call(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], outer: bool) -> bool:
        self._in_the_loop()
        if self._mixed_mode is not None and self._mixed_mode.spent:
            self._stop_mixed()  # out between two ops, never inside one (see MixedDeviceMode.spent)
        if self._calls.watch_inner:
            self._placement.see_call(module, args, kwargs, outer)
        if not outer:
            return False
        timed = self._timed_modules.get(module)
        if timed is None:
            timed = isinstance(module, nn.modules.loss._Loss) or has_tensors(module)
            self._timed_modules[module] = timed
        if timed:
            self._tracker.model_work()
        return timed

    def _backward(self, original: Any, /, *args: Any, **kwargs: Any) -> Any:
        state = self.state
        if state.in_child or capturing():
            return original(*args, **kwargs)
        self._in_the_loop()
        self._tracker.backward_start()
        self._tracker.model_work()
        state.clock.push("backward")
        outer, state.backward_on_device = state.backward_on_device, _on_a_device(args[0] if args else None)
        try:
            return original(*args, **kwargs)
        finally:
            state.backward_on_device = outer
            state.clock.pop()


def _on_a_device(roots: Any) -> bool:
    """The tensors backward starts from (one, or a sequence) are on a device, not the CPU."""
    tensors = [roots] if isinstance(roots, torch.Tensor) else list(roots) if isinstance(roots, (list, tuple)) else []
    return any(isinstance(t, torch.Tensor) and device_type_of(t) != "cpu" for t in tensors)


def _stand_in_sum(steps: list[Step]) -> float | None:
    spent = [s.stand_in_s for s in steps if s.stand_in_s is not None]
    return sum(spent) if spent else None


def usable_cpu_count() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()
