"""Every nn.Module call, seen through one process-wide wrapper of `nn.Module.__call__` for the probe window.

Nothing is registered on the user's modules: a hook there is part of the module (pickle, `copy.deepcopy` and
`torch.save` carry it, `model._forward_hooks` lists it). torch's global forward hooks would do, but they take every
module call off torch's fast path, and `torch.compile(model)` warns about them on stderr. A wrapper of the class
attribute does neither. While a graph is captured (torch.compile, torch.jit.trace) the wrapper steps aside without
leaving a trace in the graph (see `state.capturing`).

The outermost call on the training loop's thread is the step's forward (a model, or a loss module). Calls inside it
pass straight through, except that while placement watches, loss modules at any depth are shown to it too.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from typing import Any

from torch import nn

from gputriage.collectors.patching import Patches, hide_own_frames
from gputriage.collectors.probe.state import ProbeState, capturing

_Loss = nn.modules.loss._Loss
# (module, args, kwargs, outermost) -> whether to time this call as the step's forward (outermost calls only)
CallListener = Callable[[nn.Module, tuple[Any, ...], dict[str, Any], bool], bool]


class ModuleCalls:
    """Installs the `nn.Module.__call__` wrapper; `listener` sees the outermost calls (and, while `watch_inner`,
    the loss modules called inside them)."""

    def __init__(self, state: ProbeState, listener: CallListener) -> None:
        self._state = state
        self._listener = listener
        self._patches = Patches()
        self._outer_running = False
        self.watch_inner = False

    def start(self) -> None:
        if self._patches:
            return
        original = nn.Module.__call__
        patches = self._patches
        call = self._call

        # A function of its own, whose first argument is the module, named `self`: torch.profiler's stack tracer
        # recognises module calls by the code object of `nn.Module.__call__` and reads the module from that argument.
        def __call__(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
            # capturing() first: a constant while Dynamo traces, so nothing of ours below is read in the trace; a
            # read of the probe's state there became a guard, and its change a second compile of the user's model
            if capturing() or not patches.active:
                return original(self, *args, **kwargs)
            try:
                return call(original, self, *args, **kwargs)
            except BaseException as exc:
                hide_own_frames(exc)
                raise  # a bare raise adds no frame of ours back

        functools.update_wrapper(__call__, original)
        patches.set(nn.Module, "__call__", __call__)

    def stop(self) -> None:
        self._patches.restore()
        self._outer_running = False

    def _call(self, original: Any, module: nn.Module, /, *args: Any, **kwargs: Any) -> Any:
        state = self._state
        if (
            self._outer_running
            or state.in_loader
            or capturing()
            or threading.get_ident() != state.owner_thread
            or state.in_child
        ):
            if self.watch_inner and self._outer_running and isinstance(module, _Loss):
                return self._loss_inside(original, module, args, kwargs)
            return original(module, *args, **kwargs)
        timed = self._listener(module, args, kwargs, True)
        loss = self.watch_inner and isinstance(module, _Loss)
        self._outer_running = True
        state.in_loss += loss
        if timed:
            state.clock.push("forward")
        try:
            return original(module, *args, **kwargs)
        finally:
            self._outer_running = False
            state.in_loss -= loss
            if timed:
                state.clock.pop()

    def _loss_inside(self, original: Any, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        state = self._state
        if threading.get_ident() == state.owner_thread and not state.in_child and not capturing():
            self._listener(module, args, kwargs, False)
        state.in_loss += 1
        try:
            return original(module, *args, **kwargs)
        finally:
            state.in_loss -= 1
