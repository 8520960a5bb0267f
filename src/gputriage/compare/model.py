"""`gputriage compare BEFORE AFTER`: did the fix work? Two diagnoses in, one comparison out (pure).

Every number is one the reports already show (one number per concept): the step time and each part of the step from
`step_numbers`, GPU busy from NVML's mean utilisation or the trace's busy share, samples/s from the loader's batch
size. What this module adds is the judgement: better, worse or within the noise (`stats.py`), the findings resolved,
still there and new, and a verdict in one line.
"""

from __future__ import annotations

import msgspec

from gputriage.compare import stats
from gputriage.compare.stats import BETTER, NOISE, UNMEASURED, WORSE, Judgement
from gputriage.diagnosis import Diagnosis
from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.device import judged_device, on_stand_in
from gputriage.record.gpu import GpuTrack
from gputriage.record.numbers import PARTS, duration_text, gpu_util_mean_pct, host_parts_s, step_numbers
from gputriage.record.steps import Step, steady_steps

COMPARE_SCHEMA = "gputriage.compare/1"


class Change(msgspec.Struct, frozen=True):
    key: str  # step_time | data_wait | h2d | ... | gpu_busy_nvml | gpu_busy_trace | samples_per_s
    label: str  # "step time", "load data", "GPU busy (NVML)"
    unit: str  # s | pct | per_s
    before: float | None
    after: float | None
    judgement: Judgement

    @property
    def ratio(self) -> float | None:
        """before / after: the speed-up of a time (1.59x), None when either side is missing or zero."""
        if self.before is None or self.after is None or self.after <= 0 or self.before <= 0:
            return None
        return self.before / self.after


class FindingRef(msgspec.Struct, frozen=True):
    code: str
    rung: int
    severity: str
    where: str | None
    title: str


class FindingsDelta(msgspec.Struct):
    resolved: list[FindingRef] = msgspec.field(default_factory=list)
    still: list[FindingRef] = msgspec.field(default_factory=list)
    new: list[FindingRef] = msgspec.field(default_factory=list)


class Side(msgspec.Struct, frozen=True):
    label: str  # the path as given
    status: str  # the run's verdict status
    exit_code: int | None
    steps: int  # steady steps the step numbers rest on
    stand_in: bool  # a preflight or the meta stand-in: the times are the host's, not a GPU's


class Comparison(msgspec.Struct):
    before: Side
    after: Side
    step_time: Change
    parts: list[Change]
    gpu_busy: list[Change]
    throughput: Change | None
    findings: FindingsDelta
    status: str  # fixed | no change | regressed
    summary: str
    timing_judged: bool = True  # False: stand-in runs across a change of the findings (see `timing_comparable`)
    caveats: list[str] = msgspec.field(
        default_factory=list
    )  # what differs between the two jobs beyond the change itself
    # Why the timing is not judged, where it is not: "on a stand-in", "on different GPUs"
    unjudged_because: str | None = None

    def regressed_timing(self) -> bool:
        """Step time or GPU busy got worse beyond the noise: what `--fail-on regression` guards."""
        worse = any(c.judgement.direction == WORSE for c in [self.step_time, *self.gpu_busy])
        return worse and self.timing_judged


# -- the numbers of one run -------------------------------------------------------------------------------------------


def steps_of(run: Run) -> list[Step]:
    """The steps a run's step numbers rest on: the process's, or the lowest rank's of a merged job."""
    if run.steps is not None and run.steps.steps:
        return run.steps.steps
    if run.ranks is not None:
        for info in sorted(run.ranks.ranks, key=lambda i: i.rank):
            if info.steps is not None and info.steps.steps:
                return info.steps.steps
    return []


def _job_track(run: Run) -> GpuTrack | None:
    """The GPU the job used: the first one its CUDA sees that NVML read, else the first one read."""
    tracks = [t for t in (run.gpu.devices if run.gpu is not None else []) if gpu_util_mean_pct(t) is not None]
    visible = [t for t in tracks if t.cuda_index is not None]
    return min(visible, key=lambda t: t.cuda_index or 0) if visible else (tracks[0] if tracks else None)


def _util_samples(track: GpuTrack | None) -> list[float]:
    if track is None:
        return []
    return [s.gpu_util_pct for s in track.samples if s.gpu_util_pct is not None]


