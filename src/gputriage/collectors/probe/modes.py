"""Take a dispatch mode of ours off torch's mode stack, wherever it is in it.

The op census pushes a dispatch mode for a few steps. The user's code may push its own on top meanwhile and keep it:
taking ours out must leave theirs in place and in order, or our mode would stay in the job for good.
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode


def enter_dispatch_mode(mode: TorchDispatchMode) -> bool:
    """Push `mode`; False where torch refuses it (then the probe it serves is simply off)."""
    try:
        mode.__enter__()  # type: ignore[no-untyped-call]  # torch leaves the modes untyped
    except Exception:
        return False
    return True


def leave_dispatch_mode(mode: TorchDispatchMode) -> None:
    """Take `mode` off the dispatch mode stack; the modes above it stay, in their order. Its own `__exit__` does the
    popping, so torch's module-level "a mode is on" flags are restored as usual."""
    above: list[Any] = []
    try:
        for _ in range(torch._C._len_torch_dispatch_stack()):
            top = torch._C._pop_torch_dispatch_stack(None)
            if top is mode:
                break
            above.append(top)
        else:
            return  # not on the stack (the user's code took it off): nothing to do
        torch._C._push_on_torch_dispatch_stack(mode)  # back on top for its own __exit__, which pops the top
        mode.__exit__(None, None, None)
    finally:
        for other in reversed(above):
            torch._C._push_on_torch_dispatch_stack(other)
