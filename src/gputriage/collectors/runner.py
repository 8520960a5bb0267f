"""Run the user's program the way `python script.py` / `python -m pkg.mod` / `python folder` would, in this process.

The script runs in a fresh `__main__` module that stays `sys.modules["__main__"]` after it ends (pickle finds the
classes it defined, in the user's atexit handlers too), with the absolute path Python gives it (tracebacks name the
same file), its own `sys.argv` and `sys.path[0]`; `-m` and folders go through runpy's `_run_module_as_main`, as
Python's own `-m` does, with Python's messages and exit codes when the module is missing. stdout and stderr stay the
script's. The outcome carries what Python itself would have done at the end: the exit code, the exception (whose
traceback is printed as Python would, without gputriage's frames), or the signal that interrupted it.

`JobSignals` closes the life cycle at every edge: SIGINT and SIGTERM that land while gputriage's own code runs (before
the script, or while the report is written) are held until the report is out, then delivered; during the script,
SIGINT is Python's KeyboardInterrupt and SIGTERM ends the job where it stands (as it would without gputriage: no
`finally` block of the user's runs) once the report is written.
"""

from __future__ import annotations

import builtins
import contextlib
import importlib.machinery
import importlib.util
import marshal
import os
import runpy
import signal
import sys
import threading
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

import msgspec

from gputriage.collectors.patching import is_dispatch_file
from gputriage.collectors.usercode import is_own_file
from gputriage.recursion import offset_job_limits


class Target(msgspec.Struct):
    """What to run: a script path (or a folder / zip file with a __main__.py), or a module name for `-m`."""

    name: str
    args: list[str] = msgspec.field(default_factory=list)
    is_module: bool = False

    def describe(self) -> str:
        return f"-m {self.name}" if self.is_module else self.name


class Outcome(msgspec.Struct):
    exit_code: int
    exception: BaseException | None = None  # an uncaught exception other than SystemExit
    signal: str | None = None  # SIGINT | SIGTERM
    wall_s: float = 0.0


class StopRun(BaseException):
    """Raised by an observer to end the job on purpose (the preflight's step budget): the run ends as if the script
    had returned, with exit code 0 and no traceback; the user's `finally` blocks run on the way out."""


class LaunchError(Exception):
    """The target cannot be started, as Python would say it: `message` on stderr, then exit `exit_code`."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def check_target(target: Target) -> None:
    """Raise LaunchError, before anything starts, where Python would refuse to start the script.

    For `-m`, only the top-level package is looked for here (finding a submodule would run its packages' __init__
    before the observers start); a missing submodule is reported by runpy at run time, as Python does.
    """
    if target.is_module:
        top = target.name.partition(".")[0]
        sys.path.insert(0, str(Path.cwd()))  # where `python -m` looks first
        try:
            found = importlib.util.find_spec(top) is not None
        except (ImportError, ValueError):
            found = False
        finally:
            sys.path.pop(0)
        if not found:
            raise LaunchError(f"No module named {top}", 1)
        return
    path = Path(target.name)
    if not path.exists():
        raise LaunchError(f"can't open file {_script_path(target.name)!r}: [Errno 2] No such file or directory", 2)
    if path.is_dir() and not (path / "__main__.py").exists() and not (path / "__main__.pyc").exists():
        raise LaunchError(f"can't find '__main__' module in {target.name!r}", 1)


def run_target(target: Target, signals: JobSignals | None = None) -> Outcome:
    """Execute the target in this process and report how it ended. Never raises for the user's errors."""
    saved_argv, saved_path0 = sys.argv[:], sys.path[0] if sys.path else None
    saved_orig = getattr(sys, "orig_argv", None)
    if saved_orig is not None:
        sys.orig_argv = _orig_argv(saved_orig, target)
    start_s = time.perf_counter()
    cut_short = False
    try:
        if signals is not None:
            signals.enter_script()  # inside the try: a signal held during start-up is delivered here
        _execute(target)
        outcome = Outcome(exit_code=0)
    except SystemExit as exc:
        outcome = Outcome(exit_code=_exit_code_of(exc))
    except KeyboardInterrupt as exc:
        _print_traceback(exc)
        outcome = Outcome(exit_code=130, exception=exc, signal="SIGINT")
    except StopRun:
        outcome = Outcome(exit_code=0)
        cut_short = True  # gputriage ended the job: its threads may wait for a loop that will not come back
    except BaseException as exc:
        _print_traceback(exc)
        outcome = Outcome(exit_code=1, exception=exc)
    finally:
        if not cut_short:
            join_job_threads()  # still the script's time: Ctrl-C and SIGTERM keep Python's meaning while it waits
        if signals is not None:
            signals.leave_script()
        sys.argv = saved_argv
        if saved_orig is not None:
            sys.orig_argv = saved_orig
        if saved_path0 is not None and sys.path:
            sys.path[0] = saved_path0
    outcome.wall_s = time.perf_counter() - start_s
    flush_std_streams()
    return outcome