def _trace_value(run: Run, name: str) -> float | None:
    ranks = run.trace.ranks if run.trace is not None else []
    value = getattr(ranks[0], name, None) if ranks else None
    return float(value) if isinstance(value, (int, float)) else None


def _batch_size(run: Run) -> int | None:
    loader = run.steps.loader if run.steps is not None else None
    return loader.batch_size if loader is not None and loader.batch_size else None


# -- the changes ------------------------------------------------------------------------------------------------------


TOO_FEW = "too few to judge"


def _thin_trace(before: Run, after: Run, what: str) -> Judgement | None:
    """A trace too thin for rung 5 on either side (one step, a few kernels): its single value is not judged, as the
    run's own diagnosis does not judge it (record/trace.py `thin_evidence`)."""
    for label, run in (("before", before), ("after", after)):
        thin = next((t for r in run.trace.ranks if (t := r.thin_evidence())), None) if run.trace is not None else None
        if thin is not None:
            return Judgement(NOISE, None, f"{what}: the {label} trace holds only {thin}, {TOO_FEW}")
    return None


def _single(
    runs: tuple[Run, Run], values: tuple[float | None, float | None], floor: float, *, higher_is_better: bool, what: str
) -> Judgement:
    """judge_single, unless a side's trace is too thin to judge."""
    thin = _thin_trace(runs[0], runs[1], what)
    if thin is not None and None not in values:
        return thin
    return stats.judge_single(values[0], values[1], floor, higher_is_better=higher_is_better, what=what)


def _step_change(before: Run, after: Run) -> Change:
    b_steps, a_steps = steady_steps(steps_of(before)), steady_steps(steps_of(after))
    b_num, a_num = step_numbers(steps_of(before)), step_numbers(steps_of(after))
    if b_num is not None or a_num is not None:
        b_time = b_num.step_time_s if b_num is not None else None
        a_time = a_num.step_time_s if a_num is not None else None
        floor = stats.MIN_CHANGE_PCT / 100.0 * (b_time or a_time or 0.0)
        judged = stats.judge(
            [s.host_s() for s in b_steps] if b_num else [],
            [s.host_s() for s in a_steps] if a_num else [],
            floor,
            higher_is_better=False,
            what="step time",
        )
        return Change("step_time", "step time", "s", b_time, a_time, judged)
    b_us, a_us = _trace_value(before, "step_time_us"), _trace_value(after, "step_time_us")
    b_t = b_us / 1e6 if b_us is not None else None
    a_t = a_us / 1e6 if a_us is not None else None
    floor = stats.MIN_CHANGE_PCT / 100.0 * (b_t or 0.0)
    return Change(
        "step_time",
        "step time",
        "s",
        b_t,
        a_t,
        _single((before, after), (b_t, a_t), floor, higher_is_better=False, what="step time (trace)"),
    )


def _part_changes(before: Run, after: Run, step_time: Change) -> list[Change]:
    b_num, a_num = step_numbers(steps_of(before)), step_numbers(steps_of(after))
    if b_num is None and a_num is None:
        return []
    b_steps, a_steps = steady_steps(steps_of(before)), steady_steps(steps_of(after))
    # a part's change counts against the step: the same floor as the step time's
    floor = stats.MIN_CHANGE_PCT / 100.0 * (step_time.before or step_time.after or 0.0)
    out = []
    for i, spec in enumerate(PARTS):
        b = [host_parts_s(s)[i] for s in b_steps] if b_num is not None else []
        a = [host_parts_s(s)[i] for s in a_steps] if a_num is not None else []
        judged = stats.judge(b, a, floor, higher_is_better=False, what=spec.label)
        out.append(
            Change(
                spec.key,
                spec.label,
                "s",
                b_num.part(spec.key).time_s if b_num is not None else None,
                a_num.part(spec.key).time_s if a_num is not None else None,
                judged,
            )
        )
    return out


