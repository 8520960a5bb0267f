"""Run the user's program the way `python script.py` / `python -m pkg.mod` would, inside this process.

`runpy` executes it as `__main__` with the script's `sys.argv` and `sys.path[0]`; stdout and stderr stay the script's.
The outcome carries what Python itself would have done at the end: the exit code, the exception (whose traceback we
print as Python would, without gputriage's frames), or the signal that interrupted it.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType

from gputriage.errors import InputError


@dataclass
class Target:
    """What to run: a script path, or a module name for `-m`."""

    name: str
    args: list[str] = field(default_factory=list)
    is_module: bool = False

    def describe(self) -> str:
        return f"-m {self.name}" if self.is_module else self.name


@dataclass
class Outcome:
    exit_code: int
    exception: BaseException | None = None  # an uncaught exception other than SystemExit
    signal: str | None = None  # SIGINT | SIGTERM
    wall_s: float = 0.0


class StopRun(BaseException):
    """Raised by an observer to end the job on purpose (the preflight's step budget): the run ends as if the script
    had returned, with exit code 0 and no traceback; the user's `finally` blocks run on the way out."""


class Terminated(BaseException):
    """Raised in the main thread on SIGTERM, so the user's `finally` blocks and our report both run."""


def check_target(target: Target) -> None:
    """Fail with one clear line before anything starts, as Python would for a missing script or module."""
    if target.is_module:
        import importlib.util

        sys.path.insert(0, str(Path.cwd()))  # where `python -m` looks first
        try:
            spec = importlib.util.find_spec(target.name)
        except (ImportError, ValueError) as exc:
            raise InputError(f"cannot find module {target.name!r}: {exc}") from exc
        finally:
            sys.path.pop(0)
        if spec is None:
            raise InputError(f"no module named {target.name!r} (run from the folder that holds it, or install it)")
    elif not Path(target.name).is_file():
        raise InputError(f"can't open file {target.name!r}: no such file")


def run_target(target: Target) -> Outcome:
    """Execute the target in this process and report how it ended. Never raises for the user's errors."""
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    previous_term = _install_sigterm()
    start_s = time.perf_counter()
    try:
        code = _execute(target)
        outcome = Outcome(exit_code=code)
    except SystemExit as exc:
        outcome = Outcome(exit_code=_exit_code_of(exc))
    except KeyboardInterrupt as exc:
        _print_traceback(exc, target)
        outcome = Outcome(exit_code=130, exception=exc, signal="SIGINT")
    except StopRun:
        outcome = Outcome(exit_code=0)
    except Terminated as exc:
        outcome = Outcome(exit_code=128 + signal.SIGTERM, exception=exc, signal="SIGTERM")
    except BaseException as exc:
        _print_traceback(exc, target)
        outcome = Outcome(exit_code=1, exception=exc)
    finally:
        _restore_sigterm(previous_term)
        sys.argv = saved_argv
        if saved_path0 is not None:
            sys.path[0] = saved_path0
    outcome.wall_s = time.perf_counter() - start_s
    sys.stdout.flush()
    return outcome


def _execute(target: Target) -> int:
    if target.is_module:
        sys.argv = [target.name, *target.args]  # runpy replaces argv[0] with the module's file
        sys.path[0] = str(Path.cwd())
        runpy.run_module(target.name, run_name="__main__", alter_sys=True)
    else:
        path = str(Path(target.name))
        sys.argv = [path, *target.args]
        sys.path[0] = str(Path(path).resolve().parent)
        runpy.run_path(path, run_name="__main__")
    return 0


def _exit_code_of(exc: SystemExit) -> int:
    """Python's rules: None -> 0, an int -> itself, anything else is printed to stderr -> 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code
    print(exc.code, file=sys.stderr)
    return 1


def _print_traceback(exc: BaseException, target: Target) -> None:
    """Print as Python would: starting at the user's code, through sys.excepthook (which the script may have set)."""
    tb = _user_traceback(exc.__traceback__, target)
    exc.__traceback__ = tb  # Python 3.11's default hook prints the exception's own traceback, not the argument
    sys.stdout.flush()
    try:
        sys.excepthook(type(exc), exc, tb)
    except Exception:  # a broken custom excepthook: fall back to the default printer
        traceback.print_exception(type(exc), exc, tb)
    sys.stderr.flush()


def _user_traceback(tb: TracebackType | None, target: Target) -> TracebackType | None:
    """The traceback as Python would print it without gputriage: runpy's and gputriage's frames above the user's
    first frame are dropped, and so are gputriage's frames further in (the probes' wrappers, the preflight's
    stand-in, which raises CUDA's errors from its own dispatch where CUDA raises from C++)."""
    ours = (__name__, "runpy")
    while tb is not None and tb.tb_next is not None and tb.tb_frame.f_globals.get("__name__") in ours:
        tb = tb.tb_next
    kept = [entry for entry in _entries(tb) if not _is_gputriage(entry)]
    if tb is None or not kept or kept[0] is not tb:
        return tb
    for entry, following in zip(kept, [*kept[1:], None], strict=True):
        entry.tb_next = following
    return tb


def _entries(tb: TracebackType | None) -> list[TracebackType]:
    entries = []
    while tb is not None:
        entries.append(tb)
        tb = tb.tb_next
    return entries


def _is_gputriage(entry: TracebackType) -> bool:
    return str(entry.tb_frame.f_globals.get("__name__", "")).startswith("gputriage.")


def _install_sigterm() -> object:
    if not _is_main_thread():
        return None
    owner_pid = os.getpid()

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        if os.getpid() != owner_pid:  # a forked worker inherited this handler: die as it would have
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        raise Terminated

    return signal.signal(signal.SIGTERM, on_sigterm)


def _restore_sigterm(previous: object) -> None:
    if previous is not None and _is_main_thread():
        signal.signal(signal.SIGTERM, previous)  # type: ignore[arg-type]


def _is_main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def die_by_signal(name: str) -> None:
    """Re-deliver a signal with its default action, so the parent sees the same death as without gputriage."""
    signum = getattr(signal, name)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
