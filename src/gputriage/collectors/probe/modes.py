"""Take a torch mode of ours off its stack, wherever it is in it.

The probes push a torch function mode (placement) and a dispatch mode (the op census) for a few steps. The user's
code may push its own on top meanwhile and keep it (`torch.set_default_device`, a long `with` block): taking ours
out must leave theirs in place and in order, or our mode would stay in the job for good.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils import _python_dispatch


def leave_function_mode(mode: Any) -> None:
    """Take `mode` off the torch function mode stack; the modes above it stay, in their order."""
    _remove(mode, torch._C._len_torch_function_stack, torch._C._pop_torch_function_stack, _push_function)


def leave_dispatch_mode(mode: _python_dispatch.TorchDispatchMode) -> None:
    """Take `mode` off the dispatch mode stack, restoring torch's "is a mode on" flags through its own `__exit__`."""
    _remove(mode, torch._C._len_torch_dispatch_stack, torch._C._pop_torch_dispatch_stack, _push_dispatch)


def _push_function(mode: Any) -> None:
    torch._C._push_on_torch_function_stack(mode)


def _push_dispatch(mode: Any) -> None:
    torch._C._push_on_torch_dispatch_stack(mode)


def _remove(target: Any, length: Any, pop: Any, push: Any) -> None:
    above: list[Any] = []
    try:
        for _ in range(length()):
            top = pop()
            if top is target:
                break
            above.append(top)
        else:
            return  # not on the stack (taken off by the user's code): nothing to do
        exit_flags = getattr(target, "old_dispatch_mode_flags", None)
        if exit_flags:
            # A dispatch mode keeps torch's module-level "in a mode" flags; its __exit__ restores them and pops the
            # top of the stack, so put it back on top for that one call.
            push(target)
            target.__exit__(None, None, None)
    finally:
        for other in reversed(above):
            push(other)