def _busy_changes(before: Run, after: Run) -> list[Change]:
    out = []
    b_track, a_track = _job_track(before), _job_track(after)
    if b_track is not None or a_track is not None:
        b_mean = gpu_util_mean_pct(b_track) if b_track is not None else None
        a_mean = gpu_util_mean_pct(a_track) if a_track is not None else None
        judged = stats.judge(
            _util_samples(b_track),
            _util_samples(a_track),
            stats.MIN_BUSY_CHANGE_POINTS,
            higher_is_better=True,
            what="GPU busy (NVML samples)",
        )
        out.append(Change("gpu_busy_nvml", "GPU busy (NVML)", "pct", b_mean, a_mean, judged))
    b_busy, a_busy = _trace_busy(before), _trace_busy(after)
    if b_busy is not None or a_busy is not None:
        floor = stats.MIN_BUSY_CHANGE_POINTS
        judged = _single((before, after), (b_busy, a_busy), floor, higher_is_better=True, what="GPU busy (trace)")
        out.append(Change("gpu_busy_trace", "GPU busy (trace)", "pct", b_busy, a_busy, judged))
    return out


def _trace_busy(run: Run) -> float | None:
    """The trace's busy share as its own report judges it (RankTrace.judged_busy_pct)."""
    ranks = run.trace.ranks if run.trace is not None else []
    return ranks[0].judged_busy_pct() if ranks else None


def _throughput(before: Run, after: Run, step_time: Change) -> Change | None:
    """Samples per second = batch size / step time, where the loader's batch size is known."""
    b_batch, a_batch = _batch_size(before), _batch_size(after)
    if b_batch is None and a_batch is None:
        return None
    b = b_batch / step_time.before if b_batch and step_time.before else None
    a = a_batch / step_time.after if a_batch and step_time.after else None
    direction = step_time.judgement.direction
    if b_batch != a_batch and direction in (BETTER, WORSE):
        direction = NOISE if b is None or a is None else (BETTER if a > b else WORSE)
    judged = Judgement(direction, None, "from the step time and the loader's batch size")
    return Change("samples_per_s", "samples/s", "per_s", b, a, judged)


# -- findings ---------------------------------------------------------------------------------------------------------


def _causes(diag: Diagnosis) -> list[Finding]:
    return [f for f in diag.findings if f.severity is not Severity.INFO]


def _key(f: Finding) -> tuple[str, str | None]:
    """A finding is the same across runs when its code and file are: the fix moves line numbers."""
    path = f.where.rpartition(":")[0] if f.where and ":" in f.where else f.where
    return f.code, path


def _ref(f: Finding) -> FindingRef:
    return FindingRef(f.code, f.rung, f.severity.value, f.where, f.title)


def findings_delta(before: Diagnosis, after: Diagnosis) -> FindingsDelta:
    """Critical and warning findings resolved, still there and new. A cause that became info is resolved, unless the
    after run is inconclusive: there the info is a finding too thinly measured to judge (one step), still there."""
    b, a = _causes(before), _causes(after)
    # a fixed copy of the script under another name (`train_v2.py`): its findings are the same ones as the original's
    # (a trial read "resolved" and "new" for one finding on one line, and "regressed")
    renamed = _script_names(before.run, after.run)

    def _key_after(f: Finding) -> tuple[str, str | None]:
        code, path = _key(f)
        return (code, renamed[0]) if renamed is not None and path == renamed[1] else (code, path)

    a_keys, b_keys = {_key_after(f) for f in a}, {_key(f) for f in b}
    thin = after.verdict.status == "inconclusive"
    # by code alone: a demoted finding may name no line
    unjudged = {f.code: f for f in after.findings if f.severity is Severity.INFO} if thin else {}
    delta = FindingsDelta()
    delta.resolved = [_ref(f) for f in b if _key(f) not in a_keys and f.code not in unjudged]
    delta.still = [_ref(f) for f in a if _key_after(f) in b_keys]
    delta.still += [_ref(unjudged[f.code]) for f in b if _key(f) not in a_keys and f.code in unjudged]
    delta.new = [_ref(f) for f in a if _key_after(f) not in b_keys]
    return delta


def _script_names(before: Run, after: Run) -> tuple[str, str] | None:
    """(before's script, after's) as findings name them (`where`'s path), where the two runs ran scripts of different
    names; None where they ran the same one (or either is not a script's run)."""
    b, a = _target(before), _target(after)
    if not b or not a or b == a or not b.endswith(".py") or not a.endswith(".py"):
        return None
    return b, a


# -- the verdict ------------------------------------------------------------------------------------------------------


