"""Which probe is on at which step, and the first step the `--trace` profiler window may record: torch-free, so that
`run --trace` checks its options before the job starts without importing torch (the job's own OMP_NUM_THREADS, set
before its `import torch`, was ignored: the job got 2 threads for 1)."""

from __future__ import annotations

PLACEMENT = "placement"
CENSUS = "census"
TIMING = "timing"
MIXED = "mixed-devices"

# probe -> the steps (0-based) it is on for. Step 0 pays for lazy initialisation (cuDNN autotuning, allocator
# warm-up), so the census starts at step 1; three steps are enough to see every op of a static loop. Step 0 still
# gets a look at the tensors of each op (a CPU tensor meeting the device's, `census.MixedDevices`): a script that dies
# at step 0 on the meta stand-in (`.item()`) would otherwise hide the forward that CUDA refuses.
PROBE_STEPS: dict[str, range] = {
    PLACEMENT: range(0, 2),
    MIXED: range(0, 1),
    CENSUS: range(1, 4),
}


def first_traced_step() -> int:
    """The first step after every probe window (collectors/profiler_window.py): step 4 with today's table."""
    return max(steps.stop for steps in PROBE_STEPS.values())
