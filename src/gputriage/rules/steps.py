"""Rung 5, input side: the step waits for the DataLoader.

Fired only from measured wait, never from the loader's settings alone, and only on enough evidence:
- the data-wait share is `record/numbers.py`'s (total wait / total wall time over the steps after warm-up), the same
  number the step table and the sequence diagram show;
- it is at least WAIT_SHARE_WARN_PCT (20%, what small trace tools flag; the TensorBoard plugin flags 5%, which on a
  fast GPU step is often noise), critical from WAIT_SHARE_CRIT_PCT;
- AND the mean wait per step is at least MIN_WAIT_PER_STEP_S. On `meta` (and on very fast steps) the compute costs
  next to nothing, so any collation looks like a large share; 2 ms per batch is real time on any device;
- a warning or critical needs MIN_JUDGED_STEPS steps after warm-up AND a 90% bootstrap interval of the share lying
  wholly above the threshold plus RUN_TO_RUN_NOISE_PCT. The bootstrap sees the noise between the steps of one run;
  runs of the same job differ more than that (the machine's load): a job with one worker on two cores sits at
  20% +- 2 from run to run (tests/scripts/loader_one_worker.py: 18% to 25% over ten runs, each with an interval about
  +-2 wide), and one run in four would cross a bare 20%. The margin is 2.5 times that spread, so a job at the
  threshold stays below it in about 99 runs of 100. Without it the finding is "borderline" (info) and says its
  interval and step count.
On a preflight's stand-in device the numbers are the host's (record/numbers.py leaves the stand-in's own cost out: its
compute, and its mode's cost on each of the job's other torch calls). A preflight judges only a loader without
workers: workers share this machine's cores with the stand-in's compute, which the GPU machine does not do, so their
wait here says nothing about theirs there. Its floor is the GPU host's, on the wait less the stand-in's cost in it
once more (`stand_in_left_out_s`): the mode's cost left out is measured in a tight loop but comes to about twice that
inside a job, whose caches the step's compute has cooled (a TensorDataset of 64 rows, 136 torch calls a batch: 0.7 ms
a batch under `gputriage run`, 1.8 ms under a preflight, 1.2 ms once the measured cost was left out; a CI runner ran
it 1.5 times slower). So a loader of a few cheap torch calls stays under the floor on a slow runner (0.6-1.2 ms),
while one whose own Python work takes the time is judged like a GPU run's (a tokenizer in __getitem__: 3.4 ms, of
which 0.1 ms the mode's). A blanket margin of 2 on the floor took that tokenizer for a borderline on a fast machine
and named it on a slow one. Under the floor, the finding is a borderline note.

The fix sizes num_workers from measurement, not from the core count alone: the loader's time to produce one batch
(LoaderInfo.batch_load_s, measured by the loader probe) against the step's own work per batch (the step's time
without its wait for data, both from `record/numbers.py`). W workers produce W batches per load time, so keeping up
takes load / work of them; and when that is more than the cores can run beside the training loop, more workers
cannot help: the loading itself is CPU-bound.
"""

from __future__ import annotations

import math
import textwrap

import msgspec

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.coverage import preflight_skips_loader
from gputriage.record.device import is_preflight, judged_device
from gputriage.record.edit import Edit
from gputriage.record.numbers import (
    Interval,
    Part,
    bootstrap_share_pct,
    duration_text,
    pct_text,
    stand_in_left_out_s,
    step_numbers,
)
from gputriage.record.sampler import SampledLine
from gputriage.record.steps import MIN_JUDGED_STEPS, LoaderInfo, steady_steps
from gputriage.rules import edits
from gputriage.rules.registry import rule
from gputriage.wording import counted

WAIT_SHARE_WARN_PCT = 20.0
WAIT_SHARE_CRIT_PCT = 50.0
MIN_WAIT_PER_STEP_S = 0.002
RUN_TO_RUN_NOISE_PCT = 5.0
MAX_SUGGESTED_WORKERS = 8
CPU_BOUND_SHARE = 0.5  # loading that computes at least half its time is CPU work: cores, not workers, limit it


