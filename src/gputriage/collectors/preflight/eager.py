"""`torch.compile` during a preflight returns the model (or function) as it is, run eagerly on the stand-in.

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
            return lambda fn: fn
        return model

    patches.set(torch, "compile", compile)
