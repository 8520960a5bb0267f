"""The JSON contract's fixed field lists (DESIGN.md "Machine-readable contract"), written out once for the tests.

Spelled out here rather than read from the code, so a renamed field fails a test instead of following silently.
"""

from __future__ import annotations

# The `trace` section: one entry per rank with these fields (null where the trace cannot give one).
TRACE_RANK_FIELDS = (
    "rank",
    "device",
    "steps",
    "window_us",
    "busy_pct",
    "idle_pct",
    "compute_pct",
    "non_compute_pct",
    "idle_breakdown",
    "step_time_us",
    "busy_pct_of_steps",
    "dataloader_pct_of_step",
)
IDLE_BREAKDOWN_FIELDS = ("host_wait_pct", "kernel_wait_pct", "other_pct")
