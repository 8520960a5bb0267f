"""Rung 5, input side: the step waits for the DataLoader.

Fired only from measured wait, never from the loader's settings alone. Thresholds:
- the share of step time spent in DataLoader.__next__ is at least WAIT_SHARE_WARN_PCT (20%, what small trace tools
  flag; the TensorBoard plugin flags 5%, which on a fast GPU step is often noise), critical from WAIT_SHARE_CRIT_PCT.
  On a preflight's stand-in device the step time is the host's (Step.host_s): the stand-in computes on the CPU what
  a GPU runs asynchronously, so the wall time would bury the wait under compute that the GPU machine will not pay.
  A preflight judges only a loader without workers: workers share this machine's cores with the stand-in's compute,
  which the GPU machine does not do, so their wait here says nothing about theirs there;
- AND the median wait per step is at least MIN_WAIT_PER_STEP_S. On `meta` (and on very fast steps) the compute costs
  next to nothing, so any collation looks like a large share; 2 ms per batch is real time on any device.
The first step is left out: it pays for worker start-up and lazy initialisation.
"""

from __future__ import annotations

import statistics

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.device import judged_device
from gputriage.record.steps import LoaderInfo, steady_steps
from gputriage.rules.registry import rule

WAIT_SHARE_WARN_PCT = 20.0
WAIT_SHARE_CRIT_PCT = 50.0
MIN_WAIT_PER_STEP_S = 0.002
MAX_SUGGESTED_WORKERS = 8


@rule
def input_pipeline_bound(run: Run) -> list[Finding]:
    if run.steps is None or not run.steps.steps:
        return []
    loader = run.steps.loader or LoaderInfo()
    if run.stand_in is not None and run.stand_in.preflight and (loader.num_workers or 0) > 0:
        return []
    steps = steady_steps(run.steps.steps)
    wall_s = sum(s.host_s() for s in steps)
    if wall_s <= 0:
        return []
    share_pct = 100.0 * sum(s.data_wait_s for s in steps) / wall_s
    median_wait_s = statistics.median(s.data_wait_s for s in steps)
    if share_pct < WAIT_SHARE_WARN_PCT or median_wait_s < MIN_WAIT_PER_STEP_S:
        return []
    evidence: dict[str, object] = {
        "data_wait_pct_of_step": round(share_pct, 2),
        "median_data_wait_s": round(median_wait_s, 6),
        "median_step_s": round(statistics.median(s.host_s() for s in steps), 6),
        "steps_measured": len(steps),
        "num_workers": loader.num_workers,
        "pin_memory": loader.pin_memory,
        "persistent_workers": loader.persistent_workers,
        "batch_size": loader.batch_size,
        "dataset": loader.dataset_class,
        "iterable_dataset": loader.is_iterable_dataset,
        "cpu_count": run.steps.cpu_count,
    }
    severity = Severity.CRITICAL if share_pct >= WAIT_SHARE_CRIT_PCT else Severity.WARNING
    return [
        Finding(
            code="input-pipeline-bound",
            rung=5,
            severity=severity,
            title=f"The step waits for the DataLoader {share_pct:.0f}% of the time",
            evidence=evidence,
            fix=loader_fix(loader, run.steps.cpu_count, judged_device(run)),
            where=loader.where,
        )
    ]


def suggested_workers(cpu_count: int | None) -> int:
    """One core stays with the training loop; more than 8 workers rarely helps one GPU."""
    return max(1, min((cpu_count or 2) - 1, MAX_SUGGESTED_WORKERS))


def loader_fix(loader: LoaderInfo, cpu_count: int | None, expected: str | None) -> str:
    workers = suggested_workers(cpu_count)
    current = loader.num_workers or 0
    args = [f"batch_size={loader.batch_size}" if loader.batch_size else "batch_size=...", "shuffle=..."]
    lines = []
    if current < workers:
        args.append(f"num_workers={workers}")
        args.append("persistent_workers=True")
    if expected == "cuda" and not loader.pin_memory:
        args.append("pin_memory=True")
    if len(args) > 2:
        lines.append(f"loader = DataLoader({loader.dataset_class or 'dataset'}(...), {', '.join(args)})")
    if current >= workers:
        lines.append(
            f"# all {current} workers are busy on {cpu_count or '?'} cores: make __getitem__ cheaper "
            "(decode once, cache, smaller images)"
        )
    if loader.has_transform or current >= workers:
        lines.append(
            "# move the augmentation out of __getitem__ and run it on the batch on the device, after .to(device)"
        )
    if expected == "cuda":
        lines.append("x = x.to(device, non_blocking=True)  # with pin_memory=True the copy overlaps compute")
    return "\n".join(lines)