def _severity(interval: Interval, steps: int, under_preflight_floor: bool) -> Severity:
    if steps < MIN_JUDGED_STEPS or interval.low < WAIT_SHARE_WARN_PCT + RUN_TO_RUN_NOISE_PCT or under_preflight_floor:
        return Severity.INFO
    return Severity.CRITICAL if interval.low >= WAIT_SHARE_CRIT_PCT else Severity.WARNING


def _wait_title(wait: Part, steps: int, interval: Interval, severity: Severity, stand_in_s: float | None) -> str:
    """input-pipeline-bound's title, with the reason a high share stays a note: a preflight's floor (`stand_in_s`
    given), too few steps, or an interval that reaches down to the threshold."""
    share = pct_text(wait.share_pct)
    if stand_in_s is not None:
        return (
            f"Borderline: the step may wait for the DataLoader {share} of the time "
            f"({duration_text(wait.time_s)} a step, {counted(steps, 'step')}; a preflight names it "
            f"from {duration_text(MIN_WAIT_PER_STEP_S)} a step of the loading's own work, and up to "
            f"{duration_text(stand_in_s)} of it may be the stand-in's)"
        )
    if severity is Severity.INFO and steps < MIN_JUDGED_STEPS:
        return (
            f"From {counted(steps, 'step')} only (a judgement needs {MIN_JUDGED_STEPS}): the step waits "
            f"for the DataLoader {share} of the time (90% interval {interval.text()})"
        )
    if severity is Severity.INFO:
        return (
            f"Borderline: the step may wait for the DataLoader {share} of the time "
            f"(90% interval {interval.text()}, {counted(steps, 'step')}; not clearly over "
            f"{WAIT_SHARE_WARN_PCT:.0f}% once run-to-run noise is allowed for)"
        )
    return f"The step waits for the DataLoader {share} of the time ({counted(steps, 'step')})"


@rule
def input_pipeline_bound(run: Run) -> list[Finding]:
    if run.steps is None:
        return []
    loader = run.steps.loader or LoaderInfo()
    if preflight_skips_loader(run):
        return []
    numbers = step_numbers(run.steps.steps)
    if numbers is None:
        return []
    wait = numbers.part("data_wait")
    if wait.share_pct < WAIT_SHARE_WARN_PCT or wait.time_s < MIN_WAIT_PER_STEP_S:
        return []
    preflight = is_preflight(run)
    stand_in_s = stand_in_left_out_s(run.steps.steps, "data_wait") if preflight else 0.0
    under_preflight_floor = preflight and wait.time_s - stand_in_s < MIN_WAIT_PER_STEP_S
    interval = bootstrap_share_pct(steady_steps(run.steps.steps), ("data_wait_s",))
    severity = _severity(interval, numbers.window.count, under_preflight_floor)
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
    if _made_on_device(loader):
        evidence["batch_device"] = loader.batch_device
    if preflight:
        evidence["preflight_wait_floor_s_per_step"] = MIN_WAIT_PER_STEP_S
        evidence["preflight_stand_in_wait_s_per_step"] = round(stand_in_s, 6)
    # A preflight runs on another machine than the GPU one: its cores do not size the workers there.
    cores = None if preflight else run.steps.cpu_count
    sizing = size_workers(loader, numbers.step_time_s - wait.time_s, numbers.window.count, cores)
    if sizing is not None:
        evidence.update(
            batch_load_s=round(sizing.load_s, 6),
            batch_load_source=loader.batch_load_source,
            step_work_s=round(sizing.work_s, 6),
            workers_needed=sizing.needed,
        )
        if loader.batch_load_cpu_s is not None:
            evidence["batch_load_cpu_s"] = round(loader.batch_load_cpu_s, 6)
    hot = loader_hot_line(run)
    if hot is not None:
        evidence["loader_hot_line"] = hot
    wanted = loader_arguments(loader, cores, judged_device(run), sizing)
    loader_edits = edits.loader_edits(run.source, loader.where, wanted)
    evidence.update(edits.evidence_of(loader_edits))
    title = _wait_title(wait, numbers.window.count, interval, severity, stand_in_s if under_preflight_floor else None)
    return [
        Finding(
            code="input-pipeline-bound",
            rung=5,
            severity=severity,
            title=title,
            evidence=evidence,
            fix=loader_fix(loader, cores, judged_device(run), sizing, next(iter(loader_edits), None), hot=hot)
            + (_GPU_MACHINE_CORES if preflight else ""),
            where=loader.where,
        )
    ]


