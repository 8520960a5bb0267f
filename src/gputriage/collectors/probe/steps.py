"""Step detection and step-phase timing.

A step ends at the optimizer's step post-hook (the first optimizer that steps drives the count, so a GAN's two
optimizers do not double it), unless each DataLoader batch holds several of its steps (a WGAN's five critic steps
per batch): then a step is one batch, the whole iteration of the loop, so that what the loop does once per batch (a
loss read on the host, the generator's update) falls inside every step. A loop with no optimizer (inference) cuts a
step at each DataLoader batch too; a loop with neither (a hand-written update, `p.data.add_(p.grad, alpha=-lr)`, over
tensors it slices itself), and no optimizer at all, cuts one at each backward after the first.
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable
from typing import Any

import msgspec
import torch
from torch.optim import optimizer as optimizer_mod
from torch.utils.hooks import RemovableHandle

from gputriage.collectors.patching import Patches, quiet_hook
from gputriage.collectors.probe.clock import StepTimes
from gputriage.collectors.probe.state import ProbeState, capturing
from gputriage.record.steps import Step, StepsSection

OPTIMIZER = "optimizer"
DATALOADER = "dataloader"
BACKWARD = "backward"


class StepTracker:
    """Turns phase-clock cuts into Step records and tells the window driver when a new step begins."""

    def __init__(
        self,
        state: ProbeState,
        section: StepsSection,
        on_step: Callable[[int], None],
        on_rebase: Callable[[], None] = lambda: None,
    ) -> None:
        self._state = state
        self.section = section
        self._on_step = on_step
        self._on_rebase = on_rebase  # the count went back: what was measured on the old count's steps is void
        self._t0_s = state.clock.now()
        self._driver: weakref.ref[Any] | None = None
        self._hooks: list[RemovableHandle] = []
        self._stand_in_at_cut_s = 0.0
        self._backward_seen = False
        self._optimizer_seen: bool | None = None
        self._model_work = False  # a model's forward or a backward ran in the open step
        self._optimizer_made = False  # the job made an optimizer while it was watched (not one left from before)
        self._patches = Patches()
        self._wait_stand_in_s = 0.0  # the stand-in's compute inside the open step's data wait
        self._stepping: Any = None  # the optimizer whose step our global post-hook is inside (see stop)
        # The training batch now open (see _decide_unit): its iterator's id, the index its first step will get, and how
        # many steps the driver made since it began. None until a batch begins, and after the unit is decided.
        self._batch: _OpenBatch | None = None
        self._unit_decided = False

    def start(self) -> None:
        self._hooks.append(quiet_hook(optimizer_mod.register_optimizer_step_pre_hook, self._opt_pre))
        self._hooks.append(quiet_hook(optimizer_mod.register_optimizer_step_post_hook, self._opt_post))
        self._patches.wrap(optimizer_mod.Optimizer, "__init__", self._optimizer_init)

    def stop(self) -> None:
        """The end of the window (or of the job): the hooks come off, nothing of the tracker stays on the steps.

        The window ends inside the optimizer's post-hook, while torch iterates the dict of global post-hooks: taking
        an entry out of it there ends the job's own `opt.step()` with "OrderedDict mutated during iteration" once the
        job registered a global post-hook of its own (after ours). That entry is made a no-op in place (a value
        replaced is no mutation of the dict's order), and taken out by a one-shot hook on the optimizer itself, which
        torch calls after the global ones in the same step; being the last of that dict, it takes itself out too.
        """
        for handle in self._hooks:
            hooks = handle.hooks_dict_ref()
            if (
                self._stepping is not None
                and hooks is optimizer_mod._global_optimizer_post_hooks
                and handle.id in hooks
            ):
                hooks[handle.id] = _no_op
                _remove_after_the_global_hooks(self._stepping, handle)
            else:
                handle.remove()
        self._hooks.clear()
        self._patches.restore()

    def _optimizer_init(self, original: Any, opt: Any, /, *args: Any, **kwargs: Any) -> None:
        original(opt, *args, **kwargs)
        self._optimizer_made = True

    # -- signals from the probes -------------------------------------------------------------------------------------

    def activity(self) -> None:
        """Something of a step happened (a batch, a forward, a backward): open the first step if none is open."""
        if not self._state.clock.running and not self._state.in_child:
            self._state.clock.begin()
            self._stand_in_since_cut()  # the stand-in's work before this step is not the step's

    def stand_in_in_wait(self, seconds: float) -> None:
        """The stand-in computed inside a DataLoader wait (the batch is built on the device)."""
        if self._state.clock.running:
            self._wait_stand_in_s += seconds

    def model_work(self) -> None:
        """A model's forward or a backward: the open step holds a step's work."""
        self._model_work = True
        self.activity()

    def batch_start(self, iterator: int) -> None:
        """A DataLoader batch cuts a step (before an optimizer drives the count) only after the model worked on the
        last one: a batch taken to look at (`sample = next(iter(loader))`) is not a step. Nor is a batch of an
        evaluation that a training job runs under no_grad before its first optimizer step (llama2.c's estimate_loss
        at iteration 0): counted as steps, it ended the preflight inside the evaluation and put its reads in the
        census. `iterator`: the id() of the DataLoader iterator the batch comes from."""
        evaluating = self._evaluating()
        if not evaluating and not self._unit_decided:
            self._decide_unit(iterator)
        cuts = self.section.step_source != OPTIMIZER and self._state.clock.running and self._model_work
        if cuts and not evaluating:
            self._close_step(keep_running=True, source=DATALOADER)
        self.activity()
        if not evaluating and not self._unit_decided:
            self._batch = _OpenBatch(iterator, len(self.section.steps))  # the open step is the batch's first

    def _decide_unit(self, iterator: int) -> None:
        """At the first training batch that follows one where the driver stepped: is a step an optimizer step or a
        batch? Several optimizer steps between two batches of one iterator (not an evaluation loop's batches before
        the training resumes: their iterator is another) make the batch the unit. The steps counted so far in that
        batch fold into the open one, which this batch then cuts, and the count is re-based on batches."""
        batch, self._batch = self._batch, None
        if batch is None or batch.iterator != iterator or batch.driver_steps < 1:
            return
        self._unit_decided = True
        if batch.driver_steps >= 2 and self.section.step_source == OPTIMIZER:
            self._fold_steps_since(batch.first_step)
            self.section.optimizer_steps_per_batch = batch.driver_steps
            self.section.step_source = DATALOADER
            self._on_rebase()

    def _evaluating(self) -> bool:
        """Under no_grad in a job that made an optimizer: an evaluation, not an inference job (an optimizer left from
        before the session, in a notebook or a test process, does not make the job a training one)."""
        return self._optimizer_made and not torch.is_grad_enabled()

    def backward_start(self) -> None:
        """A backward begins. With no optimizer and no DataLoader to cut steps, each backward after the first starts a
        new step: the step is then backward, update and the next forward, one iteration's work all the same. An
        optimizer's first step folds these steps into one, as it folds DataLoader steps (gradient accumulation)."""
        if self._state.in_child:
            return
        cuts = self._backward_seen and self.section.step_source in (None, BACKWARD) and self._state.clock.running
        if cuts and not self._an_optimizer_exists():
            self._close_step(keep_running=True, source=BACKWARD)
        self._backward_seen = True

    def _an_optimizer_exists(self) -> bool:
        """Whether the job made an optimizer (looked up once, at the second backward, in the warm-up step): with one,
        backwards are micro-steps of gradient accumulation (nanoGPT's default is 40 per optimizer step), and the
        optimizer's step cuts the steps."""
        if self._optimizer_seen is None:
            # By type, never isinstance: isinstance falls back to an object's own __class__, which a deprecated
            # object (torch.distributed.reduce_op) answers with a FutureWarning the job never printed.
            cls = optimizer_mod.Optimizer
            self._optimizer_seen = self._optimizer_made or any(issubclass(type(o), cls) for o in gc.get_objects())
        return self._optimizer_seen

    def loader_exhausted(self) -> None:
        """The loop ran out of batches: the step opened by this last `__next__` holds no work, so it is dropped."""
        self._batch = None  # what the loop does next is not within a batch of this iterator
        if self.section.step_source != OPTIMIZER and self._state.clock.running:
            self._state.clock.cut(keep_running=False)

    def _opt_pre(self, opt: Any, args: Any, kwargs: Any) -> None:
        if not capturing() and self._is_driver(opt) and not self._state.in_child:
            self.activity()
            self._state.clock.push("optimizer")

    def _opt_post(self, opt: Any, args: Any, kwargs: Any) -> None:
        if capturing() or not self._is_driver(opt) or self._state.in_child:
            return
        self._state.clock.pop()
        if self._batch is not None:
            self._batch.driver_steps += 1
        if self.section.optimizer_steps_per_batch is not None:
            return  # the batch is the step: its next batch cuts it
        if self.section.step_source != OPTIMIZER:
            self._merge_loader_steps()
        self._stepping = opt
        try:
            self._close_step(keep_running=True, source=OPTIMIZER)
        finally:
            self._stepping = None

    def _is_driver(self, opt: Any) -> bool:
        """The first optimizer that steps drives the count, until it is gone: a script that trains again with a new
        optimizer (`opt = torch.optim.SGD(...)` for a second loop) counts that loop's steps."""
        if self._driver is None or self._driver() is None:
            self._driver = weakref.ref(opt)
            return True
        return self._driver() is opt

    # -- steps ---------------------------------------------------------------------------------------------------

    def _close_step(self, *, keep_running: bool, source: str) -> None:
        times = self._state.clock.cut(keep_running=keep_running)
        if times is None:
            return
        self._model_work = False
        self.section.step_source = source
        self.section.steps.append(self._step_from(times))
        self.section.steps_observed = len(self.section.steps)
        self.section.steps_total = (self.section.steps_total or 0) + 1
        self._state.step += 1
        self._on_step(self._state.step)

    def _merge_loader_steps(self) -> None:
        """Gradient accumulation: batches cut before the first optimizer step belong to that one step."""
        if self.section.steps:
            self._fold_steps_since(0)
            self._on_rebase()

    def _fold_steps_since(self, first_index: int) -> None:
        """The steps cut from `first_index` on belong to the open step: it is extended back to the start of the first
        of them, and their phases are folded into it; the count goes back to `first_index`."""
        earlier = self.section.steps[first_index:]
        if not earlier:
            return
        self._state.clock.absorb(
            earlier[0].start_s + self._t0_s,
            [_phases_of(s) for s in earlier],
            [s.stand_in_phases_s or {} for s in earlier],
        )
        self._stand_in_at_cut_s -= sum(s.stand_in_s or 0.0 for s in earlier)
        self._wait_stand_in_s += sum(s.wait_stand_in_s or 0.0 for s in earlier)
        del self.section.steps[first_index:]
        self.section.steps_total = (self.section.steps_total or 0) - len(earlier)
        self._state.step -= len(earlier)

    def _stand_in_since_cut(self) -> float | None:
        if self._state.stand_in_clock is None:
            return None
        now_s = self._state.stand_in_clock()
        spent_s, self._stand_in_at_cut_s = now_s - self._stand_in_at_cut_s, now_s
        return spent_s

    def _step_from(self, times: StepTimes) -> Step:
        p = times.phases_s
        return Step(
            index=len(self.section.steps),
            start_s=times.start_s - self._t0_s,
            wall_s=times.wall_s,
            data_wait_s=p["data_wait"],
            h2d_s=p["h2d"],
            forward_s=p["forward"],
            sync_s=p["sync"],
            backward_s=p["backward"],
            optimizer_s=p["optimizer"],
            other_s=p["other"],
            stand_in_s=self._stand_in_since_cut(),
            wait_stand_in_s=self._wait_stand_in_taken(),
            stand_in_phases_s=_rounded(times.stand_in_phases_s),
        )

    def _wait_stand_in_taken(self) -> float | None:
        if self._state.stand_in_clock is None:
            return None
        spent_s, self._wait_stand_in_s = self._wait_stand_in_s, 0.0
        return spent_s


class _OpenBatch(msgspec.Struct):
    iterator: int  # id() of the DataLoader iterator it came from
    first_step: int  # the index its first step gets
    driver_steps: int = 0  # the driver optimizer's steps since it began


def _no_op(*_args: Any) -> None:
    """What our global optimizer post-hook becomes when the window ends inside it (see StepTracker.stop)."""


def _remove_after_the_global_hooks(opt: Any, global_handle: RemovableHandle) -> None:
    own: list[RemovableHandle] = []

    def remove(*_args: Any) -> None:
        global_handle.remove()
        for handle in own:
            handle.remove()

    own.append(quiet_hook(opt.register_step_post_hook, remove))


def _rounded(phases_s: dict[str, float] | None) -> dict[str, float] | None:
    return {k: round(v, 9) for k, v in phases_s.items()} if phases_s is not None else None


def _phases_of(step: Step) -> dict[str, float]:
    return {
        "data_wait": step.data_wait_s,
        "h2d": step.h2d_s,
        "forward": step.forward_s,
        "sync": step.sync_s,
        "backward": step.backward_s,
        "optimizer": step.optimizer_s,
        "other": step.other_s,
    }