def _side(label: str, diag: Diagnosis) -> Side:
    run = diag.run
    proc = run.process
    steps = len(steady_steps(steps_of(run)))
    traced = _trace_value(run, "steps")
    return Side(
        label,
        diag.verdict.status,
        proc.exit_code if proc is not None else None,
        steps if steps or traced is None else int(traced),
        on_stand_in(run),
    )


def compare(before: Diagnosis, after: Diagnosis, before_label: str, after_label: str) -> Comparison:
    step = _step_change(before.run, after.run)
    parts = _part_changes(before.run, after.run, step)
    busy = _busy_changes(before.run, after.run)
    delta = findings_delta(before, after)
    sides = (_side(before_label, before), _side(after_label, after))
    other_gpus = _different_gpus(before.run, after.run)
    judged = timing_comparable(sides, delta) and other_gpus is None
    status, summary = (
        verdict(step, busy, delta, sides) if judged else findings_verdict(step, delta, sides, other_gpus=other_gpus)
    )
    throughput = _throughput(before.run, after.run, step)
    caveats = job_caveats(before.run, after.run)
    because = None if judged else ("on different GPUs" if other_gpus else "on a stand-in")
    return Comparison(
        sides[0], sides[1], step, parts, busy, throughput, delta, status, summary, judged, caveats, because
    )


# -- are these two runs of one job? -----------------------------------------------------------------------------------


def _measured_by(run: Run) -> str:
    """How the run's step time was measured: by `gputriage run` (the host's clock at each step) or from a trace."""
    return "a profiler trace" if run.command == "trace" else f"`gputriage {run.command}`"


def _target(run: Run) -> str | None:
    return run.process.target if run.process is not None else None


def _ranks(run: Run) -> int | None:
    if run.ranks is not None:
        return run.ranks.world_size or None
    if run.rank_info is not None:
        return run.rank_info.world_size or None
    if run.trace is not None:  # rank 0 of 8 alone against a one-process job: the traces' declared world size
        # else as many ranks as traces were given (a folder of 8 traces that never say their world size)
        return run.trace.declared_world_size() or run.trace.ranks_given() or None
    return None


def _trace_gpus(run: Run) -> str | None:
    """The GPU model(s) a trace ran on (its deviceProperties), as one text; None where it names none."""
    names = sorted({r.device for r in run.trace.ranks if r.device}) if run.trace is not None else []
    return ", ".join(names) or None


def _different_gpus(before: Run, after: Run) -> str | None:
    """'NVIDIA H100 80GB HBM3 before, AMD Instinct MI300X after' where the two runs ran on different GPU models: a
    time or a busy share measured on one says nothing of a change made on the other."""
    b_gpus, a_gpus = _trace_gpus(before), _trace_gpus(after)
    return f"{b_gpus} before, {a_gpus} after" if b_gpus and a_gpus and b_gpus != a_gpus else None


def job_caveats(before: Run, after: Run) -> list[str]:
    """What differs between the two runs besides the user's change, each as one line. The comparison still runs (a
    fixed copy of a script has another name), but the reader is told what the numbers stand on."""
    out = []
    if (before.command == "trace") != (after.command == "trace"):
        out.append(
            f"before was measured by {_measured_by(before)} and after by {_measured_by(after)}: their step times "
            "are different clocks, so the step time is compared only where both sides measured it the same way"
        )
    b_target, a_target = _target(before), _target(after)
    if b_target and a_target and b_target != a_target:
        out.append(f"different scripts: before ran {b_target}, after ran {a_target}")
    b_device, a_device = judged_device(before), judged_device(after)
    if b_device and a_device and b_device != a_device:
        out.append(f"different devices: before was judged for {b_device}, after for {a_device}")
    b_gpus, a_gpus = _trace_gpus(before), _trace_gpus(after)
    if b_gpus and a_gpus and b_gpus != a_gpus:
        out.append(f"different GPUs: before ran on {b_gpus}, after on {a_gpus}")
    b_ranks, a_ranks = _ranks(before), _ranks(after)
    if b_ranks != a_ranks and b_ranks is not None and a_ranks is not None:
        out.append(f"different world sizes: {b_ranks} ranks before, {a_ranks} after")
    b_batch, a_batch = _batch_size(before), _batch_size(after)
    if b_batch and a_batch and b_batch != a_batch:
        out.append(f"different batch sizes: {b_batch} before, {a_batch} after: compare samples/s, not step time")
    work = _device_work_caveat(before, after)
    if work is not None:
        out.append(work)
    return out