# eval-loader-bound: an evaluation pass's DataLoader wait, as a share of the measured steps' time (it lands in their
# "other" part, between two training steps), from the same share as a training loader's wait, and at least 0.1 s.
EVAL_WAIT_WARN_PCT = WAIT_SHARE_WARN_PCT
EVAL_WAIT_MIN_S = 0.1


@rule
def eval_loader_bound(run: Run) -> list[Finding]:
    """A validation loader with a slow __getitem__ and no workers: the job ran HEALTHY with 94% of its step time in
    "other" (a trial), the GPU idle through every evaluation pass."""
    steps = run.steps
    loader = steps.eval_loader if steps is not None else None
    if steps is None or loader is None or (is_preflight(run) and (loader.num_workers or 0) > 0):
        return []
    steady = steady_steps(steps.steps)  # the steps every step number rests on, as the step table's
    total_s = math.fsum(s.host_s() for s in steady)
    share = 100.0 * loader.wait_s / total_s if total_s > 0 else 0.0
    if share < EVAL_WAIT_WARN_PCT or loader.wait_s < EVAL_WAIT_MIN_S or not loader.batches:
        return []
    cores = None if is_preflight(run) else steps.cpu_count
    wanted = loader_arguments(loader, cores, judged_device(run), None)
    found = edits.loader_edits(run.source, loader.where, wanted)
    evidence: dict[str, object] = {
        "eval_wait_s": round(loader.wait_s, 6),
        "eval_wait_pct_of_steps": round(share, 1),
        "eval_batches": loader.batches,
        "eval_batch_s": round(loader.wait_s / loader.batches, 6),
        "steps_measured": len(steady),
        "dataset": loader.dataset_class,
        "batch_size": loader.batch_size,
        "num_workers": loader.num_workers,
        "pin_memory": loader.pin_memory,
        "persistent_workers": loader.persistent_workers,
        "cpu_count": steps.cpu_count,
        **edits.evidence_of(found),
    }
    workers = f"num_workers={loader.num_workers or 0}"
    title = (
        f"An evaluation DataLoader ({loader.dataset_class or 'dataset'}, {workers}) held the job "
        f"{loader.wait_s:.2f} s between training steps, {pct_text(share)} of the measured time "
        f"({counted(loader.batches, 'batch', 'batches')}): "
        + ("the GPU waits for it meanwhile" if judged_device(run) not in (None, "cpu") else "training waits meanwhile")
    )
    fix = loader_fix(loader, cores, judged_device(run), None, next(iter(found), None))
    return [Finding("eval-loader-bound", 5, Severity.WARNING, title, evidence, fix, where=loader.where)]


