"""The scenario scripts of tests/scripts, written for CUDA, with the root cause each must get.

One table for the three places that run them: under `--preflight` here (test_run_preflight.py), on meta
(test_run_cli.py pins TRIAGE_DEVICE=meta), and on a real GPU (`make gpu-check`, bench/gpu_check.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Scenario:
    name: str
    argv: list[str]  # after `gputriage run OPTIONS`, relative to tests/scripts
    root_cause: str | None  # None: healthy (no warning or critical finding of its own)
    # codes a real GPU may add on such a small job (NVML sees a mostly idle GPU): allowed next to the root cause
    gpu_acceptable: frozenset[str] = field(default_factory=frozenset)
    exit_code: int = 0


_SMALL_JOB_ON_A_GPU = frozenset({"low-gpu-utilization", "launch-bound", "pageable-memcpy"})

SCENARIOS = [
    Scenario("nothing_moved", ["nothing_moved.py", "3"], "data-on-cpu", exit_code=3),
    Scenario("model_not_moved", ["model_not_moved.py"], "model-on-cpu", exit_code=1),
    Scenario("inputs_not_moved", ["inputs_not_moved.py"], "data-on-cpu", exit_code=1),
    Scenario("labels_not_moved", ["labels_not_moved.py"], "data-on-cpu", exit_code=1),
    Scenario("submodule_after_to", ["submodule_after_to.py"], "model-partly-on-cpu", exit_code=1),
    Scenario("plain_tensor_attribute", ["plain_tensor_attribute.py"], "model-partly-on-cpu", exit_code=1),
    Scenario("slow_pipeline", ["slow_pipeline.py"], "input-pipeline-bound", _SMALL_JOB_ON_A_GPU),
    Scenario("healthy", ["healthy.py", "--epochs", "3"], None, _SMALL_JOB_ON_A_GPU),
    Scenario("item_each_step", ["item_each_step.py", "cuda"], "host-sync-in-loop", _SMALL_JOB_ON_A_GPU),
    Scenario("unrelated_crash", ["unrelated_crash.py"], None, _SMALL_JOB_ON_A_GPU, exit_code=1),
]
BY_NAME = {s.name: s for s in SCENARIOS}