def _orig_argv(orig: list[str], target: Target) -> list[str]:
    """sys.orig_argv as `python script.py args` would have it: the interpreter and its own options as given, then
    the script (or `-m module`) and its arguments, not gputriage's command line."""
    at = next((i for i in range(len(orig) - 1) if orig[i] == "-m" and orig[i + 1] == "gputriage"), None)
    interpreter = orig[:at] if at is not None else orig[:1]
    job = ["-m", target.name] if target.is_module else [target.name]
    return [*interpreter, *job, *target.args]


def join_job_threads() -> None:
    """Wait for the job's non-daemon threads, as Python does once the main script has ended and before its atexit
    handlers: the job is not over until they end (their output, their files, a training loop run in a thread), so
    the report waits too, and Python's own wait at exit then finds them done.

    Python first runs the `threading` atexit callbacks, which tell a ThreadPoolExecutor's idle workers to stop; those
    callbacks are the process's and are left to Python's exit (`run` may be called inside another program), so the
    executors' workers are not waited for here: waiting would hang on an executor the job never shut down. A failure
    (Ctrl-C while waiting) is reported as Python reports it, and ignored."""
    try:
        while True:
            pending = _job_threads()
            if not pending:
                return
            for thread in pending:
                thread.join()
    except BaseException:  # KeyboardInterrupt while waiting: as in Python, reported and not raised
        flush_std_streams()
        with contextlib.suppress(Exception):
            print(f"Exception ignored in: {threading!r}", file=sys.stderr)
            traceback.print_exc()
            sys.stderr.flush()


def _job_threads() -> list[threading.Thread]:
    executor_threads = getattr(sys.modules.get("concurrent.futures.thread"), "_threads_queues", {})
    me = threading.current_thread()
    return [
        t
        for t in threading.enumerate()
        if t is not me and t is not threading.main_thread() and not t.daemon and t not in executor_threads
    ]


def _execute(target: Target) -> None:
    # the script's <module> runs this many frames deeper than under `python`: the recursion limit is raised by them,
    # or a recursion that fits under python ends in RecursionError (15 frames fewer at the script's top level). The
    # limit also counts calls through C (our exec, the console script's entry): two more, at most one too many.
    offset_job_limits(_frames_below() + _C_CALLS_BELOW)  # and the job's own sys.setrecursionlimit(n) keeps it
    if target.is_module:
        sys.argv = [target.name, *target.args]  # runpy replaces argv[0] with the module's file
        _fresh_main()
        _set_path0(str(Path.cwd()))  # where `python -m` looks first
        runpy._run_module_as_main(target.name, alter_argv=True)  # type: ignore[attr-defined]
        return
    path = _script_path(target.name)
    sys.argv = [target.name, *target.args]
    if Path(path).is_dir() or _is_zip(path):
        # A folder or a zip with __main__.py: Python puts it first on sys.path and runs its __main__ module.
        _fresh_main()
        _set_path0(path)
        runpy._run_module_as_main("__main__", alter_argv=False)  # type: ignore[attr-defined]
        return
    _set_path0(str(Path(path).resolve().parent))  # Python: the folder of the script, its symlinks resolved
    main = _fresh_main(path)
    code = _code_of(path)
    exec(code, main.__dict__)


def _script_path(name: str) -> str:
    """The script's path as Python names it (`__file__`, tracebacks): the working directory joined to a relative
    path as given, not normalised and symlinks not resolved."""
    return str(Path.cwd() / name)


_C_CALLS_BELOW = 2


