"""Bring the ladder into the tools people train with: Lightning, Hugging Face `Trainer`, Jupyter.

Each integration is an optional extra (`pip install gputriage[lightning]`, `[hf]`, `[notebook]`) and is imported only
by name (`from gputriage.integrations.lightning import TriageCallback`), so `import gputriage` never imports a
framework. They record with `gputriage.session()` and report with the same renderers as `gputriage run`.
"""

from __future__ import annotations

import importlib
from typing import Any

_SUBMODULES = ("lightning", "hf", "notebook")


def __getattr__(name: str) -> Any:
    # `gputriage.integrations.lightning` works without importing it first; the framework is imported only then.
    if name in _SUBMODULES:
        return importlib.import_module(f"gputriage.integrations.{name}")
    raise AttributeError(f"module 'gputriage.integrations' has no attribute {name!r}")