def loader_hot_line(run: Run) -> str | None:
    """With num_workers=0 the dataset runs in the training thread: the stack sampler names the line of the user's
    code where the wait goes ("train.py:65 (YelpReviews.__getitem__), 81% of the wait")."""
    sampler = run.sampler
    wait_s = sampler.phase_s.get("data_wait", 0.0) if sampler is not None else 0.0
    if sampler is None or wait_s <= 0:
        return None
    inside = [line for line in sampler.lines if line.phase_s.get("data_wait", 0.0) >= 0.9 * line.time_s]
    # A function's lines together: a Python loop's time spreads over its lines, while one NumPy call's sits on one
    by_function: dict[tuple[str, str | None], list[SampledLine]] = {}
    for line in inside:
        by_function.setdefault((line.where.rpartition(":")[0], line.function), []).append(line)
    hot = max(
        by_function.values(), key=lambda lines: (round(sum(x.self_s for x in lines), 4), lines[0].depth), default=None
    )
    if hot is None:
        return None
    self_s = sum(x.self_s for x in hot)
    if self_s < 0.2 * wait_s:
        return None
    hottest = max(hot, key=lambda line: line.self_s)
    spread = f", {len(hot)} lines" if len(hot) > 1 else ""
    return f"{hottest.where} ({hottest.function}{spread}), {pct_text(100.0 * self_s / wait_s)} of the wait"


_GPU_MACHINE_CORES = (
    "\n# sized for the GPU machine, whose cores this preflight did not see: the workers and the training loop want "
    "one core each there"
)


class WorkerSizing(msgspec.Struct, frozen=True):
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


def size_workers(loader: LoaderInfo, step_work_s: float, steps: int, cpu_count: int | None) -> WorkerSizing | None:
    """`step_work_s`: the step's time without its wait for data (record/numbers.py's mean over `steps` steps). None
    when the load time per batch or the step's own work is unknown."""
    if loader.batch_load_s is None or steps <= 0 or loader.batch_load_s <= 0:
        return None
    batches_per_step = max(1, round(loader.batches / steps)) if loader.batches else 1  # gradient accumulation
    work_s = max(0.0, step_work_s) / batches_per_step
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


def loader_arguments(
    loader: LoaderInfo, cpu_count: int | None, expected: str | None, sizing: WorkerSizing | None = None
) -> dict[str, str]:
    """The DataLoader keywords the fix sets, as code: what `loader_fix` writes and the patch edits."""
    workers = suggested_workers(cpu_count, sizing)
    wanted = {}
    if (loader.num_workers or 0) < workers:
        wanted["num_workers"] = str(workers)
        wanted["persistent_workers"] = "True"
    if expected == "cuda" and not loader.pin_memory:
        wanted["pin_memory"] = "True"
    return wanted


def sizing_comments(loader: LoaderInfo, sizing: WorkerSizing, cpu_count: int | None) -> list[str]:
    """The arithmetic behind the suggested num_workers, in the fix's own words."""
    current = loader.num_workers or 0
    load, work = duration_text(sizing.load_s), duration_text(sizing.work_s)
    numbers = f"each batch takes {load} to load, the step's own work {work}"
    if current == 0:
        lines = [f"# {numbers}: it takes {counted(sizing.needed, 'worker')} to keep up"]
    elif current < sizing.needed:
        lines = [f"# {numbers}: {counted(current, 'worker')} can't keep up, use at least {sizing.needed}"]
    else:
        lines = [f"# {numbers}: {counted(current, 'worker')} should keep up, yet the step waits for them"]
    asked = suggested_workers(cpu_count, sizing)
    cores = sizing.beyond_cores and cpu_count and sizing.usable is not None
    if cores and cpu_count:
        lines += cores_comment(sizing, cpu_count)
    if asked < sizing.needed and (not cores or asked == MAX_SUGGESTED_WORKERS):
        # the keyword below asks for fewer than the arithmetic above: say why, or the two numbers disagree (a trial:
        # "use at least 12", then num_workers=8, with only the cores named)
        lines.append(
            f"# num_workers={asked} below: more than {MAX_SUGGESTED_WORKERS} workers rarely help one GPU, so the "
            "rest must come from cheaper loading"
        )
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
    # Whether the loading computes is not known (its workers' CPU is not measured): the code below asks for the
    # workers the load time needs, which only help if the loading waits. Said so, next to the cores it has.
    asked = suggested_workers(cpu_count, sizing)
    return [
        f"# this machine has {cores}: beside the training loop it runs {counted(usable, 'worker')} at a time, so "
        f"{asked} help only if the loading waits (files, network);",
        f"# if it is CPU work, it is CPU-bound: {cheaper}",
    ]


