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
- cpu-compute-in-step, found by time (the stack sampler, record/sampler.py), for the CPU work the census cannot see
  (NumPy, PIL, Python loops): one line of the user's code is busy on the CPU in the step's "other" part (outside
  forward, backward, the optimizer, the copies, the syncs and the DataLoader) for at least CPU_WORK_MIN_PCT of the
  sampled step time, and in that part for nearly all of its own samples (CPU_WORK_PURITY, which leaves out the lines
  that merely enclose the loop). A warning needs MIN_SAMPLED_STEPS steps and a 90% interval of the share wholly above
  the threshold plus RUN_TO_RUN_NOISE_PCT (as input-pipeline-bound: runs differ more than one run's samples say);
  otherwise it is borderline (info).
"""

from __future__ import annotations

import ast
import math

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.compute import ComputeSection, HostSync
from gputriage.record.device import is_preflight, judged_device, on_stand_in
from gputriage.record.edit import Edit
from gputriage.record.numbers import Interval, pct_text, wilson_interval_pct
from gputriage.record.sampler import SampledLine, SamplerSection
from gputriage.record.source import split_where
from gputriage.rules import codefix, edits
from gputriage.rules.devicechoice import cpu_chosen
from gputriage.rules.registry import rule
from gputriage.rules.syncfix import feeds_environment, sync_fix, validation_fix
from gputriage.wording import counted

CPU_SHARE_MIN_PCT = 20.0
CPU_TIME_MIN_PER_STEP_S = 0.001
SYNCS_PER_STEP_MIN = 1.0
SYNC_SHARE_MIN_PCT = 5.0
CPU_WORK_MIN_PCT = 15.0
CPU_WORK_PURITY = 0.9
MIN_SAMPLED_STEPS = 5
RUN_TO_RUN_NOISE_PCT = 5.0


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
    chosen = cpu_chosen(run)
    return [
        Finding(
            code="no-gpu-compute",
            # The line the script chose the CPU at; else the model's forward call, which issues the step's compute; the
            # op with the most time only last: which op that is (a matmul in forward, the loss, backward) changes from
            # run to run, and the same job pointed at three lines.
            rung=4,
            severity=Severity.CRITICAL,
            title=f"The {compute.window_steps} probed steps ran {total_ops} ops, none of them on {expected}",
            evidence={
                "ops_per_device": dict(compute.ops_per_device),
                "op_time_s_per_device": {k: round(v, 6) for k, v in compute.op_time_s_per_device.items()},
                "window_steps": compute.window_steps,
                "expected_device": expected,
                **(chosen.evidence() if chosen is not None else {}),
            },
            fix=_no_compute_fix(run, expected, top.where if top else None),
            where=(chosen.where if chosen is not None else None) or _forward_call(run) or (top.where if top else None),
        )
    ]


def _forward_call(run: Run) -> str | None:
    """Where the script first called its (largest) model's forward."""
    models = run.placement.models if run.placement is not None else []
    called = [m for m in models if m.called_where]
    return max(called, key=lambda m: m.parameter_count).called_where if called else None


def _no_compute_fix(run: Run, expected: str, where: str | None) -> str:
    """Move the model and the batches, with the script's own names where its source is known."""
    chosen = cpu_chosen(run)
    if chosen is not None:
        return chosen.fix(expected)
    placement = run.placement
    models = [m for m in placement.models if m.where] if placement is not None else []
    device, lines = codefix.device_for(run.source, models[0].where if models else where, expected)
    moved_models = [line for m in models if (line := codefix.moved_model_line(run.source, m.where, device))]
    off = [
        t
        for t in (placement.tensors if placement is not None else [])
        if t.role in ("input", "label") and t.shape and t.device.split(":")[0] != expected
    ]
    batch = placement.batch_tensors if placement is not None else None
    moved = codefix.moved_everywhere(run.source, off, device, batch) if off else []
    if not moved_models and not moved:
        return "\n".join([*lines, f"model = model.to({device})", f"x, y = x.to({device}), y.to({device})"])
    return "\n".join([*lines, *moved_models, *moved])


@rule
def cpu_compute_in_step(run: Run) -> list[Finding]:
    return census_cpu_compute(run) or sampled_cpu_work(run)


def census_cpu_compute(run: Run) -> list[Finding]:
    judged = _judged(run)
    if judged is None:
        return []
    compute, expected = judged
    host_s = compute.window_host_s()
    if compute.ops_per_device.get(expected, 0) == 0 or host_s <= 0:
        return []  # nothing on the device at all is no-gpu-compute's case
    raw_s = compute.op_time_s_per_device.get("cpu", 0.0)
    cpu_s = compute.cpu_op_steady_s if compute.cpu_op_steady_s is not None else raw_s
    # the ops' own clocks can add up to more than the window's host time (an op timed with the stand-in's work it
    # waited on, which the host time leaves out): a share of the step is at most all of it
    share_pct = round(100.0 * min(cpu_s, host_s) / host_s, 1)
    per_step_s = cpu_s / compute.window_steps
    if share_pct < CPU_SHARE_MIN_PCT or per_step_s < CPU_TIME_MIN_PER_STEP_S:
        return []
    top = compute.top_cpu_ops[:5]
    return [
        Finding(
            code="cpu-compute-in-step",
            rung=4,
            severity=Severity.WARNING,
            title=f"{pct_text(share_pct)} of the step's time is spent in ops on the CPU ({_census_window(compute)})",
            evidence={
                "cpu_op_pct_of_step": round(share_pct, 1),
                "cpu_op_time_per_step_s": round(per_step_s, 6),
                "cpu_ops": [f"{s.name} ×{s.count} {s.steady_s() * 1e3:.2f} ms at {s.where}" for s in top],
                "window_steps": compute.window_steps,
            },
            fix=_census_cpu_fix(run, top[0].where if top else None, expected),
            where=top[0].where if top else None,
        )
    ]


LIBRARY_READS_SHARE = 0.9  # of the reads each step, those inside library code that make the step's waits its own
LIBRARY_SYNC_FIX = (
    "# the library reads a device value on the host inside the call your line makes (an `if` on a tensor);\n"
    "# nothing to change on your line: it costs one wait per call, which matters only for very short steps"
)


def _census_cpu_fix(run: Run, where: str | None, expected: str) -> str:
    """The user's line whose ops ran on CPU tensors, and what to change; the general advice without the source."""
    stmt = codefix.statement_at(run.source, where)
    if stmt is None:
        return f'# create these tensors on the device, or move them once before the loop:\nt = t.to("{expected}")'
    return (
        f"# the ops of this line run on CPU tensors in every step, while the {expected} device waits ({where}):\n"
        f"{stmt.text}\n"
        "# move the tensors it reads to the device before it (or call it on the batch after .to(device)),\n"
        "# and make the tensors it creates with device=...: on the device this line is a few kernels"
    )


def _census_window(compute: ComputeSection) -> str:
    return f"{compute.window_steps} census step{'s' if compute.window_steps != 1 else ''}"


# Samples that must land on a line before it is named at all: fewer say where one sample fell, not where time goes.
MIN_SAMPLES_AT_LINE = 3


def sampled_cpu_work(run: Run) -> list[Finding]:
    """The line of the user's code that keeps the CPU busy in the step, from the stack sampler."""
    sampler = run.sampler
    expected = judged_device(run)
    if sampler is None or sampler.samples == 0 or expected in (None, "cpu"):
        return []
    syncs = run.compute.syncs if run.compute is not None else []
    line = _busiest_cpu_line(sampler, {s.where for s in syncs if s.where})
    if line is None:
        return []
    if line.samples < MIN_SAMPLES_AT_LINE:
        return []  # one sample of four carried "at least 32.4% of a GPU step" at a line after the loop (a trial)
    share_pct = round(sampler.share_pct(line), 1)
    # the line's own CPU time per sampled step (a share of the stand-in's step times the host's step mixed two steps)
    per_step_s = line.other_busy_s / sampler.steps if sampler.steps else None
    if per_step_s is not None and per_step_s < CPU_TIME_MIN_PER_STEP_S:
        return []
    # the samples are time-weighted; their count sets how sure the share is
    measured = wilson_interval_pct(round(share_pct / 100 * sampler.samples), sampler.samples)
    gpu_scale = _gpu_step_scale(run, sampler)
    scale = gpu_scale or 1.0
    judged_pct = min(100.0, round(share_pct * scale, 1))
    interval = Interval(min(100.0, round(measured.low * scale, 1)), min(100.0, round(measured.high * scale, 1)))
    sure = sampler.steps >= MIN_SAMPLED_STEPS and interval.low >= CPU_WORK_MIN_PCT + RUN_TO_RUN_NOISE_PCT
    inner = _hottest_inside(sampler, line)
    callee = inner.function if inner is not None else line.function
    what = ", ".join(x for x in (callee, line.library) if x and x not in ("<module>", "gputriage"))
    window = f"steps {sampler.first_step}-{sampler.last_step}, {counted(sampler.samples, 'sample')}"
    at = f" is CPU work at {line.where}" + (f" ({what})" if what else "")
    if gpu_scale is None:
        title = f"{pct_text(share_pct)} of the step{at}, outside the model ({window})"
    else:
        title = (
            f"At least {pct_text(judged_pct)} of a GPU step{at}, outside the model ({window}; "
            f"{pct_text(share_pct)} of the stand-in's step, whose compute a GPU does faster and beside the host)"
        )
    host_pct = sampler.host_share_pct(line)
    if not sure:
        title = f"Borderline: {title[0].lower()}{title[1:]}; 90% interval {interval.text()}"
        if host_pct is not None and host_pct > judged_pct and host_pct >= CPU_WORK_MIN_PCT + RUN_TO_RUN_NOISE_PCT:
            # A preflight cannot know how long the GPU computes: on a GPU faster than the stand-in the line's share
            # rises toward its share of the host's part of the step. Said, with the run that decides it.
            title += (
                f"; {pct_text(host_pct)} of the host's part of the step, which it approaches on a GPU faster "
                "than the stand-in: `gputriage run` on the GPU machine decides"
            )
    # The share the finding is judged on comes first, with its interval right after it: on a preflight that is the
    # least share of a GPU step, and the stand-in's own share (smaller) follows, so no number sits above an interval
    # that is not its own.
    evidence: dict[str, object] = {}
    if gpu_scale is not None:
        evidence["line_pct_of_gpu_step_min"] = judged_pct
    evidence |= {
        "line_pct_interval_90": [interval.low, interval.high],
        "line_pct_of_step": share_pct,
        "samples_at_line": line.samples,
        "samples": sampler.samples,
        "steps_sampled": sampler.steps,
        "function": line.function,
        "library": line.library,
    }
    if per_step_s is not None:
        evidence["cpu_time_per_step_s"] = round(per_step_s, 6)
    if host_pct is not None:  # a preflight: the share of the host's part of the step, beside the conservative one
        evidence["line_pct_of_host_step"] = round(host_pct, 1)
    if inner is not None:
        evidence["hottest_line_inside"] = f"{inner.where} ({inner.function}, {inner.library})"
    return [
        Finding(
            code="cpu-compute-in-step",
            rung=4,
            severity=Severity.WARNING if sure else Severity.INFO,
            title=title,
            evidence=evidence,
            fix=_cpu_work_fix(run, line, expected),
            where=line.where,
        )
    ]


def _gpu_step_scale(run: Run, sampler: SamplerSection) -> float | None:
    """A preflight's stand-in that computed for real bounds how long the GPU step can take (record/sampler.py); the
    meta backing computes nothing, so it bounds nothing, and a real device's step is the step itself."""
    if not is_preflight(run) or run.stand_in is None or run.stand_in.backing != "cpu":
        return None
    steps = run.steps.steps if run.steps is not None else []
    return sampler.gpu_step_scale(steps, _reads_the_device_every_step(run))


def _reads_the_device_every_step(run: Run) -> bool:
    """The step waits for the device at least once per step, as host-sync-in-loop counts it (a `loss.item()` each
    step): a GPU's compute then adds to the host's part instead of running beside it."""
    compute = run.compute
    if compute is None or compute.window_steps <= 0:
        return True  # not measured: the conservative sum
    return bool(_every_step_reads(compute))


def _every_step_reads(compute: ComputeSection) -> list[HostSync]:
    """The sites that read a device value at least once per step, in most census steps."""
    steps = compute.window_steps
    return [s for s in compute.syncs if s.count / steps >= SYNCS_PER_STEP_MIN and _recurs(s, steps)]


def _busiest_cpu_line(sampler: SamplerSection, sync_sites: set[str]) -> SampledLine | None:
    """The outermost line that runs (nearly) only in the step's "other" part, busy there above the threshold. A line
    where the step reads a device value on the host (`loss.item()`, `print(loss)`) is host-sync-in-loop's: the time
    around that read is the wait and its Python, not CPU work to move, and one line gets one cause."""
    candidates = [
        line
        for line in sampler.lines
        if line.time_s > 0
        and line.where not in sync_sites
        and line.phase_s.get("other", 0.0) >= CPU_WORK_PURITY * line.time_s
        and max(sampler.share_pct(line), sampler.host_share_pct(line) or 0.0) >= CPU_WORK_MIN_PCT
    ]
    return max(candidates, key=lambda line: (round(line.other_busy_s, 4), -line.depth), default=None)


def _hottest_inside(sampler: SamplerSection, outer: SampledLine) -> SampledLine | None:
    inside = [line for line in sampler.lines if line.depth > outer.depth and line.phase_s.keys() == {"other"}]
    return max(inside, key=lambda line: line.self_s, default=None)


def _cpu_work_fix(run: Run, line: SampledLine, expected: str) -> str:
    stmt = codefix.statement_at(run.source, line.where)
    code = stmt.text if stmt is not None else f"# the code at {line.where}"
    return (
        f"# this runs on the CPU in every step, while the {expected} device waits:\n{code}\n"
        "# move it into the Dataset's __getitem__, so that DataLoader(num_workers=...) workers run it in parallel,\n"
        "# or do it on the batch after .to(device) with torch ops (torch.flip, torch.roll, ...), on the device"
    )


def _recurs(site: HostSync, window_steps: int) -> bool:
    """The read happens in most steps, not in one: 513 reads while sampling text once every 500 iterations are not a
    sync "every step". A record without the count (steps 0) is judged by the count alone."""
    if site.steps == 0:
        return True
    return site.steps >= max(min(2, window_steps), math.ceil(window_steps / 2))


def _line_order(site: HostSync) -> tuple[str, int]:
    return split_where(site.where) or ("", 0)


def _not_the_users(site: HostSync) -> bool:
    """A read issued inside a library, or by autograd in `loss.backward()` (the backward of `x[mask]` counts the mask
    again): the line to change is the user's own read, in the forward. torch.distributions' argument checks are the
    user's to switch off, on their line."""
    return _in_library(site) or ".backward(" in (site.code or "")


def _in_library(site: HostSync) -> bool:
    return site.library_where is not None and not _distribution_check(site)


def _distribution_check(site: HostSync) -> bool:
    """A read inside torch.distributions (its validate_args checks), which the user's line can switch off."""
    return "/torch/distributions/" in (site.library_where or "").replace("\\", "/")


def _statement_where(run: Run, where: str | None) -> str | None:
    """The first line of the statement that holds `where`: a read on the continuation line of a multi-line print is
    that print's (DCGAN's `print(... d_loss.data.cpu().numpy())` was named at its second line, a trial)."""
    stmt = codefix.statement_at(run.source, where)
    return f"{stmt.snippet.path}:{stmt.first_line}" if stmt is not None else where


def _site_text(site: HostSync, window_steps: int) -> str:
    """A read of every step as its count per step; one that happened in some steps only as its count and those steps
    ("513 in 1 of 3 steps"): a per-step average of those would describe no step."""
    if site.steps and site.steps < window_steps:
        return f"{site.kind} ×{site.count} in {site.steps} of {window_steps} steps at {site.where}: {site.code}"
    return f"{site.kind} ×{site.count / window_steps:.1f}/step at {site.where}: {site.code}"


# -- a debugging setting left on ---------------------------------------------------------------------------------------

_BLOCKING_TITLE = (
    "CUDA_LAUNCH_BLOCKING=1 makes every kernel launch wait until the kernel has finished: the host cannot queue work "
    "ahead, and the GPU idles between kernels"
)
_UNSET = (
    "unset CUDA_LAUNCH_BLOCKING   # in the shell, job script or launcher that starts the job\n"
    "# set it only to find which kernel raised a CUDA error, for that one run"
)


@rule
def launch_blocking(run: Run) -> list[Finding]:
    """launch-blocking: CUDA_LAUNCH_BLOCKING=1 in the job's environment while it trained on CUDA (or meta). Registered
    before host_sync_in_loop: a setting that makes every launch wait outranks a read once per step."""
    judged = _judged(run)
    if judged is None:
        return []
    compute, expected = judged
    # on CUDA, or on the meta device that stands in for it (the setting goes with the script to the GPU machine)
    if expected not in ("cuda", "meta") or (compute.launch_blocking or "").strip() != "1":
        return []
    where = compute.launch_blocking_where
    edit = edits.comment_out(run.source, where, "a debugging setting: every kernel launch waits for the kernel")
    evidence: dict[str, object] = {
        "launch_blocking": compute.launch_blocking,
        "set_by": compute.launch_blocking_set_by,
        "set_where": where,
        **edits.evidence_of([edit] if edit is not None else []),
    }
    return [
        Finding(
            code="launch-blocking",
            rung=4,
            severity=Severity.WARNING,
            title=_BLOCKING_TITLE,
            evidence=evidence,
            fix=_blocking_fix(run, where, compute.launch_blocking_set_by),
            where=where,
        )
    ]


def _blocking_fix(run: Run, where: str | None, set_by: str | None) -> str:
    stmt = codefix.statement_at(run.source, where)
    if stmt is not None:
        return (
            f"# line {stmt.first_line} turns it on for every run: remove it, or keep it behind a debug flag\n"
            f"# {stmt.text}\n"
            "# (it must be set before CUDA starts to matter: `CUDA_LAUNCH_BLOCKING=1 python ...` for one debug run)"
        )
    if set_by == "job":
        return "# the job sets it while it runs: find and remove os.environ['CUDA_LAUNCH_BLOCKING'] = '1'\n" + _UNSET
    return _UNSET


@rule
def cudnn_autotuner(run: Run) -> list[Finding]:
    """cudnn-autotuner (info): cuDNN's settings do not fit the convolutions the steps ran (causes.md J.27-28): held
    to deterministic algorithms; the autotuner off while the shapes stay fixed; or on while they change every step.
    Info: what it costs is the GPU's, which a preflight does not time and a run does not split per kernel choice."""
    judged = _judged(run)
    if judged is None:
        return []
    compute, expected = judged
    steps = compute.window_steps
    if expected not in ("cuda", "meta") or not compute.conv_calls or not steps or compute.cudnn_benchmark is None:
        return []
    per_step = compute.conv_calls / steps
    fixed = compute.conv_input_shapes <= max(per_step, 1)  # each call of a step sees the shape it saw before
    where = compute.cudnn_set_where
    evidence: dict[str, object] = {
        "conv_calls_per_step": round(per_step, 1),
        "conv_input_shapes": compute.conv_input_shapes,
        "steps": steps,
        "cudnn_benchmark": compute.cudnn_benchmark,
        "cudnn_deterministic": compute.cudnn_deterministic,
        "set_where": where,
    }
    at = f" (line {where.rsplit(':', 1)[-1]})" if where else ""
    if compute.cudnn_deterministic:
        title = (
            f"cuDNN is held to deterministic algorithms while {per_step:.0f} convolutions run per step: it may "
            "choose slower kernels than it would"
        )
        fix = (
            f"# for runs that need not reproduce bit for bit{at}:\n"
            "torch.backends.cudnn.deterministic = False  # and torch.use_deterministic_algorithms(False)\n"
            + ("torch.backends.cudnn.benchmark = True  # the shapes stay fixed: time the kernels once" if fixed else "")
        ).rstrip("\n")
    elif not compute.cudnn_benchmark and fixed:
        title = (
            f"cuDNN's autotuner is off while {per_step:.0f} convolutions per step keep their input shapes: it could "
            "time its kernels once and keep the fastest"
        )
        fix = (
            f"torch.backends.cudnn.benchmark = True  # before the loop{at}; with fixed shapes it times each once "
            "(SpeechBrain on a V100: 17 min an epoch, 12 with it)"
        )
    elif compute.cudnn_benchmark and not fixed:
        title = (
            f"cuDNN's autotuner is on while the convolutions' input shapes change ({compute.conv_input_shapes} "
            f"shapes in {steps} steps): it times its kernels again for every new shape"
        )
        fix = (
            f"torch.backends.cudnn.benchmark = False  # shapes that vary{at}; or pad or bucket the inputs to a few "
            "fixed sizes, then keep it on"
        )
    else:
        return []
    return [
        Finding(
            "cudnn-autotuner",
            4,
            Severity.INFO,
            title,
            evidence={k: v for k, v in evidence.items() if v is not None},
            fix=fix,
            where=where,
        )
    ]


@rule
def host_sync_in_loop(run: Run) -> list[Finding]:
    judged = _judged(run)
    if judged is None:
        return []
    compute, _ = judged
    steps = compute.window_steps
    sync_s = sum(s.time_s for s in compute.syncs)
    share_pct = 100.0 * sync_s / compute.window_wall_s if compute.window_wall_s > 0 else 0.0
    hot = _every_step_reads(compute)
    # On a stand-in a sync waits for no device: its time is the host's own work (a first call's set-up), and only
    # how often the step reads a device value says anything about the GPU run.
    costly = share_pct >= SYNC_SHARE_MIN_PCT and not on_stand_in(run)
    if not hot and not costly:
        return []
    # the user's own reads first: the line and the fix go to what the user can change, not to a read inside torch
    # or a library that their line only calls into (nn.Transformer's mask check)
    # equal counts: the first read in the file, not the one that happened to take longer on a noisy machine
    sites = sorted(compute.syncs, key=lambda s: (-_recurs(s, steps), _not_the_users(s), -s.count, _line_order(s)))
    recurring = [s for s in sites if _recurs(s, steps)] or sites
    first = sites[0]
    # the reads of a library the user's line calls into (LBFGS's step: 1279 of 1303 a step, its own `float(loss)`
    # and tolerance checks) outnumber the user's own nearly all: the user's lines are not what makes the step wait
    library_reads = sum(s.count for s in hot if _in_library(s))
    mostly_library = library_reads >= LIBRARY_READS_SHARE * sum(s.count for s in hot)
    in_library = not costly and bool(hot) and mostly_library
    if in_library:
        hot = sorted((s for s in hot if _in_library(s)), key=lambda s: -s.count)
    # an RL loop's action for an environment on the host (`env.step(action.item())`): the fix amortises it over
    # several environments, and the read stays, one per step; a note, or a vectorised loop would be warned forever
    inherent = (
        not costly and not in_library and all(feeds_environment(run.source, s.where, s.caller_where) for s in hot)
    )
    per_step = sum(s.count for s in recurring) / steps
    # whole reads as whole numbers ("100 times", "once"), an average with its decimal ("1.3 times")
    times = "once" if per_step == 1 else f"{int(per_step)} times" if per_step.is_integer() else f"{per_step:.1f} times"
    title = f"The step waits for the device {times} per step ({_census_window(compute)})"
    if in_library:
        title += f", read inside library code ({hot[0].library_where})"
    elif inherent:
        title += ": the action an environment on the host steps with"
    evidence: dict[str, object] = {"syncs_per_step": round(per_step, 2)}
    if not on_stand_in(run):  # on a stand-in a read waits for no device: its time is not a GPU run's wait
        evidence.update({"sync_time_per_step_s": round(sync_s / steps, 6), "sync_pct_of_step": round(share_pct, 1)})
    evidence["sites"] = [_site_text(s, steps) for s in sites[:6]]
    # every line of the user's that reads each step gets its fix (super_resolution: the accumulator and the print)
    own = _one_per_statement(run, [s for s in recurring if not _not_the_users(s) and s.where])[:MAX_FIXED_SITES]
    own = own or [first]
    fix = LIBRARY_SYNC_FIX if in_library else _sync_fixes(run, own)
    if not in_library:
        per_site = [(s, _site_edits(run, s)) for s in own]
        found = [e for _, site_found in per_site for e in site_found]
        beside = _read_beside_the_gated(run, per_site)
        if beside is not None:
            # a read no edit can space out (pyGAT's early stopping: `return loss_val.data.item()`) right beside the
            # gated ones still waits for the device every step: they, read with it, wait for nothing more, and
            # gating them would only cut the job's own log (a trial's patch printed 1 epoch line of 12)
            found = [e for e in found if e.kind != "read-rarely"]
            fix += (
                f"\n# {beside} still reads a device value every step, right beside these: spacing the others out "
                "alone saves no wait on the GPU; make that one a tensor kept on the device first"
            )
        evidence.update(edits.evidence_of(found))
    return [
        Finding(
            code="host-sync-in-loop",
            rung=4,
            severity=Severity.INFO if in_library or inherent else Severity.WARNING,
            title=title,
            evidence=evidence,
            fix=fix,
            # the user's line that calls into the library, where it is known: the line a user can look at
            where=(hot[0].where or hot[0].library_where) if in_library else _statement_where(run, first.where),
        )
    ]


MAX_FIXED_SITES = 3
# Lines between a gated read and one left every step for the two to count as one wait (nothing queued between them).
BESIDE_LINES = 2


def _read_beside_the_gated(run: Run, per_site: list[tuple[HostSync, list[Edit]]]) -> str | None:
    """The `where` of a per-step read no edit spaces out, within BESIDE_LINES of a read an edit gates; else None. An
    accumulation (`epoch_loss += loss.item()`) is not one: its fix keeps the sum on the device, and the read goes."""
    gated = [e for _, found in per_site for e in found if e.kind == "read-rarely"]
    for site, found in per_site:
        if found or site.kind == "cpu-index" or _distribution_check(site) or not site.where:
            continue
        stmt = codefix.statement_at(run.source, site.where)
        if stmt is not None and isinstance(stmt.node, ast.AugAssign):
            continue
        path, _, line = site.where.rpartition(":")
        if not line.isdigit():
            continue
        for edit in gated:
            last = edit.line + len(edit.old) - 1
            if edit.path == path and edit.line - BESIDE_LINES <= int(line) <= last + BESIDE_LINES:
                return site.where
    return None


def _one_per_statement(run: Run, sites: list[HostSync]) -> list[HostSync]:
    """The first site of each statement: the reads on the lines of one multi-line `print(...)` get one fix (trial 10:
    the same block three times, one per line of one call)."""
    seen: set[tuple[str, int]] = set()
    kept = []
    for site in sites:
        stmt = codefix.statement_at(run.source, site.where)
        key = (stmt.snippet.path, stmt.first_line) if stmt is not None else (site.where or "", 0)
        if key not in seen:
            seen.add(key)
            kept.append(site)
    return kept


def _sync_fixes(run: Run, sites: list[HostSync]) -> str:
    if len(sites) == 1:
        return _site_fix(run, sites[0])
    parts, moved = [], set()
    for site in sites:
        text = _site_fix(run, site)
        head, _, last = text.rpartition("\n")
        if site.kind == "cpu-index" and last in moved:  # one index used on two lines: its one move, shown once
            text = head.rpartition("\n")[0] + f"\n# the move above fixes this line too: {last}"
        moved.add(last)
        parts.append(f"# {site.where}:\n{text}")
    return "\n".join(parts)


def _site_fix(run: Run, site: HostSync) -> str:
    if _distribution_check(site):
        return validation_fix(run.source, site.where)
    return sync_fix(run.source, site.where, site.kind, site.caller_where)


def _site_edits(run: Run, site: HostSync) -> list[Edit]:
    if _distribution_check(site):
        edit = edits.validation_off(run.source, site.where)
        return [edit] if edit is not None else []
    if site.kind == "cpu-index":
        return edits.index_move_edits(run.source, site.where)
    return edits.read_rarely_edits(run.source, site.where)