def _frames_below() -> int:
    """gputriage's frames under _execute, _execute's own included (those of `python -m`'s runpy come after it)."""
    frame: types.FrameType | None = sys._getframe(1)
    count = 0
    while frame is not None:
        count += 1
        frame = frame.f_back
    return count


def _set_path0(entry: str) -> None:
    if getattr(sys.flags, "safe_path", False):  # `python -P` / PYTHONSAFEPATH: no folder of the script's on sys.path
        return
    if sys.path:
        sys.path[0] = entry
    else:
        sys.path.append(entry)
    _unshadow(entry)


def _unshadow(entry: str) -> None:
    """Python finds `import X` in the script's folder first, but never looks again for a name in sys.modules: a
    module gputriage loaded (msgspec, pynvml, tokenize, ...) whose name the folder also holds is taken out of
    sys.modules, so the job imports its own file as under plain python (a trial: a vendored `pynvml.py` beside the
    script was silently gputriage's). gputriage's own code keeps the module objects it bound."""
    launch = sys.modules.get("gputriage.launch")
    startup: frozenset[str] | None = getattr(launch, "STARTUP_MODULES", None)
    if startup is None:
        return  # not started by gputriage's own command (the session API runs inside the user's process)
    own = _importable_names(entry)
    loaded = {name for name in sys.modules if "." not in name and name not in startup}
    for name in loaded & own:
        for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
            del sys.modules[key]


def _importable_names(folder: str) -> set[str]:
    """The top-level names `import` finds in a folder: modules (`x.py`, an extension `x.cpython-311-....so`) and
    packages (`x/__init__.py`)."""
    names: set[str] = set()
    with contextlib.suppress(OSError), os.scandir(folder) as entries:
        for item in entries:
            stem = item.name.split(".", 1)[0]
            if item.name.endswith((".py", ".so", ".pyd")) and stem.isidentifier():
                names.add(stem)
            elif item.name.isidentifier() and (Path(item.path) / "__init__.py").exists():
                names.add(item.name)
    return names - {"gputriage", "__main__"}


def _fresh_main(path: str | None = None) -> types.ModuleType:
    """A new `__main__` module, as Python makes it for a script, installed for good in sys.modules."""
    main = types.ModuleType("__main__")
    main.__dict__["__builtins__"] = builtins
    if path is not None:
        main.__file__ = path
        main.__dict__["__cached__"] = None
        main.__loader__ = importlib.machinery.SourceFileLoader("__main__", path)
        main.__package__ = None
        main.__spec__ = None
        setattr(main, "__annotations__", {})  # noqa: B010  (a module's own attribute, as Python sets it)
    sys.modules["__main__"] = main
    return main


def _code_of(path: str) -> types.CodeType:
    """The script's code object, compiled as Python compiles a main script (its encoding cookie, a BOM, a .pyc)."""
    data = Path(path).read_bytes()
    if data[:4] == importlib.util.MAGIC_NUMBER:
        code = marshal.loads(data[16:])
        if isinstance(code, types.CodeType):
            return code
    return compile(data, path, "exec", dont_inherit=True)


def _is_zip(path: str) -> bool:
    import zipfile

    try:
        return zipfile.is_zipfile(path)
    except OSError:
        return False


def _exit_code_of(exc: SystemExit) -> int:
    """Python's rules: None -> 0, an int -> itself, anything else is printed to stderr -> 1."""
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return int(exc.code)  # `sys.exit(not ok)`: a bool is an int, and the record holds an int (True is 1)
    with contextlib.suppress(Exception):
        print(exc.code, file=sys.stderr)
    return 1


def flush_std_streams() -> None:
    """Flush the script's stdout and stderr; a stream the script closed or replaced by something odd is left alone."""
    for stream in (getattr(sys, "stdout", None), getattr(sys, "stderr", None)):  # `del sys.stdout` in the job
        with contextlib.suppress(Exception):
            stream.flush()  # type: ignore[union-attr]  # None: suppressed, as a closed stream


