"""`gputriage run [OPTIONS] script.py [ARGS...]` / `-m package.module`: the whole ladder on a real run of the job."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TextIO

import msgspec

# the standard library modules gputriage takes for itself, taken now, on this thread, before the job and the machine
# probe's thread run (stdlib.py)
from gputriage import stdlib  # noqa: F401
from gputriage.collectors.after_import import after_import, forget
from gputriage.collectors.distributed import is_multi_rank
from gputriage.collectors.observer import Observer
from gputriage.collectors.runner import (
    JobSignals,
    LaunchError,
    Outcome,
    Target,
    check_target,
    end_by_signal,
    flush_std_streams,
    run_target,
)
from gputriage.collectors.session import DEFAULT_STEPS, JobObservers, ObserveConfig, new_run, torch_facts_now
from gputriage.commands.common import add_verbose, device_name, out_folder, require_torch, whole_number
from gputriage.commands.detached import fd_identity
from gputriage.commands.loop import add_loop_options, check_loop_options
from gputriage.commands.run_worker import ReportRequest, ReportWorker, report_job
from gputriage.errors import InputError
from gputriage.outdir import check_out_dir
from gputriage.record import Run
from gputriage.record.device import judged_device
from gputriage.record.stand_in import preflight_section
from gputriage.textsafe import encode_safely

DEFAULT_OUT = Path("gputriage-out")
# --preflight: steps the job runs on the stand-in before it is ended (the probes' windows close after step 4; the rest
# give rung 5's host side steady steps to judge). Short steps go on, up to PREFLIGHT_MAX_STEPS, until the steps after
# warm-up have lasted PREFLIGHT_MIN_WINDOW_S: ten 10 ms steps give the stack sampler 25 samples, too few to tell a
# 20% line from a 40% one, and a second of them costs the user one second.
PREFLIGHT_STEPS = 10
PREFLIGHT_MAX_STEPS = 100
# --trace: steps in the profiler window (it starts after every probe window; see collectors/profiler_window.py).
DEFAULT_TRACE_STEPS = 3


class RunConfig(msgspec.Struct):
    target: Target
    expect_device: str | None = None  # as given; None: the first available accelerator
    steps: int | None = DEFAULT_STEPS
    out_dir: Path = DEFAULT_OUT
    argv: list[str] = msgspec.field(default_factory=list)
    fail_on: str | None = None  # critical | warning: exit 1 when the job succeeded but such a finding exists (CI)
    trace_steps: int | None = None  # --trace: profile this many steps after warm-up; None: no profiler window
    preflight: str | None = None  # --preflight: the stand-in's backing (cpu | meta); None: a normal run
    # --preflight without --steps: end after this many steps once they lasted long enough (steps is then the most)
    preflight_min_steps: int | None = None
    patch: Path | None = None  # --patch FILE: the fixes as a diff
    baseline: Path | None = None  # --baseline DIR: compare with an earlier report after the run
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
    add_loop_options(p)  # --patch, --baseline and --fail-on (critical | warning | regression)
    add_verbose(p)
    p.add_argument("-m", dest="module", nargs=argparse.REMAINDER, metavar="MODULE", help="run a module, like python -m")
    p.add_argument("target", nargs=argparse.REMAINDER, metavar="script.py [ARGS...]", help="the script and its args")
    p.set_defaults(func=main)


def add_run_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--expect-device",
        type=device_name,
        metavar="DEV",
        help="the device the job is meant to use (default: the first available accelerator: cuda, xpu, mps, ...)",
    )
    p.add_argument(
        "--steps",
        type=whole_number(1),
        metavar="N",
        help=f"observe the first N training steps, then let the job run untouched (default {DEFAULT_STEPS}); "
        f"with --preflight, end the job after N steps (default {PREFLIGHT_STEPS}, or up to {PREFLIGHT_MAX_STEPS} "
        "while the steps after warm-up have lasted under a second)",
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
    steps = args.steps if args.steps is not None else (PREFLIGHT_MAX_STEPS if preflight else DEFAULT_STEPS)
    argv = ["-m", *args.module] if args.module else list(args.target)
    config = RunConfig(target, args.expect_device, steps, args.out, argv, getattr(args, "fail_on", None))
    if preflight and args.steps is None:
        config.preflight_min_steps = PREFLIGHT_STEPS
    config.trace_steps = trace_steps_from(args, steps)
    config.verbose = getattr(args, "verbose", False)
    if preflight:
        config.preflight = preflight_backing(args)
    check_loop_options(args)
    # absolute now: the script may chdir, and the report worker writes the patch after it ends
    config.patch, config.baseline = _absolute(getattr(args, "patch", None)), _absolute(getattr(args, "baseline", None))
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
    from gputriage.collectors.windows import first_traced_step

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
    """Run the job under the observers, write the report, and return the job's own exit code.

    Before any of the user's code runs: --out is checked (and made absolute: the script may chdir), and the script or
    folder is checked as Python would (its message, its exit code).
    """
    out_dir = check_out_dir(config.out_dir)
    try:
        check_target(config.target)
    except LaunchError as exc:
        print(f"{sys.executable}: {exc}", file=sys.stderr)
        return exc.exit_code
    require_torch()
    return RunJob(config, out_dir).run()


class RunJob:
    """One `gputriage run`: the worker, the observers, the script, the report, and how the process ends."""

    def __init__(self, config: RunConfig, out_dir: Path) -> None:
        self.config = config
        self.out_dir = out_dir
        self.signals = JobSignals(self._terminated)
        self.report_fd = -1
        self._report_identity: tuple[int, int] | None = None  # what report_fd was open on, to tell if it still is
        self.start_stderr: TextIO | None = sys.stderr  # None: started with stderr closed
        self.worker: ReportWorker | None = None
        self.observers: JobObservers | None = None
        self._outcome: Outcome | None = None
        self._code: int | None = None
        self._ending = threading.Lock()  # the main thread, or the signal watch when the main thread is stuck
        self._start_s = 0.0
        self._gpu_sampler: Observer | None = None
        self.start_cwd = Path.cwd()  # the patch's paths are relative to where the user started the job

    def run(self) -> int:
        self.signals.install()
        # The report goes to the stderr the job started with, whatever the script does to sys.stderr or fd 2. When
        # that is not fd 2 (gputriage called in a process whose stderr is captured), it is written here, not by the
        # worker, which can only write to a file descriptor.
        self.start_stderr = sys.stderr
        if _writes_to_fd(sys.stderr, 2):
            self.report_fd = os.dup(2)
            self._report_identity = fd_identity(self.report_fd)
            self.worker = ReportWorker.spawn(self.config.expect_device, self.report_fd)  # before torch is imported
        # The probes start once the job's own `import torch` has run: torch reads the environment when it loads, and
        # a script that sets OMP_NUM_THREADS (or anything torch reads then) at its top, before importing torch, must
        # find it read. Where torch is loaded already (--trace checked its profiler), they start now.
        self._gpu_sampler = self._start_gpu_sampler()
        waiting = None if "torch" in sys.modules else after_import("torch", self._observe)
        if waiting is None:
            self._observe()
        self._start_s = time.perf_counter()
        job_pid = os.getpid()
        try:
            outcome = run_target(self.config.target, self.signals)
        finally:
            forget(waiting)  # a job that never imported torch: the finder leaves with it
        if os.getpid() != job_pid:
            # a child the script forked (os.fork) ran on to the script's end: it ends as it would under python,
            # with its exit code and its atexit handlers, and no report of its own (the job's is the parent's)
            return outcome.exit_code
        code = self._end(outcome)
        self.signals.deliver_held()
        if outcome.signal is not None:
            end_by_signal(outcome.signal)
        self.signals.restore()
        return code

    def _observe(self) -> None:
        """Make the record and the observers, and start them (once): from the job's `import torch`, or now."""
        if self.observers is None:
            self.observers = self._make_observers()
            self.observers.start()

    def _make_observers(self) -> JobObservers:
        try:
            return self._observers_with_torch()
        except Exception:  # torch half-loaded (a SIGTERM in the job's own `import torch`): how the job ended, alone
            run = Run(command="run", argv=self.config.argv, expect_device=self.config.expect_device)
            bare = ObserveConfig(self.config.expect_device, gpu_sampler=self._gpu_sampler, torch_free=True)
            return JobObservers(run, bare, warn=self._report_stream())

    def _start_gpu_sampler(self) -> Observer | None:
        """The NVML sampler, started before the script: it needs no torch (a job that never imports torch is sampled
        too). None for a preflight, which judges no GPU."""
        if self.config.preflight is not None:
            return None
        from gputriage.collectors.gpu_observer import GpuSamplerObserver

        sampler = GpuSamplerObserver()
        sampler.start(Run(command="run"))  # it keeps nothing of the record it is given; it never raises
        return sampler

    def _observers_with_torch(self) -> JobObservers:
        run = new_run("run", self.config.argv, self.config.expect_device, preflight=self.config.preflight is not None)
        observe = ObserveConfig(
            self.config.expect_device, self.config.steps, self.config.trace_steps, self.out_dir, environment=False
        )
        observe.preflight = self.config.preflight
        observe.preflight_min_steps = self.config.preflight_min_steps
        observe.gpu_sampler = self._gpu_sampler
        observers = JobObservers(run, observe, warn=self._report_stream())
        probe = observers.probe
        if probe is not None and not is_multi_rank():
            probe.window_end_listeners.append(self._flush_partial)
        return observers

    def _terminated(self) -> None:
        """SIGTERM while the script runs (called from the signal handler): report what was seen; the caller dies."""
        flush_std_streams()
        outcome = Outcome(exit_code=128 + signal.SIGTERM, signal="SIGTERM")
        outcome.wall_s = time.perf_counter() - self._start_s
        self._end(outcome)

    def _end(self, outcome: Outcome) -> int:
        """Finish the observers and write the report, once. Returns the process's exit code."""
        with self._ending:
            return self._end_once(outcome)

    def _end_once(self, outcome: Outcome) -> int:
        if self._code is not None:
            return self._code
        if self.observers is None:  # the job never imported torch: its report says what the probes could not see
            self.observers = self._make_observers()
            if self.config.preflight is not None:  # still a preflight: it judges no machine, this one neither
                self.observers.run.stand_in = preflight_section(self.config.preflight)
        self._outcome = outcome
        self._code = outcome.exit_code
        record = self.observers.finish(outcome, self.config.target.describe())
        request = ReportRequest(
            out_dir=str(self.out_dir),
            expect_device=self.config.expect_device or judged_device(self.observers.run) or "cpu",
            fail_on=self.config.fail_on,
            multi_rank=is_multi_rank(),
            torch_raw=torch_facts_now(),
            verbose=self.config.verbose,
            patch=str(self.config.patch) if self.config.patch is not None else None,
            patch_root=str(self.start_cwd),
            baseline=str(self.config.baseline) if self.config.baseline is not None else None,
        )
        fail_code = self.worker.request(request, record) if self.worker is not None else None
        if fail_code is None:  # no worker, or it did not answer: do its work here
            fail_code = report_job(self.observers.run, request, self._report_stream())
        if self.worker is not None:
            self.worker.close()
        if outcome.exit_code == 0 and outcome.signal is None and not request.multi_rank:
            self._code = fail_code  # the script's own failure code always wins
        return self._code

    def _flush_partial(self) -> None:
        """The probe window has ended: a record of rungs 1-4 and the observed steps goes into --out now, so that a
        job killed later (SIGKILL, os._exit) still leaves a report. It has no `process` section: the job was running."""
        if self.worker is None or self.observers is None or self._code is not None:
            return
        probe = self.observers.probe
        if probe is None:
            return
        partial = msgspec.structs.replace(self.observers.run)
        probe.snapshot(partial)
        request = ReportRequest(
            out_dir=str(self.out_dir),
            expect_device=self.config.expect_device or judged_device(partial) or "cpu",
            torch_raw=torch_facts_now(only_if_cuda_is_initialised=True),
            partial=True,
        )
        self.worker.post(request, encode_safely(partial))

    def _report_stream(self) -> TextIO:
        if self.report_fd < 0:
            if self.start_stderr is None:  # started with stderr closed (`2>&-`): print(file=None) would be stdout's
                return Path(os.devnull).open("w", encoding="utf-8")
            return self.start_stderr
        fd = self.report_fd
        if fd_identity(fd) != self._report_identity:
            # the job closed our copy of its stderr (os.closerange(3, ...)), and may have opened a file of its own on
            # that number since: the report goes to fd 2 if that is still the stderr the job started with, else
            # nowhere on the terminal (report.json and the other files are written all the same)
            fd = 2 if fd_identity(2) == self._report_identity else -1
        if fd < 0:
            return Path(os.devnull).open("w", encoding="utf-8")
        # line-buffered: an observer's one-line warning shows when it is written, not when (if) the stream is freed
        return open(fd, "w", buffering=1, encoding="utf-8", errors="backslashreplace", closefd=False)


def _absolute(path: Path | None) -> Path | None:
    return Path(os.path.abspath(path)) if path is not None else None  # noqa: PTH100  (symlinks kept as named)


def _writes_to_fd(stream: TextIO, fd: int) -> bool:
    try:
        return stream.fileno() == fd
    except (AttributeError, OSError, ValueError):
        return False
