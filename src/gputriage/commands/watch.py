"""`gputriage watch`: nvidia-smi that explains itself. A live view of every GPU with a verdict per GPU.

`--once --json` prints one snapshot as the report document (its `gpu` section, plus the rung-5 findings) and exits.
On a terminal the view is redrawn in place; through a pipe or in a CI log it is one line per interval. However the
watch ends (Ctrl-C, SIGTERM, SIGHUP, or the reader of a pipe going away) it ends cleanly, with a summary of the whole
session where there is still someone to read it.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from gputriage.collectors.host import pci_nvidia_gpus
from gputriage.commands.common import add_fail_on, add_verbose, exit_code_for, positive_number, whole_number
from gputriage.diagnosis import Diagnosis, diagnose, gpu_device_verdicts
from gputriage.errors import InputError
from gputriage.hardware.nvml import NvmlSession, Unavailable, open_nvml
from gputriage.hardware.procs import table_for
from gputriage.hardware.sampler import GpuSampler, JobSpec
from gputriage.record import Run
from gputriage.record.gpu import GpuSection
from gputriage.report.live import Frame, Stopped, print_frame, print_summary, run_live
from gputriage.report.output import OutputOptions, emit, silence_stdout

ONCE_HISTORY_S = 20.0  # the driver keeps ~20 s of utilisation readings; --once summarises them
ONCE_GPM_GAP_S = 0.2  # GPM metrics are differences between two samples taken apart
LIVE_VERDICT_WINDOW_S = 10.0  # the live verdict judges the last seconds, not the whole session

NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("watch", help="live GPU view with a verdict (nvidia-smi that explains itself)")
    p.add_argument(
        "--interval", type=positive_number, default=1.0, metavar="S", help="refresh every S seconds (default 1)"
    )
    p.add_argument("--once", action="store_true", help="print one snapshot and exit")
    p.add_argument("--json", action="store_true", help="with --once: print the report document (its gpu section)")
    p.add_argument("--pid", type=whole_number(1), metavar="PID", help="follow one job: this process and its children")
    add_fail_on(p)
    add_verbose(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.json and not args.once:
        raise InputError("--json prints one snapshot: use it with --once (gputriage watch --once --json)")
    with open_nvml() as session:
        _require_nvml(session)
        sampler = _sampler(session, args)
        if args.once:
            return _once(sampler, args)
        _live(sampler, args.interval)
    return 0


def _sampler(session: NvmlSession, args: argparse.Namespace) -> GpuSampler:
    job = None
    if args.pid is not None:
        table = table_for(session.lib)
        if table.command(args.pid) is None and table.parent(args.pid) is None:
            raise InputError(f"no process with pid {args.pid} on this machine (is it in another container?)")
        job = JobSpec(root_pid=args.pid, root_role="followed")
    sampler = GpuSampler(
        session,
        interval_s=args.interval,
        process_interval_s=max(1.0, args.interval),
        job=job,
        only_visible=False,  # watch shows every GPU, whatever this shell's CUDA_VISIBLE_DEVICES says
        history_s=ONCE_HISTORY_S if args.once else 0.0,
    )
    sampler.open()
    if not sampler.tracks:
        raise InputError(f"no GPU to watch: {sampler.unavailable_reason} (rung 1: no-gpu-visible); run `gputriage env`")
    return sampler


def _once(sampler: GpuSampler, args: argparse.Namespace) -> int:
    sampler.tick(force_slow=True)
    time.sleep(ONCE_GPM_GAP_S)
    sampler.tick()
    diag = snapshot_diagnosis(sampler.section(), _argv(args))
    if args.json:
        emit(diag, OutputOptions(json=True))
    else:
        section = diag.run.gpu or GpuSection()
        findings = list(diag.findings)  # every finding the exit code may act on (a lost GPU is rung 1's)
        print_frame(section, diag.device_verdicts, sys.stdout, findings=findings, verbose=args.verbose)
    return exit_code_for(diag, args.fail_on)


def _argv(args: argparse.Namespace) -> list[str]:
    argv = ["watch", "--interval", f"{args.interval:g}", "--once"]
    argv += ["--json"] if args.json else []
    argv += ["--pid", str(args.pid)] if args.pid is not None else []
    return argv


def snapshot_diagnosis(section: GpuSection, argv: list[str]) -> Diagnosis:
    """The report of one watch snapshot: `Run(command="watch", gpu=section)` through the usual rules."""
    return diagnose(Run(command="watch", argv=argv, gpu=section))


def _live(sampler: GpuSampler, interval_s: float) -> None:
    def frame() -> Frame:
        sampler.tick()
        section = sampler.section()
        return section, gpu_device_verdicts(section, LIVE_VERDICT_WINDOW_S)

    started_s = time.monotonic()
    try:
        with _signals_stop_the_watch():
            end = run_live(frame, _sleeper(interval_s), sys.stdout)
        section = sampler.section()  # the summary judges the whole session, not the last seconds
        elapsed_s = time.monotonic() - started_s
        print_summary(section, gpu_device_verdicts(section), sys.stdout, elapsed_s, end.stopped_by)
    except BrokenPipeError:  # `gputriage watch | head -3`: the reader has gone, and nobody is left to tell
        silence_stdout()


# The signals that end a watch with its summary; SIGINT arrives as KeyboardInterrupt.
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


@contextmanager
def _signals_stop_the_watch() -> Iterator[None]:
    """While the watch runs, SIGTERM and SIGHUP end it like Ctrl-C: the loop stops and the summary is printed."""

    def stop(signum: int, _frame: FrameType | None) -> None:
        raise Stopped(signal.Signals(signum).name)

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _sleeper(interval_s: float) -> Callable[[], bool]:
    def wait() -> bool:
        time.sleep(interval_s)
        return True

    return wait


def _require_nvml(session: NvmlSession) -> None:
    """Without NVML there is nothing to watch: say why in one line, with the rung-1 finding it amounts to."""
    if session.ok:
        return
    error = session.init_error or Unavailable("NVML did not start")
    if error.code is None and "not installed" in error.reason:
        raise InputError(f"cannot watch the GPUs: {error.reason}; install it with `pip install nvidia-ml-py`")
    raise InputError(
        f"cannot watch the GPUs: NVML did not start ({error.reason}) (rung 1: {rung1_code(error)}); "
        "run `gputriage env` for the fix"
    )


def rung1_code(error: Unavailable, pci_gpus: int | None = None) -> str:
    """The rung-1 finding an NVML start-up failure amounts to (docs/contract.md catalogue).

    A version mismatch names itself. Otherwise the PCI bus decides: an NVIDIA board without a working driver is
    driver-not-loaded; no board at all is no-gpu-visible.
    """
    if error.code == NVML_ERROR_LIB_RM_VERSION_MISMATCH:
        return "driver-library-mismatch"
    if pci_gpus is None:
        pci_gpus = pci_nvidia_gpus(Path("/"))
    return "no-gpu-visible" if pci_gpus == 0 else "driver-not-loaded"