def _print_traceback(exc: BaseException) -> None:
    """Print as Python would: through sys.excepthook (which the script may have set), without gputriage's frames."""
    without_ours(exc)
    flush_std_streams()
    # as the interpreter's own printer does first: an atexit handler or a post-mortem debugger reads them
    sys.last_type, sys.last_value, sys.last_traceback = type(exc), exc, exc.__traceback__
    if sys.version_info >= (3, 12):
        sys.last_exc = exc
    try:
        sys.excepthook(type(exc), exc, exc.__traceback__)
    except Exception as hook_error:  # a broken custom excepthook: said, then the original, as Python prints them
        without_ours(hook_error)
        if hook_error.__context__ is exc:  # raised while gputriage held it, not while the hook handled it
            hook_error.__context__ = None
        with contextlib.suppress(Exception):
            print("Error in sys.excepthook:", file=sys.stderr)
            traceback.print_exception(type(hook_error), hook_error, hook_error.__traceback__)
            print("\nOriginal exception was:", file=sys.stderr)
            traceback.print_exception(type(exc), exc, exc.__traceback__)
    with contextlib.suppress(Exception):
        sys.stderr.flush()


def without_ours(exc: BaseException) -> None:
    """Take gputriage's frames out of the traceback of `exc` and of every exception chained to it.

    Python's own launch frames are kept: `python -m` shows runpy's two frames, and so does the run under gputriage.
    """
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        current = todo.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        with contextlib.suppress(Exception):
            current.__traceback__ = _filtered(current.__traceback__)
        todo.extend([current.__cause__, current.__context__])
        todo.extend(getattr(current, "exceptions", None) or [])  # an ExceptionGroup's members


