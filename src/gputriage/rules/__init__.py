"""Rules: pure functions of the Run record. Importing this package registers every rule module, in causal order.

Rung 1 first (a broken install explains everything above it), then placement, compute, the GPU's state, traces and
the distributed view.
"""

from __future__ import annotations

from gputriage.rules import (  # noqa: F401  (registers rules)
    compute,
    distributed,
    env,
    gpu,
    placement,
    stand_in,
    steps,
    trace,
)
from gputriage.rules.registry import Rule, evaluate, registered, rule

__all__ = ["Rule", "evaluate", "registered", "rule"]
