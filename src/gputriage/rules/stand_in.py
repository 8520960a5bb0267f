"""Notes about a run on a stand-in device: where the script read values that a meta tensor does not hold.

On meta (`--expect-device meta`, or `run --preflight --preflight-backing meta`) a host read (`.item()`, `bool()`,
`.tolist()`, `.cpu()`) returns a deterministic placeholder (1, or False for booleans) so the script goes on. Control
flow that depends on such a value (an early stop, a NaN check, a `while` on a mask) may take another path than on a
real device, so the report names each line that read one.
"""

from __future__ import annotations

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.rules.registry import rule

MAX_SITES_SHOWN = 6


@rule
def placeholder_values(run: Run) -> list[Finding]:
    stand_in = run.stand_in
    if stand_in is None or not stand_in.placeholder_reads:
        return []
    sites = stand_in.placeholder_reads
    reads = sum(s.count for s in sites)
    first = sites[0]
    return [
        Finding(
            code="placeholder-values",
            rung=4,
            severity=Severity.INFO,
            title=f"{reads} host reads of meta tensors got placeholder values; what the script did with them may "
            f"differ from a real run (first at {first.where})",
            evidence={
                "reads": reads,
                "placeholder": "1 for numbers, False for booleans",
                "sites": [f"{s.kind} ×{s.count} at {s.where}: {s.code}" for s in sites[:MAX_SITES_SHOWN]],
            },
            fix="# to run on real values without a GPU: gputriage run --preflight script.py  (the stand-in computes "
            "on the CPU)",
            where=first.where,
        )
    ]