def loader_fix(
    loader: LoaderInfo,
    cpu_count: int | None,
    expected: str | None,
    sizing: WorkerSizing | None = None,
    own_call: Edit | None = None,
    *,
    hot: str | None = None,
) -> str:
    """The fix; `own_call`: the edit of the user's own DataLoader(...) statement, shown as the patch writes it (their
    names, their collate_fn and sampler kept), instead of a generic call."""
    workers = suggested_workers(cpu_count, sizing)
    current = loader.num_workers or 0
    lines = _device_batch_comments(loader) if _made_on_device(loader) else []
    args = [f"batch_size={loader.batch_size}" if loader.batch_size else "batch_size=...", "shuffle=..."]
    wanted = loader_arguments(loader, cpu_count, expected, sizing)
    args += [f"{key}={value}" for key, value in wanted.items()]
    lines += sizing_comments(loader, sizing, cpu_count) if sizing is not None else []
    if hot is not None:  # where the loading's time goes: the line that more workers only spread, not shorten
        lines.append(f"# the loading's time goes to {hot}: make it cheaper (vectorise it, cache its result)")
    framework = _framework_options(loader, wanted)
    if own_call is not None:
        lines.append(textwrap.dedent("\n".join(own_call.new)))
    elif framework is not None:
        lines += framework
    elif len(args) > 2:
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
    if expected == "cuda" and own_call is not None:
        lines.append("# in the loop, .to(device, non_blocking=True): with pin_memory=True the copy overlaps compute")
    elif expected == "cuda":
        lines.append("x = x.to(device, non_blocking=True)  # with pin_memory=True the copy overlaps compute")
    return "\n".join(lines)


# transformers' Trainer builds its DataLoaders from these TrainingArguments (its own names for the keywords)
_HF_ARGUMENTS = {
    "num_workers": "dataloader_num_workers",
    "persistent_workers": "dataloader_persistent_workers",
    "pin_memory": "dataloader_pin_memory",
}


def _framework_options(loader: LoaderInfo, wanted: dict[str, str]) -> list[str] | None:
    """A loader a framework built: its options where the user sets them (a DataLoader(...) line the user never
    wrote was no fix to paste, a trial's HF Trainer)."""
    if loader.built_by != "transformers" or not wanted:
        return None
    named = ", ".join(f"{_HF_ARGUMENTS[key]}={value}" for key, value in wanted.items() if key in _HF_ARGUMENTS)
    return [
        "# transformers' Trainer builds this DataLoader from your TrainingArguments: set its options there",
        f"args = TrainingArguments(..., {named})",
    ]


def _made_on_device(loader: LoaderInfo) -> bool:
    """The Dataset or collate_fn builds the batch on the device, in the loop's own process."""
    device = loader.batch_device
    return device is not None and device.split(":", 1)[0] != "cpu" and not loader.num_workers


def _device_batch_comments(loader: LoaderInfo) -> list[str]:
    """Workers first need the batch built on the CPU: a worker process cannot use CUDA, and the advice applied as it
    stands would kill the job with "Cannot re-initialize CUDA in forked subprocess"."""
    return [
        f"# the batch leaves the DataLoader already on {loader.batch_device}: its collate_fn or __getitem__ makes it",
        "# there. Worker processes cannot use CUDA, so first build the batch on the CPU there (drop device= and",
        "# .to(device) in collate_fn / __getitem__) and move it in the loop with .to(device, non_blocking=True); then:",
    ]


def _all_workers(count: int) -> str:
    return "the 1 worker is" if count == 1 else f"all {count} workers are"
