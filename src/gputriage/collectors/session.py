"""Everything that watches the user's job, assembled once for `gputriage run` and for `gputriage.session()`.

`JobObservers` resolves the device the job is judged for, builds the observer list, starts them before the user's
code and finishes them after it, and fills the process section. Every observer call is guarded: a failing observer
is reported in one line and left out, and never raises into the user's job or notebook. Adding a collector is one
line in `build_observers`.
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import msgspec

from gputriage.collectors.observer import Observer
from gputriage.collectors.runner import Outcome
from gputriage.collectors.usercode import is_user_file, worker_user_where
from gputriage.record import Run
from gputriage.record.process import ProcessSection
from gputriage.textsafe import encode_safely

if TYPE_CHECKING:  # torch is imported only once the job is about to run
    from gputriage.collectors.probe import RunProbe

# Steps the cheap timing hooks watch by default; every probe is off after them and the job runs untouched.
DEFAULT_STEPS = 200
# Exception messages are kept up to this many characters in the record.
MAX_MESSAGE_CHARS = 2000


class ObserveConfig(msgspec.Struct):
    """What to observe. `expect_device` as the user gave it; None: the first available accelerator."""

    expect_device: str | None = None
    steps: int | None = DEFAULT_STEPS
    trace_steps: int | None = None  # `run --trace`: profile this many steps after warm-up
    out_dir: Path | None = None  # where `--trace` writes its profiler trace
    # `run`: the NVML sampler, started before the script (it needs no torch, and a job that never imports torch is
    # sampled too); the observers use it instead of starting one of their own
    gpu_sampler: Observer | None = None
    # no observer that needs torch (a record of how the job ended where torch could not be loaded): the sampler only
    torch_free: bool = False
    distributed: bool = True  # record this process's place in a torchrun job
    preflight: str | None = None  # run --preflight: the stand-in's backing (cpu | meta); None: the real device
    # run --preflight without --steps: the job may end after this many steps, once they lasted long enough
    preflight_min_steps: int | None = None
    # probe the environment (rung 1) in this process at the end; `run` does it in its report worker instead
    environment: bool = True


def new_run(command: str, argv: list[str], expect_device: str | None, preflight: bool = False) -> Run:
    """The record of a job about to run, with the device it is judged for resolved now (see record/device.py); a
    preflight simulates CUDA, so it is judged for cuda."""
    from gputriage.collectors.probe.devices import resolve_expected_device

    resolved = "cuda" if preflight else resolve_expected_device(expect_device)
    return Run(command=command, argv=argv, expect_device=expect_device, resolved_device=resolved)


def build_observers(config: ObserveConfig, judged_device: str) -> list[Observer]:
    """Started in this order, finished in reverse (the probe's hooks come off before the environment probe touches
    torch). Add an observer here with one line."""
    if config.torch_free:
        return [config.gpu_sampler] if config.gpu_sampler is not None else []
    from gputriage.collectors.distributed import DistributedObserver
    from gputriage.collectors.gpu_observer import GpuSamplerObserver
    from gputriage.collectors.probe import RunProbe
    from gputriage.collectors.probe.environment import EnvironmentObserver
    from gputriage.collectors.profiler_window import profiler_observers
    from gputriage.collectors.source_capture import SourceCapture
    from gputriage.collectors.stack_sampler import stack_sampler_observers

    probe = RunProbe(judged_device, steps_limit=config.steps)
    distributed = DistributedObserver() if config.distributed else None
    if distributed is not None:
        probe.window_end_listeners.append(distributed.window_ended)  # its wrappers come out with the probe's
    # A preflight judges neither this machine (rung 1) nor its GPU, if it has one: no environment probe, no NVML.
    environment = config.environment and not config.preflight
    machine: list[Observer] = [
        *([EnvironmentObserver(config.expect_device or judged_device)] if environment else []),
        *([] if config.preflight else [config.gpu_sampler or GpuSamplerObserver()]),
    ]
    return [
        *([distributed] if distributed is not None else []),  # first: finished last, reads the placement
        SourceCapture(),  # finished after every collector whose `where` lines it copies
        *machine,
        *stand_in_observers(config, judged_device, probe),  # the device the job sees: around the probe
        probe,
        *stack_sampler_observers(config.steps, config.trace_steps, probe),
        *profiler_observers(config.trace_steps, config.out_dir, probe),  # --trace: after the probe, finished first
    ]


def stand_in_observers(config: ObserveConfig, judged_device: str, probe: RunProbe) -> list[Observer]:
    """--preflight: CUDA simulated on a stand-in; --expect-device meta: meta tensors readable (placeholders)."""
    if config.preflight is not None:
        from gputriage.collectors.preflight import Backing, Preflight

        backing = Backing(config.preflight)
        return [Preflight(probe, config.steps, backing, min_steps=config.preflight_min_steps)]
    if judged_device == "meta":
        from gputriage.collectors.preflight import MetaStandIn

        return [MetaStandIn()]
    return []  # the stand-ins' modules are not even imported: nothing of them on a real job's start-up


class JobObservers:
    """The observers of one job, around the user's code: `start()` before it, `finish(outcome)` after it."""

    def __init__(self, run: Run, config: ObserveConfig, warn: TextIO | None = None) -> None:
        from gputriage.record.device import judged_device

        self.run = run
        self._warn = warn
        self.observers = build_observers(config, judged_device(run) or "cpu")
        # started already (see ObserveConfig.gpu_sampler): finished with the others, even if they never start
        self._started: list[Observer] = [o for o in self.observers if o is config.gpu_sampler]
        self._finished = False
        self._start_s = 0.0

    def start(self) -> None:
        started = self._started
        self._started = [o for o in self.observers if o in started or self._guarded(o.start)]
        self._start_s = time.perf_counter()

    def finish(self, outcome: Outcome, target: str | None) -> bytes:
        """Fill the process section, then finish every started observer (in reverse), once. Returns the record as
        JSON, every string in it made safe for UTF-8 (see textsafe.py)."""
        if not self._finished:
            self._finished = True
            self.run.process = self.process_section(outcome, target)
            for observer in reversed(self._started):
                self._guarded(observer.finish)
        return encode_safely(self.run)

    @property
    def probe(self) -> RunProbe | None:
        from gputriage.collectors.probe import RunProbe

        return next((o for o in self.observers if isinstance(o, RunProbe)), None)

    def elapsed_s(self) -> float:
        return time.perf_counter() - self._start_s

    def process_section(self, outcome: Outcome, target: str | None) -> ProcessSection:
        section = ProcessSection(
            exit_code=outcome.exit_code, signal=outcome.signal, target=target, wall_s=outcome.wall_s
        )
        exc = crash_origin(outcome.exception)
        if exc is not None and outcome.signal is None:
            section.exception_type = type(exc).__name__
            section.exception_message = _message(exc)
            for observer in self.observers:
                explain = getattr(observer, "explain_crash", None)
                if explain is not None:
                    with contextlib.suppress(Exception):
                        section.crash_where, section.crash_module = explain(exc)
            section.worker_where = worker_user_where(section.exception_message)
        return section

    def _guarded(self, step: Callable[[Run], None]) -> bool:
        """An observer must never take the user's job down; a failing one is reported and left out."""
        try:
            step(self.run)
        except Exception as exc:
            with contextlib.suppress(Exception):
                stream = self._warn if self._warn is not None else sys.stderr
                print(f"gputriage: warning: an observer failed ({type(exc).__name__}: {exc})", file=stream)
            return False
        return True