def _filtered(tb: TracebackType | None) -> TracebackType | None:
    """The traceback without gputriage's frames, and without the runs of torch's dispatch frames right before or
    after a frame of ours inside the job's stack (torch's wrapper of our mode's handler before it, the op it passes on
    after it: they exist only because of our mode). Our launcher's frames, before the job's first, make no torch frame
    ours: optimizer.load_state_dict's torch/_compile.py and eval_frame.py frames were dropped from every uncaught
    traceback."""
    frames: list[TracebackType] = []
    while tb is not None:
        frames.append(tb)
        tb = tb.tb_next
    names = [f.tb_frame.f_code.co_filename for f in frames]
    own = [is_own_file(name) for name in names]
    dispatch = [is_dispatch_file(name) for name in names]
    first_job = next((i for i, mine in enumerate(own) if not mine), len(frames))
    beside_ours = [False] * len(frames)  # a run of dispatch frames that touches a frame of ours in the job's stack
    for i in range(first_job, len(frames)):
        if not own[i]:
            continue
        for step in (-1, 1):
            j = i + step
            while first_job <= j < len(frames) and dispatch[j] and not own[j]:
                beside_ours[j] = True
                j += step
    kept = [f for i, f in enumerate(frames) if not own[i] and not beside_ours[i]]
    raised_by_us = bool(own) and own[-1]
    if not raised_by_us and len(kept) > 1 and _wraps_a_hidden_handler(kept):
        # the traceback ends in torch._disable_dynamo's wrapper of a handler whose frames our mode hid (the op's own
        # error passed on): the wrapper is ours too
        while kept and is_dispatch_file(kept[-1].tb_frame.f_code.co_filename):
            kept.pop()
    if raised_by_us:  # the stand-in raised CUDA's error: the traceback ends where CUDA's would
        while kept and is_dispatch_file(kept[-1].tb_frame.f_code.co_filename):
            kept.pop()
    head: TracebackType | None = None
    for entry in reversed(kept):
        head = TracebackType(head, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return head


def _wraps_a_hidden_handler(kept: list[TracebackType]) -> bool:
    """The traceback ends in a run of torch's dispatch frames that begins with torch/_compile.py's wrapper: nothing
    it wrapped is left below it, so what it wrapped was a handler of ours whose frames were hidden."""
    tail = len(kept)
    while tail > 0 and is_dispatch_file(kept[tail - 1].tb_frame.f_code.co_filename):
        tail -= 1
    return tail < len(kept) and kept[tail].tb_frame.f_code.co_filename.replace("\\", "/").endswith("torch/_compile.py")


# --- signals ----------------------------------------------------------------------------------------------------------
SIGNALS = (signal.SIGINT, signal.SIGTERM)


class JobSignals:
    """SIGINT and SIGTERM over the job's life: held while gputriage runs, Python's own meaning while the script runs.

    `on_terminate` is called (in the main thread, from the signal handler) when SIGTERM lands while the script runs:
    it writes the report; the process then dies of SIGTERM where it stood.
    """

    def __init__(self, on_terminate: Callable[[], None]) -> None:
        self._on_terminate = on_terminate
        self._owner_pid = os.getpid()
        self._initial: dict[int, Any] = {}
        self._replaced: dict[int, Any] = {}  # signal -> the handler `leave_script` replaced by ours
        self._held: list[int] = []
        self._installed = False
        self._terminating = threading.Event()
        self._watch = StuckMainWatch(self._terminate_from_watch, self._terminating, self._sigterm_is_ours)

    def install(self) -> None:
        """Hold the signals from now on (before anything of the job starts). Main thread only."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            self._initial[signum] = signal.getsignal(signum)
            if self._initial[signum] is not signal.SIG_IGN:
                signal.signal(signum, self._hold)
        self._installed = True
        if self._initial[signal.SIGTERM] is signal.SIG_DFL:
            self._watch.start()

    @property
    def held(self) -> str | None:
        return signal.Signals(self._held[0]).name if self._held else None

    def enter_script(self) -> None:
        """The script starts: SIGINT raises KeyboardInterrupt as in Python, SIGTERM ends the job with a report."""
        if not self._installed:
            return
        if self._initial.get(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, self._initial[signal.SIGINT])
        if self._initial.get(signal.SIGTERM) is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, self._terminate)
            self._watch.armed = True
        if self._held:  # landed while gputriage was starting: deliver it now, as if at the script's first line
            held, self._held = self._held, []
            for signum in held:
                os.kill(os.getpid(), signum)

    def leave_script(self) -> None:
        """The script has ended: hold the signals again while the report is written (unless the script installed its
        own handler, which keeps its meaning)."""
        self._watch.armed = False
        if not self._installed:
            return
        for signum in SIGNALS:
            current = signal.getsignal(signum)
            if current in (signal.default_int_handler, signal.SIG_DFL, self._terminate):
                self._replaced[signum] = self._initial[signum] if current == self._terminate else current
                signal.signal(signum, self._hold)

    def restore(self) -> None:
        """gputriage is done: the signals mean again what they meant when the script ended (Python then joins the
        script's threads and runs its atexit handlers, where a SIGTERM must kill and a SIGINT interrupt)."""
        if threading.current_thread() is not threading.main_thread():
            return
        self._watch.stop()
        for signum, handler in self._replaced.items():
            with contextlib.suppress(Exception):
                signal.signal(signum, handler)
        self._replaced.clear()

    def deliver_held(self) -> None:
        """The report is written: end as the job would have for a signal that landed meanwhile."""
        if self._held:
            end_by_signal(signal.Signals(self._held[0]).name)

    def _hold(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._owner_pid:  # a forked worker inherited this handler: die as it would have
            _default_death(signum)
        if signum in self._held:  # the same signal twice while the report is written: the user insists
            die_by_signal(signal.Signals(signum).name)
        self._held.append(signum)

    def _terminate(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._owner_pid:
            _default_death(signum)
        if not self._sigterm_is_ours():
            # called by the script's own handler, which kept ours as "the previous handler" to chain to (Lightning's
            # signal connector, submitit): under plain Python that was SIG_DFL, which nobody calls, and the script's
            # graceful stop (a checkpoint, exit 0) goes on
            return
        if self._terminating.is_set():
            return  # the watch thread is writing the report; it ends the process
        self._terminating.set()
        for held in SIGNALS:  # from here on gputriage's code runs: hold everything
            signal.signal(held, self._hold)
        with contextlib.suppress(BaseException):
            self._on_terminate()
        die_by_signal("SIGTERM")

    def _sigterm_is_ours(self) -> bool:
        return bool(signal.getsignal(signal.SIGTERM) == self._terminate)

    def _terminate_from_watch(self) -> None:
        """SIGTERM while the main thread is stuck in C code (its handler cannot run): the report from this thread."""
        with contextlib.suppress(BaseException):
            self._on_terminate()
        flush_std_streams()
        _die_from_any_thread(signal.SIGTERM)


class StuckMainWatch:
    """Sees a SIGTERM even while the main thread cannot run Python code: stuck in a collective that never returns
    (a dead peer, an NCCL hang), which is exactly when a scheduler or torchrun stops a job and a report is wanted.

    Python's signal handlers run in the main thread, between bytecodes; a C call that waits, and retries on EINTR,
    keeps them from running. The C-level handler still writes the signal's number to the wakeup fd, so a thread that
    reads it knows. If the main thread's handler has not started within GRACE_S, the thread writes the report and
    ends the process. Not started when the job's code (asyncio) or anyone else already set a wakeup fd; a forked
    child (a DataLoader worker) forgets the fd, so its signals are its own.
    """

    GRACE_S = 2.0

    def __init__(
        self, on_sigterm: Callable[[], None], handled: threading.Event, ours: Callable[[], bool] = lambda: True
    ) -> None:
        self._on_sigterm = on_sigterm
        self._handled = handled
        self._ours = ours  # SIGTERM still means "report and die": the script has not installed its own handler
        self._fds: tuple[int, int] | None = None
        self.armed = False  # while the script runs

    def start(self) -> None:
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        try:
            previous = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except (ValueError, OSError):
            previous = None
        if previous != -1:  # not ours to take (or not possible here)
            if previous is not None:
                signal.set_wakeup_fd(previous)
            os.close(read_fd)
            os.close(write_fd)
            return
        self._fds = (read_fd, write_fd)
        os.register_at_fork(after_in_child=self._forget)
        threading.Thread(target=self._watch, name="gputriage-signal-watch", daemon=True).start()

    def stop(self) -> None:
        self.armed = False
        if self._fds is None:
            return
        with contextlib.suppress(ValueError, OSError):
            current = signal.set_wakeup_fd(-1)
            if current != self._fds[1]:
                signal.set_wakeup_fd(current)  # someone else's since: leave it

    def _forget(self) -> None:
        if self._fds is not None:
            with contextlib.suppress(ValueError, OSError):
                current = signal.set_wakeup_fd(-1)
                if current != self._fds[1]:
                    signal.set_wakeup_fd(current)
            self._fds = None

    def _watch(self) -> None:
        assert self._fds is not None
        read_fd = self._fds[0]
        while True:
            try:
                data = os.read(read_fd, 64)
            except OSError:
                return
            if not data:
                return
            if signal.SIGTERM in data and self.armed and self._ours() and not self._handled.wait(self.GRACE_S):
                if self._handled.is_set() or not self.armed or not self._ours():
                    continue
                self._handled.set()
                self._on_sigterm()


def _die_from_any_thread(signum: int) -> None:
    """Die of `signum` from a thread other than the main one, where `signal.signal` is refused: reset its
    disposition in the C library, then send it."""
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL(None).signal(signum, 0)  # 0 is SIG_DFL
    with contextlib.suppress(Exception):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
    time.sleep(1.0)
    os._exit(128 + signum)


def _default_death(signum: int) -> None:
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)


def end_by_signal(name: str) -> None:
    """End the process as the job would have for this signal; the report is written.

    SIGINT: Python ends a script that a KeyboardInterrupt ended with its normal shutdown (the non-daemon threads, the
    atexit handlers, every file flushed and closed), then dies of SIGINT. It does that only for a KeyboardInterrupt
    that reaches the top of the program, of that exact type: so one is raised, marked for `cli.main` to let through,
    with the excepthook silenced (the traceback was printed already). SIGTERM: its default, at once, no clean-up.
    """
    if name == "SIGINT":
        sys.excepthook = _quiet_excepthook
        interrupt = KeyboardInterrupt()
        interrupt.exit_as_python = True  # type: ignore[attr-defined]
        raise interrupt
    die_by_signal(name)


def _quiet_excepthook(*args: object) -> None:
    return None


def die_by_signal(name: str) -> None:
    """Re-deliver a signal with its default action now, so the parent sees the same death as without gputriage."""
    signum = getattr(signal, name)
    flush_std_streams()
    signal.signal(signum, signal.SIG_DFL)
    with contextlib.suppress(Exception):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
    os.kill(os.getpid(), signum)
    time.sleep(1.0)  # the signal is delivered on return from kill; this is only for a process that blocks it
    os._exit(128 + signum)
