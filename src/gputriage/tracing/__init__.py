"""PyTorch profiler (Kineto) traces -> the `trace` section of the Run record. No torch needed.

`analyse_trace(path)` reads one trace file into a RankTrace (the contract fields plus the evidence the trace rules
read); `analyse_paths(paths)` does files and folders of per-rank traces, in parallel processes, and compares the
ranks. Both raise InputError with one clear line for anything that is not a readable trace.
"""

from __future__ import annotations

from typing import Any

__all__ = ["analyse_paths", "analyse_trace"]


def __getattr__(name: str) -> Any:
    if name == "analyse_paths":
        from gputriage.tracing.multirank import analyse_paths

        return analyse_paths
    if name == "analyse_trace":
        from gputriage.tracing.summary import analyse_trace

        return analyse_trace
    raise AttributeError(name)
