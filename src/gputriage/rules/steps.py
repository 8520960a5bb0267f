"""Rung 5, input side: the step waits for the DataLoader.

Fired only from measured wait, never from the loader's settings alone, and only on enough evidence:
- the data-wait share is `record/numbers.py`'s (total wait / total wall time over the steps after warm-up), the same
  number the step table and the sequence diagram show;
- it is at least WAIT_SHARE_WARN_PCT (20%, what small trace tools flag; the TensorBoard plugin flags 5%, which on a
  fast GPU step is often noise), critical from WAIT_SHARE_CRIT_PCT;
- AND the mean wait per step is at least MIN_WAIT_PER_STEP_S. On `meta` (and on very fast steps) the compute costs
  next to nothing, so any collation looks like a large share; 2 ms per batch is real time on any device;
- a warning or critical needs MIN_STEADY_STEPS steps after warm-up AND a 90% bootstrap interval of the share lying
  wholly above the threshold plus RUN_TO_RUN_NOISE_PCT. The bootstrap sees the noise between the steps of one run;
  runs of the same job differ more than that (the machine's load): a job with one worker on two cores sits at
  20% +- 2 from run to run (tests/scripts/loader_one_worker.py: 18% to 25% over ten runs, each with an interval about
  +-2 wide), and one run in four would cross a bare 20%. The margin is 2.5 times that spread, so a job at the
  threshold stays below it in about 99 runs of 100. Without it the finding is "borderline" (info) and says its
  interval and step count.
On a preflight's stand-in device the numbers are the host's (record/numbers.py leaves the stand-in's own compute
out). A preflight judges only a loader without workers: workers share this machine's cores with the stand-in's
compute, which the GPU machine does not do, so their wait here says nothing about theirs there.
"""

from __future__ import annotations

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.device import judged_device
from gputriage.record.numbers import Interval, bootstrap_share_pct, pct_text, step_numbers
from gputriage.record.steps import LoaderInfo, steady_steps
from gputriage.rules import edits
from gputriage.rules.registry import rule

WAIT_SHARE_WARN_PCT = 20.0
WAIT_SHARE_CRIT_PCT = 50.0
MIN_WAIT_PER_STEP_S = 0.002
RUN_TO_RUN_NOISE_PCT = 5.0
# Fewer steps than this after warm-up say too little about a pipeline that prefetches a few batches ahead.
MIN_STEADY_STEPS = 5
MAX_SUGGESTED_WORKERS = 8


def _severity(interval: Interval, steps: int) -> Severity:
    if steps < MIN_STEADY_STEPS or interval.low < WAIT_SHARE_WARN_PCT + RUN_TO_RUN_NOISE_PCT:
        return Severity.INFO
    return Severity.CRITICAL if interval.low >= WAIT_SHARE_CRIT_PCT else Severity.WARNING


@rule
def input_pipeline_bound(run: Run) -> list[Finding]:
    if run.steps is None:
        return []
    loader = run.steps.loader or LoaderInfo()
    if run.stand_in is not None and run.stand_in.preflight and (loader.num_workers or 0) > 0:
        return []
    numbers = step_numbers(run.steps.steps)
    if numbers is None:
        return []
    wait = numbers.part("data_wait")
    if wait.share_pct < WAIT_SHARE_WARN_PCT or wait.time_s < MIN_WAIT_PER_STEP_S:
        return []
    interval = bootstrap_share_pct(steady_steps(run.steps.steps), ("data_wait_s",))
    severity = _severity(interval, numbers.window.count)
    evidence: dict[str, object] = {
        "data_wait_pct_of_step": wait.share_pct,
        "data_wait_pct_interval_90": [interval.low, interval.high],
        "data_wait_s_per_step": round(wait.time_s, 6),
        "step_s": round(numbers.step_time_s, 6),
        "steps_measured": numbers.window.count,
        "steps_window": numbers.window.describe(),
        "num_workers": loader.num_workers,
        "pin_memory": loader.pin_memory,
        "persistent_workers": loader.persistent_workers,
        "batch_size": loader.batch_size,
        "dataset": loader.dataset_class,
        "iterable_dataset": loader.is_iterable_dataset,
        "cpu_count": run.steps.cpu_count,
    }
    hot = loader_hot_line(run)
    if hot is not None:
        evidence["loader_hot_line"] = hot
    wanted = loader_arguments(loader, run.steps.cpu_count, judged_device(run))
    evidence.update(edits.evidence_of(edits.loader_edits(run.source, loader.where, wanted)))
    share = pct_text(wait.share_pct)
    if severity is Severity.INFO:
        title = (
            f"Borderline: the step may wait for the DataLoader {share} of the time "
            f"(90% interval {interval.text()}, {numbers.window.count} steps; not clearly over "
            f"{WAIT_SHARE_WARN_PCT:.0f}% once run-to-run noise is allowed for)"
        )
    else:
        title = f"The step waits for the DataLoader {share} of the time ({numbers.window.count} steps)"
    return [
        Finding(
            code="input-pipeline-bound",
            rung=5,
            severity=severity,
            title=title,
            evidence=evidence,
            fix=loader_fix(loader, run.steps.cpu_count, judged_device(run)),
            where=loader.where,
        )
    ]


def loader_hot_line(run: Run) -> str | None:
    """With num_workers=0 the dataset runs in the training thread: the stack sampler names the line of the user's
    code where the wait goes ("train.py:65 (YelpReviews.__getitem__), 81% of the wait")."""
    sampler = run.sampler
    wait_s = sampler.phase_s.get("data_wait", 0.0) if sampler is not None else 0.0
    if sampler is None or wait_s <= 0:
        return None
    inside = [line for line in sampler.lines if line.phase_s.get("data_wait", 0.0) >= 0.9 * line.time_s]
    hottest = max(inside, key=lambda line: (round(line.self_s, 4), line.depth), default=None)
    if hottest is None or hottest.self_s < 0.2 * wait_s:
        return None
    return f"{hottest.where} ({hottest.function}), {pct_text(100.0 * hottest.self_s / wait_s)} of the wait"


def suggested_workers(cpu_count: int | None) -> int:
    """One core stays with the training loop; more than 8 workers rarely helps one GPU."""
    return max(1, min((cpu_count or 2) - 1, MAX_SUGGESTED_WORKERS))


def loader_arguments(loader: LoaderInfo, cpu_count: int | None, expected: str | None) -> dict[str, str]:
    """The DataLoader keywords the fix sets, as code: what `loader_fix` writes and the patch edits."""
    workers = suggested_workers(cpu_count)
    wanted = {}
    if (loader.num_workers or 0) < workers:
        wanted["num_workers"] = str(workers)
        wanted["persistent_workers"] = "True"
    if expected == "cuda" and not loader.pin_memory:
        wanted["pin_memory"] = "True"
    return wanted


def loader_fix(loader: LoaderInfo, cpu_count: int | None, expected: str | None) -> str:
    workers = suggested_workers(cpu_count)
    current = loader.num_workers or 0
    args = [f"batch_size={loader.batch_size}" if loader.batch_size else "batch_size=...", "shuffle=..."]
    args += [f"{key}={value}" for key, value in loader_arguments(loader, cpu_count, expected).items()]
    lines = []
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