MAX_CHAIN = 8  # exceptions followed back through a chain; a longer one is not a cleanup's


def crash_origin(exc: BaseException | None) -> BaseException | None:
    """The exception the job really died of. One raised while handling another, by a library's code (Lightning's
    teardown failing after the training step died), is a consequence: the one it was handling is the crash, as the
    first traceback Python prints. A chain the user's own code made (`except KeyError: raise ValueError(...)`, or
    any `raise ... from ...`) is kept as raised."""
    for _ in range(MAX_CHAIN):
        if exc is None:
            return None
        context = exc.__context__
        if context is None or exc.__cause__ is not None or exc.__suppress_context__ or _raised_by_user(exc):
            return exc
        exc = context
    return exc


def _raised_by_user(exc: BaseException) -> bool:
    tb = exc.__traceback__
    if tb is None:
        return True  # nothing says who raised it: keep it
    while tb.tb_next is not None:
        tb = tb.tb_next
    return is_user_file(tb.tb_frame.f_code.co_filename)


def _message(exc: BaseException) -> str:
    """str(exc), which user code may make raise; capped."""
    try:
        text = str(exc)
    except Exception as err:  # an exception whose __str__ raises still gets a record
        text = f"<str() of the exception raised {type(err).__name__}>"
    return text[:MAX_MESSAGE_CHARS]


def torch_facts_now(*, only_if_cuda_is_initialised: bool = False) -> dict[str, Any] | None:
    """torch's own answers (torch_probe.collect) from inside the job, where torch is imported. Mid-job, only where
    asking cannot change CUDA's state: a build without CUDA, or a process that has initialised it already."""
    try:
        import torch

        from gputriage.collectors import torch_probe

        initialised = torch.cuda.is_initialized()  # type: ignore[no-untyped-call]
        if only_if_cuda_is_initialised and torch.version.cuda is not None and not initialised:
            return None
        return torch_probe.collect(init_cuda=False)
    except Exception:
        return None
