"""`torch.compile` during a preflight returns a module wrapped as torch.compile wraps it, run eagerly on the stand-in,
and a function as it is.

Compiling traces the stand-in's tensor subclass and generates kernels for a GPU that is not there; a preflight judges
where tensors live and which ops run where, which compilation does not change. The report says the model ran eagerly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from gputriage.collectors.patching import Patches


def install(patches: Patches, on_compile: Callable[[], None]) -> None:
    def compile(model: Any = None, **options: Any) -> Any:  # named as torch.compile is
        on_compile()
        if model is None:  # @torch.compile(mode=...) used as a decorator factory
            return _eager
        return _eager(model)

    def _eager(model: Any) -> Any:
        return _as_compiled(model) if isinstance(model, torch.nn.Module) else model

    patches.set(torch, "compile", compile)


def _as_compiled(model: torch.nn.Module) -> Any:
    """What torch.compile returns for a module, an OptimizedModule (`_orig_mod`, its state_dict's `_orig_mod.` keys,
    which scripts read and save), but one that runs the module eagerly: its context disables compilation."""
    try:
        from torch._dynamo.eval_frame import DisableContext, OptimizedModule

        return OptimizedModule(model, DisableContext())
    except Exception:  # a torch without these internals: the module itself, as before
        return model
