"""`gputriage run [OPTIONS] script.py [ARGS...]` / `-m package.module`: the whole ladder on a real run of the job."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from gputriage.collectors.distributed import is_multi_rank
from gputriage.collectors.runner import Target, check_target, die_by_signal, run_target
from gputriage.collectors.session import DEFAULT_STEPS, JobObservers, ObserveConfig, new_run
from gputriage.commands.common import add_fail_on, add_verbose, exit_code_for, out_folder, whole_number
from gputriage.commands.rank_report import report_rank
from gputriage.diagnosis import Diagnosis, diagnose
from gputriage.errors import InputError
from gputriage.findings import Severity
from gputriage.report.output import OutputOptions, emit

DEFAULT_OUT = Path("gputriage-out")
# --preflight: steps the job runs on the stand-in before it is ended (the probes' windows close after step 4; the rest
# give rung 5's host side steady steps to judge).
PREFLIGHT_STEPS = 10
# --trace: steps in the profiler window (it starts after every probe window; see collectors/profiler_window.py).
DEFAULT_TRACE_STEPS = 3


@dataclass
class RunConfig:
    target: Target
    expect_device: str | None = None  # as given; None: the first available accelerator
    steps: int | None = DEFAULT_STEPS
    out_dir: Path = DEFAULT_OUT
    argv: list[str] = field(default_factory=list)
    fail_on: str | None = None  # critical | warning: exit 1 when the job succeeded but such a finding exists (CI)
    trace_steps: int | None = None  # --trace: profile this many steps after warm-up; None: no profiler window
    preflight: str | None = None  # --preflight: the stand-in's backing (cpu | meta); None: a normal run
    verbose: bool = False  # -v: the whole report on stderr (the files in out_dir always hold it all)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "run",
        help="run a training script under gputriage and triage it (rungs 1-5)",
        usage="gputriage run [OPTIONS] script.py [ARGS...]\n       gputriage run [OPTIONS] -m package.module [ARGS...]",
        description="Runs the script as `python script.py ARGS` would (same stdout, stderr and exit code) and writes "
        "the triage report to stderr and --out.",
    )
    add_run_options(p)
    add_fail_on(p)
    add_verbose(p)
    p.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE", help="run a module, like python -m")
    p.add_argument("target", nargs=argparse.REMAINDER, metavar="script.py [ARGS...]", help="the script and its args")
    p.set_defaults(func=main)


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--expect-device",
        metavar="DEV",
        help="the device the job is meant to use (default: the first available accelerator: cuda, xpu, mps, ...)",
    )
    p.add_argument(
        "--steps",
        type=whole_number(1),
        metavar="N",
        help=f"observe the first N training steps, then let the job run untouched (default {DEFAULT_STEPS}); "
        f"with --preflight, end the job after N steps (default {PREFLIGHT_STEPS})",
    )
    p.add_argument(
        "--out", type=out_folder, default=DEFAULT_OUT, metavar="DIR", help="report folder (default ./gputriage-out)"
    )
    p.add_argument(
        "--preflight",
        action="store_true",
        help="no GPU needed: run the unchanged script with CUDA simulated on a stand-in device that computes on the "
        "CPU, for a few steps, and judge placement, ops, host syncs and CPU work (rungs 2-4) before renting a GPU",
    )
    p.add_argument(
        "--preflight-backing",
        choices=("cpu", "meta"),
        default="cpu",
        help="where the stand-in's values live: cpu computes for real (default); meta keeps shapes only and reads "
        "return placeholders, for a model too large to compute on this machine",
    )
    p.add_argument(
        "--trace",
        action="store_true",
        help="also record a short torch.profiler window after warm-up into --out and analyse it (rung 5)",
    )
    p.add_argument(
        "--trace-steps",
        type=whole_number(1),
        metavar="N",
        help=f"steps in the --trace window (default {DEFAULT_TRACE_STEPS}; implies --trace)",
    )


def main(args: argparse.Namespace) -> int:
    return execute(config_from(args))


def config_from(args: argparse.Namespace) -> RunConfig:
    if args.module:
        target = Target(name=args.module[0], args=list(args.module[1:]), is_module=True)
    elif args.target:
        target = Target(name=args.target[0], args=list(args.target[1:]))
    else:
        raise InputError("name the script to run: gputriage run train.py [ARGS...]  (or -m package.module)")
    if args.steps is not None and args.steps < 1:
        raise InputError(f"--steps must be at least 1 (got {args.steps})")
    preflight = getattr(args, "preflight", False)
    steps = args.steps if args.steps is not None else (PREFLIGHT_STEPS if preflight else DEFAULT_STEPS)
    argv = ["-m", *args.module] if args.module else list(args.target)
    config = RunConfig(target, args.expect_device, steps, args.out, argv, getattr(args, "fail_on", None))
    config.trace_steps = trace_steps_from(args, steps)
    config.verbose = getattr(args, "verbose", False)
    if preflight:
        config.preflight = preflight_backing(args)
    return config


def preflight_backing(args: argparse.Namespace) -> str:
    """--preflight simulates CUDA: it judges for cuda, and records no GPU trace."""
    if args.expect_device is not None and args.expect_device.split(":", 1)[0] != "cuda":
        raise InputError(f"--preflight simulates a CUDA device; drop --expect-device {args.expect_device}")
    if args.trace or args.trace_steps is not None:
        raise InputError("--trace records GPU kernels, and a preflight runs none: drop --trace, or run on the GPU")
    return str(args.preflight_backing)


def trace_steps_from(args: argparse.Namespace, observed_steps: int | None) -> int | None:
    """--trace / --trace-steps N: the profiler window's length, checked against --steps (the window needs the step
    counter, which --steps turns off)."""
    steps = args.trace_steps
    if steps is None and not args.trace:
        return None
    from gputriage.collectors.profiler_window import first_traced_step  # imports torch: only with --trace

    steps = DEFAULT_TRACE_STEPS if steps is None else steps
    if steps < 1:
        raise InputError(f"--trace-steps must be at least 1 (got {steps})")
    end_step = first_traced_step() + steps
    if observed_steps is not None and observed_steps < end_step:
        raise InputError(
            f"--trace records steps {first_traced_step()}-{end_step - 1}, after the probes' own window: "
            f"use --steps {end_step} or more (got --steps {observed_steps})"
        )
    return steps


def execute(config: RunConfig) -> int:
    """Run the job under the observers, write the report, and return the job's own exit code."""
    check_target(config.target)
    run = new_run("run", config.argv, config.expect_device, preflight=config.preflight is not None)
    observe = ObserveConfig(config.expect_device, config.steps, config.trace_steps, config.out_dir)
    observe.preflight = config.preflight
    observers = JobObservers(run, observe)
    observers.start()
    outcome = run_target(config.target)
    observers.finish(outcome, config.target.describe())
    diag: Diagnosis | None = None
    if is_multi_rank():  # under torchrun: this rank's record, merged into the job's report through files
        report_rank(run, config.out_dir, sys.stderr, verbose=config.verbose)
    else:
        diag = diagnose(run)
        report(diag, config.out_dir, verbose=config.verbose)
    if outcome.signal is not None:
        die_by_signal(outcome.signal)
    if outcome.exit_code == 0 and diag is not None:  # the script's own failure code always wins
        return fail_on_code(diag, config.fail_on)
    return outcome.exit_code


def fail_on_code(diag: Diagnosis, fail_on: str | None) -> int:
    """--fail-on: 1 when a finding at that severity or worse exists, said in one line after the report (CI logs)."""
    code = exit_code_for(diag, fail_on)
    if code and fail_on is not None:
        failing = dict.fromkeys(f.code for f in diag.findings if f.severity.weight <= Severity(fail_on).weight)
        print(f"gputriage: --fail-on {fail_on}: {', '.join(failing)}; exit 1", file=sys.stderr)
    return code


def report(diag: Diagnosis, out_dir: Path, verbose: bool = False) -> None:
    """The terminal report goes to stderr (stdout is the script's); report.json and friends into out_dir."""
    try:
        emit(diag, OutputOptions(out_dir=out_dir, terminal_stream=sys.stderr, verbose=verbose))
    except InputError as exc:  # an unwritable --out must not replace the script's exit code
        print(f"gputriage: error: {exc}", file=sys.stderr)
