"""Rung 4: the computation runs on the expected device, and the step does not block on it.

Thresholds (documented here, calibrated so that they hold on `meta`, where device ops cost only dispatch time):
- no-gpu-compute: the census window saw ops, and none of them on the expected device.
- cpu-compute-in-step: CPU ops (0-d scalar bookkeeping and DataLoader collation excluded) take at least
  CPU_SHARE_MIN_PCT of the window's wall time AND at least CPU_TIME_MIN_PER_STEP_S per step. The absolute floor keeps
  a few cheap CPU ops from looking large next to a device whose ops cost nothing to the host. On a preflight's
  stand-in device the window's time is the host's (ComputeSection.window_host_s): its own compute is left out.
- host-sync-in-loop: a line syncs at least once per step on average, or syncs cost SYNC_SHARE_MIN_PCT of the step.
  When every such read is issued inside a library the user's line calls (transformers' BERT reads a mask in an `if`
  on every forward), it is a note (info), pointing at the library's line: there is nothing to change on the user's.
"""

from __future__ import annotations

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.compute import ComputeSection
from gputriage.record.device import judged_device
from gputriage.rules.registry import rule

CPU_SHARE_MIN_PCT = 20.0
CPU_TIME_MIN_PER_STEP_S = 0.001
SYNCS_PER_STEP_MIN = 1.0
SYNC_SHARE_MIN_PCT = 5.0


def _judged(run: Run) -> tuple[ComputeSection, str] | None:
    expected = judged_device(run)
    if run.compute is None or expected in (None, "cpu") or run.compute.window_steps <= 0:
        return None
    return run.compute, expected


@rule
def no_gpu_compute(run: Run) -> list[Finding]:
    judged = _judged(run)
    if judged is None:
        return []
    compute, expected = judged
    total_ops = sum(compute.ops_per_device.values())
    if total_ops == 0 or compute.ops_per_device.get(expected, 0) > 0:
        return []
    top = compute.top_cpu_ops[0] if compute.top_cpu_ops else None
    return [
        Finding(
            code="no-gpu-compute",
            rung=4,
            severity=Severity.CRITICAL,
            title=f"The {compute.window_steps} probed steps ran {total_ops} ops, none of them on {expected}",
            evidence={
                "ops_per_device": dict(compute.ops_per_device),
                "op_time_s_per_device": {k: round(v, 6) for k, v in compute.op_time_s_per_device.items()},
                "window_steps": compute.window_steps,
                "expected_device": expected,
            },
            fix=f'device = torch.device("{expected}")\nmodel = model.to(device)\nx, y = x.to(device), y.to(device)',
            where=top.where if top else None,
        )
    ]


@rule
def cpu_compute_in_step(run: Run) -> list[Finding]:
    judged = _judged(run)
    if judged is None:
        return []
    compute, expected = judged
    host_s = compute.window_host_s()
    if compute.ops_per_device.get(expected, 0) == 0 or host_s <= 0:
        return []  # nothing on the device at all is no-gpu-compute's case
    cpu_s = compute.op_time_s_per_device.get("cpu", 0.0)
    share_pct = 100.0 * cpu_s / host_s
    per_step_s = cpu_s / compute.window_steps
    if share_pct < CPU_SHARE_MIN_PCT or per_step_s < CPU_TIME_MIN_PER_STEP_S:
        return []
    top = compute.top_cpu_ops[:5]
    return [
        Finding(
            code="cpu-compute-in-step",
            rung=4,
            severity=Severity.WARNING,
            title=f"{share_pct:.0f}% of the step's time is spent in ops on the CPU",
            evidence={
                "cpu_op_pct_of_step": round(share_pct, 2),
                "cpu_op_time_per_step_s": round(per_step_s, 6),
                "cpu_ops": [f"{s.name} ×{s.count} {s.time_s * 1e3:.2f} ms at {s.where}" for s in top],
                "window_steps": compute.window_steps,
            },
            fix=f'# create these tensors on the device, or move them once before the loop:\nt = t.to("{expected}")',
            where=top[0].where if top else None,
        )
    ]


USER_SYNC_FIX = (
    "# keep running values on the device and read them rarely:\n"
    "running_loss += loss.detach()\n"
    "if step % 100 == 0:\n"
    "    print(running_loss.item() / 100); running_loss.zero_()"
)
LIBRARY_SYNC_FIX = (
    "# the library reads a device value on the host inside the call your line makes (an `if` on a tensor);\n"
    "# nothing to change on your line: it costs one wait per call, which matters only for very short steps"
)


@rule
def host_sync_in_loop(run: Run) -> list[Finding]:
    judged = _judged(run)
    if judged is None:
        return []
    compute, _ = judged
    steps = compute.window_steps
    sync_s = sum(s.time_s for s in compute.syncs)
    share_pct = 100.0 * sync_s / compute.window_wall_s if compute.window_wall_s > 0 else 0.0
    hot = [s for s in compute.syncs if s.count / steps >= SYNCS_PER_STEP_MIN]
    if not hot and share_pct < SYNC_SHARE_MIN_PCT:
        return []
    sites = sorted(compute.syncs, key=lambda s: (-s.count, -s.time_s))
    first = sites[0]
    in_library = share_pct < SYNC_SHARE_MIN_PCT and all(s.library_where is not None for s in hot)
    title = f"The step waits for the device {sum(s.count for s in sites) / steps:.1f} times per step"
    if in_library:
        title += f", read inside library code ({hot[0].library_where})"
    return [
        Finding(
            code="host-sync-in-loop",
            rung=4,
            severity=Severity.INFO if in_library else Severity.WARNING,
            title=title,
            evidence={
                "syncs_per_step": round(sum(s.count for s in sites) / steps, 2),
                "sync_time_per_step_s": round(sync_s / steps, 6),
                "sync_pct_of_step": round(share_pct, 2),
                "sites": [f"{s.kind} ×{s.count / steps:.1f}/step at {s.where}: {s.code}" for s in sites[:6]],
            },
            fix=LIBRARY_SYNC_FIX if in_library else USER_SYNC_FIX,
            where=hot[0].library_where if in_library else first.where,
        )
    ]
