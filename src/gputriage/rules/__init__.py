"""Rules: pure functions of the Run record. Importing this package registers every rule module.

The modules are imported in causal order, which is the tie-break between findings of the same severity and rung
(see registry.py): rung 1 first (a broken install explains everything above it), then placement, compute, the input
pipeline, the GPU's state, traces and the distributed view. A test keeps this order.
"""

from __future__ import annotations

# isort: off
from gputriage.rules import env, apple, placement, compute, stand_in, steps, gpu, trace, distributed  # noqa: F401

# isort: on
from gputriage.rules.registry import Rule, evaluate, job_rule, job_rules, registered, rule

CAUSAL_ORDER = ("env", "apple", "placement", "compute", "stand_in", "steps", "gpu", "trace", "distributed")

__all__ = ["CAUSAL_ORDER", "Rule", "evaluate", "job_rule", "job_rules", "registered", "rule"]