DEVICE_WORK_RATIO = 3.0  # two traces whose device time differs this much are not one job before and after a fix


def _device_work_caveat(before: Run, after: Run) -> str | None:
    """Traces carry no batch size: the device time each holds (busy share x window) says when they are two different
    workloads (a trial compared batch 4 / seq 128 with batch 8 / seq 1024, 63 ms against 563 ms of GPU work)."""
    (b_ms, b_per), (a_ms, a_per) = _device_ms(before), _device_ms(after)
    if not b_ms or not a_ms or b_per != a_per or max(b_ms, a_ms) < DEVICE_WORK_RATIO * min(b_ms, a_ms):
        return None
    return (
        f"different workloads: the GPU works {b_ms:,.0f} ms {b_per} in the before trace and {a_ms:,.0f} ms in the "
        "after one (a different batch or model): the busy share compares how well each keeps its GPU busy, not the job"
    )


def _device_ms(run: Run) -> tuple[float | None, str]:
    """The device time a trace holds: per step where it marks steps, else in its window."""
    ranks = run.trace.ranks if run.trace is not None else []
    r = ranks[0] if ranks else None
    if r is not None and r.steps and r.step_time_us and r.busy_pct_of_steps is not None:
        return r.busy_pct_of_steps / 100.0 * r.step_time_us / 1000.0, "a step"
    if r is None or r.busy_pct is None or r.window_us is None:
        return None, ""
    return r.busy_pct / 100.0 * r.window_us / 1000.0, "in its window"


def timing_comparable(sides: tuple[Side, Side], delta: FindingsDelta) -> bool:
    """Can the two runs' times be judged against each other?

    On a stand-in device (the meta stand-in, a preflight) the times are the host's. Across a change that resolved or
    introduced a finding of rungs 2-4 (where the data, the model and the ops are), they are not comparable: a model
    left on the CPU computed for real before the fix and the stand-in computes nothing after it, so a placement fix
    can look like a slow-down or a large speed-up that a GPU would not show. Across any other change (a DataLoader
    fix, a planted sleep, a no-op edit) the host's time is what changed, as it would on the GPU machine, and it is
    judged.
    """
    stand_in = sides[0].stand_in or sides[1].stand_in
    placement = any(2 <= r.rung <= 4 for r in [*delta.resolved, *delta.new])
    return not (stand_in and placement)


def findings_verdict(
    step: Change, delta: FindingsDelta, sides: tuple[Side, Side], *, other_gpus: str | None = None
) -> tuple[str, str]:
    """The verdict from the findings alone, the timing shown but not judged (stand-in runs, `timing_comparable`; runs
    on different GPU models)."""
    where = f"on different GPUs ({other_gpus})" if other_gpus else "on a stand-in device"
    why = "one GPU's time says nothing of the other's" if other_gpus else "the host's time, not a GPU's"
    timing = f"step {times_text(step.before, step.after)} {where}, not judged ({why})"
    if not delta.new and not delta.resolved:
        return "no change", f"no change: no finding resolved or new; {timing}"
    if delta.new and not delta.resolved:
        return "regressed", f"regressed: new {', '.join(r.code for r in delta.new)}; {timing}"
    notes = [*_exit_note(sides), timing]
    if delta.new:
        notes.insert(0, f"new: {', '.join(r.code for r in delta.new)}")
    resolved = ", ".join(r.code for r in delta.resolved)
    return "fixed", f"fixed: {resolved} resolved" + "".join(f"; {n}" for n in notes)


