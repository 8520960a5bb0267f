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

The fix sizes num_workers from measurement, not from the core count alone: the loader's time to produce one batch
(LoaderInfo.batch_load_s, measured by the loader probe) against the step's own work per batch (the step without its
wait for data). W workers produce W batches per load time, so keeping up takes load / work of them; and when that is
more than the cores can run beside the training loop, more workers cannot help: the loading itself is CPU-bound.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.device import judged_device
from gputriage.record.steps import LoaderInfo, Step, steady_steps
from gputriage.rules.registry import rule
from gputriage.wording import counted

WAIT_SHARE_WARN_PCT = 20.0
WAIT_SHARE_CRIT_PCT = 50.0
MIN_WAIT_PER_STEP_S = 0.002
MAX_SUGGESTED_WORKERS = 8
CPU_BOUND_SHARE = 0.5  # loading that computes at least half its time is CPU work: cores, not workers, limit it


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
    sizing = size_workers(loader, steps, run.steps.cpu_count)
    if sizing is not None:
        evidence.update(
            batch_load_s=round(sizing.load_s, 6),
            batch_load_source=loader.batch_load_source,
            step_work_s=round(sizing.work_s, 6),
            workers_needed=sizing.needed,
        )
        if loader.batch_load_cpu_s is not None:
            evidence["batch_load_cpu_s"] = round(loader.batch_load_cpu_s, 6)
    severity = Severity.CRITICAL if share_pct >= WAIT_SHARE_CRIT_PCT else Severity.WARNING
    return [
        Finding(
            code="input-pipeline-bound",
            rung=5,
            severity=severity,
            title=f"The step waits for the DataLoader {share_pct:.0f}% of the time",
            evidence=evidence,
            fix=loader_fix(loader, run.steps.cpu_count, judged_device(run), sizing),
            where=loader.where,
        )
    ]


@dataclass(frozen=True)
class WorkerSizing:
    """How many workers the measured load time asks for, and how many this machine can run beside the loop."""

    load_s: float  # LoaderInfo.batch_load_s
    work_s: float  # the step's own work per batch: its time without the wait for data
    needed: int  # workers that produce a batch per work_s
    usable: int | None  # cores beside the training loop's; None: core count unknown
    cpu_share: float | None  # the loading's CPU time over its time (num_workers=0 only)

    @property
    def beyond_cores(self) -> bool:
        return self.usable is not None and self.needed > self.usable

    @property
    def waits_for_io(self) -> bool:
        """The loading mostly waits (files, network): more workers than cores still help."""
        return self.cpu_share is not None and self.cpu_share < CPU_BOUND_SHARE


def size_workers(loader: LoaderInfo, steps: list[Step], cpu_count: int | None) -> WorkerSizing | None:
    """None when the load time per batch or the step's own work is unknown."""
    if loader.batch_load_s is None or not steps or loader.batch_load_s <= 0:
        return None
    work_s = statistics.median(max(0.0, s.host_s() - s.data_wait_s) for s in steps)
    batches_per_step = max(1, round(loader.batches / len(steps))) if loader.batches else 1  # gradient accumulation
    work_s /= batches_per_step
    if work_s <= 0:
        return None
    needed = max(1, math.ceil(loader.batch_load_s / work_s))
    usable = max(1, cpu_count - 1) if cpu_count else None
    cpu_share = loader.batch_load_cpu_s / loader.batch_load_s if loader.batch_load_cpu_s is not None else None
    return WorkerSizing(loader.batch_load_s, work_s, needed, usable, cpu_share)


def suggested_workers(cpu_count: int | None, sizing: WorkerSizing | None = None) -> int:
    """From measurement when there is one: the workers needed, as many as the cores run beside the loop. Without:
    one core stays with the training loop, and more than 8 workers rarely helps one GPU."""
    if sizing is not None:
        # as many as the cores run beside the loop only when the loading is known to compute; waiting, or unknown
        # (with workers), more workers than cores may still help
        computes = sizing.cpu_share is not None and not sizing.waits_for_io
        cores = sizing.usable if computes and sizing.usable is not None else sizing.needed
        return min(sizing.needed, cores, MAX_SUGGESTED_WORKERS)
    return max(1, min((cpu_count or 2) - 1, MAX_SUGGESTED_WORKERS))


def sizing_comments(loader: LoaderInfo, sizing: WorkerSizing, cpu_count: int | None) -> list[str]:
    """The arithmetic behind the suggested num_workers, in the fix's own words."""
    current = loader.num_workers or 0
    numbers = f"each batch takes {_ms(sizing.load_s)} to load, the step's own work {_ms(sizing.work_s)}"
    if current == 0:
        lines = [f"# {numbers}: it takes {counted(sizing.needed, 'worker')} to keep up"]
    elif current < sizing.needed:
        lines = [f"# {numbers}: {counted(current, 'worker')} can't keep up, use at least {sizing.needed}"]
    else:
        lines = [f"# {numbers}: {counted(current, 'worker')} should keep up, yet the step waits for them"]
    if sizing.beyond_cores and cpu_count and sizing.usable is not None:
        lines += cores_comment(sizing, cpu_count)
    return lines


def cores_comment(sizing: WorkerSizing, cpu_count: int) -> list[str]:
    """More workers are needed than the cores run beside the loop: whether that limits loading depends on its CPU."""
    cores = counted(cpu_count, "core")
    if sizing.waits_for_io:
        return [
            f"# the loading mostly waits (its CPU time is {sizing.cpu_share or 0:.0%} of it: files, network), "
            f"so more workers than the {cores} still help"
        ]
    usable = sizing.usable or 1
    runs = f"# this machine has {cores}, so {counted(usable, 'worker')} {'is' if usable == 1 else 'are'} all it runs "
    cheaper = "cache the decoded samples or simplify the transform"
    if sizing.cpu_share is not None:
        return [
            runs + "beside the training loop;",
            f"# the loading is CPU work ({sizing.cpu_share:.0%} of its time), so it is CPU-bound: {cheaper}",
        ]
    return [runs + "beside the training loop;", f"# if the loading is CPU work, it is CPU-bound: {cheaper}"]


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.1f} ms"


def loader_fix(
    loader: LoaderInfo, cpu_count: int | None, expected: str | None, sizing: WorkerSizing | None = None
) -> str:
    workers = suggested_workers(cpu_count, sizing)
    current = loader.num_workers or 0
    args = [f"batch_size={loader.batch_size}" if loader.batch_size else "batch_size=...", "shuffle=..."]
    lines = sizing_comments(loader, sizing, cpu_count) if sizing is not None else []
    if current < workers:
        args.append(f"num_workers={workers}")
        args.append("persistent_workers=True")
    if expected == "cuda" and not loader.pin_memory:
        args.append("pin_memory=True")
    if len(args) > 2:
        lines.append(f"loader = DataLoader({loader.dataset_class or 'dataset'}(...), {', '.join(args)})")
    if current >= workers and sizing is None:
        lines.append(
            f"# {_all_workers(current)} busy on {counted(cpu_count, 'core') if cpu_count else '? cores'}: make "
            "__getitem__ cheaper (decode once, cache, smaller images)"
        )
    if loader.has_transform or current >= workers:
        lines.append(
            "# move the augmentation out of __getitem__ and run it on the batch on the device, after .to(device)"
        )
    if expected == "cuda":
        lines.append("x = x.to(device, non_blocking=True)  # with pin_memory=True the copy overlaps compute")
    return "\n".join(lines)


def _all_workers(count: int) -> str:
    return "the 1 worker is" if count == 1 else f"all {count} workers are"