def verdict(step: Change, busy: list[Change], delta: FindingsDelta, sides: tuple[Side, Side]) -> tuple[str, str]:
    """fixed | no change | regressed, and the one line that says why."""
    timing = [*busy, step]
    better = [c for c in timing if c.judgement.direction == BETTER]
    worse = [c for c in timing if c.judgement.direction == WORSE]
    if worse:
        return "regressed", "regressed: " + ", ".join(change_text(c) for c in worse) + _findings_note(delta)
    if better or delta.resolved:
        if not better and delta.new and not _outranked(delta):
            return "regressed", "regressed: new " + ", ".join(r.code for r in delta.new)
        shown = [change_text(c) for c in better] or [f"{', '.join(r.code for r in delta.resolved)} resolved"]
        if better and delta.resolved:
            shown.append(f"{', '.join(r.code for r in delta.resolved)} resolved")
        notes = [] if better else [_timing_note(step, sides)]
        notes += _exit_note(sides)
        if delta.new:
            notes.append(f"new: {', '.join(r.code for r in delta.new)}")
        if delta.still:  # faster, and still the same causes: "fixed" alone read as a job with nothing left to fix
            notes.append("still there: " + ", ".join(f"{r.code} ({r.severity})" for r in delta.still))
        return "fixed", "fixed: " + ", ".join(shown) + "".join(f"; {n}" for n in notes if n)
    if delta.new:
        return "regressed", "regressed: new " + ", ".join(r.code for r in delta.new)
    return "no change", "no change: " + _timing_note(step, sides) + _findings_note(delta)


_SEVERITY_RANK = {"info": 0, "warning": 1, "critical": 2}


def _outranked(delta: FindingsDelta) -> bool:
    """The worst finding resolved is worse than the worst one new: a CPU-only job that now runs on the GPU (critical
    no-gpu-compute resolved) and is launch-bound there (a warning) got better, not worse."""
    worst = max((_SEVERITY_RANK.get(r.severity, 0) for r in delta.resolved), default=-1)
    return worst > max((_SEVERITY_RANK.get(r.severity, 0) for r in delta.new), default=-1)


def change_text(change: Change) -> str:
    """'step 154 -> 97 ms (1.59x)', 'GPU busy 31% -> 88%'."""
    if change.unit == "pct":
        return f"{change.label.split(' (')[0]} {_value(change.before, 'pct')} -> {_value(change.after, 'pct')}"
    speed = f" ({change.ratio:.2f}x)" if change.ratio is not None and change.unit == "s" else ""
    name = "step" if change.key == "step_time" else change.label
    return f"{name} {times_text(change.before, change.after)}{speed}"


def times_text(before: float | None, after: float | None) -> str:
    """'154.3 -> 97.1 ms': each number as the report writes it (record.numbers.duration_text), the unit once when
    both share it ('1.20 s -> 800.0 ms' where they do not)."""
    if before is None and after is None:
        return "not measured"
    shown = ["not measured" if v is None else duration_text(v) for v in (before, after)]
    if before is None or after is None:  # the unit goes with the number, never after "not measured"
        return " -> ".join(shown)
    (first, first_unit), (_, second_unit) = (t.rsplit(" ", 1) for t in shown)
    if first_unit == second_unit or before == 0:  # nothing before: "0 -> 94 µs"
        return f"{first} -> {shown[1]}"
    if after == 0:
        return f"{shown[0]} -> 0 {first_unit}"
    return " -> ".join(shown)


def _value(v: float | None, unit: str) -> str:
    if v is None:
        return "not measured"
    return f"{v:.0f}%" if unit == "pct" else f"{v:.3g}"


def _timing_note(step: Change, sides: tuple[Side, Side]) -> str:
    if step.judgement.direction == UNMEASURED or step.judgement.reason.endswith(TOO_FEW):
        return f"step time {times_text(step.before, step.after)} ({step.judgement.reason})"
    note = f"step {times_text(step.before, step.after)}, within the noise"
    if any(s.stand_in for s in sides):
        note += " (a stand-in run times the host, not a GPU)"
    return note


def _exit_note(sides: tuple[Side, Side]) -> list[str]:
    b, a = sides[0].exit_code, sides[1].exit_code
    if b not in (None, 0) and a == 0:
        return [f"the job now completes (exit {b} -> 0)"]
    return []


def _findings_note(delta: FindingsDelta) -> str:
    parts = []
    if delta.resolved:
        parts.append(f"resolved: {', '.join(r.code for r in delta.resolved)}")
    if delta.new:
        parts.append(f"new: {', '.join(r.code for r in delta.new)}")
    if not parts:
        parts.append("same findings" if delta.still else "no warning or critical finding in either run")
    return "; " + "; ".join(parts)
