"""Work spread over processes, the calling process working too; results in the jobs' order.

Fork where it is safe (Linux, and no other thread alive in this process: the `trace` command), so a worker costs
milliseconds instead of a fresh interpreter's imports; spawn otherwise. Spawning re-imports the caller's __main__,
which fails for code read from stdin or a script without a main guard; the work then runs here, slower but with the
same result.

Forked workers and the calling process take the jobs one at a time from one queue (a pipe of job numbers; a read of
4 bytes from a pipe is atomic), so a process that is slower (a worker pays copy-on-write faults, a range of GPU
events decodes slower than one of CPU events, the caller has its own work first) simply takes fewer jobs. Each worker
sends all its results at once, when the queue is empty, and ends without waiting for anything: nobody waits for its
memory to be torn down, and no thread of the pool is left alive (a later fork stays safe).

Workers never outlive the work: when this process stops waiting (an error, Ctrl-C, SIGTERM turned into an exception
by the command), they are terminated, and on Linux each one dies with this process even if it is killed outright
(PR_SET_PDEATHSIG). A worker left behind sat blocked forever on the pipe of results nobody read. A worker that dies
(the OOM killer) loses only its own jobs: they are done here instead.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    import multiprocessing.context

_Job = TypeVar("_Job")
_Result = TypeVar("_Result")
_CLAIM = struct.Struct("<I")
_PIPE_BUF = 4096  # POSIX: writes up to this size go into a pipe whole; more job numbers are written in turns
_RESULTS_PIPE_BYTES = 1 << 20
_unreaped: list[int] = []  # forked workers that sent their results and are ending; reaped without waiting


def workers_for(jobs: int | None) -> int:
    """The processes `--jobs` asks for: the count given, else one per CPU core."""
    return jobs if jobs is not None else (os.cpu_count() or 1)


def in_processes(fn: Callable[[_Job], _Result], jobs: list[_Job], workers: int) -> list[_Result]:
    """Map `fn` over `jobs` with up to `workers` processes (this one included); results in the jobs' order."""
    if workers <= 1 or len(jobs) <= 1:
        return [fn(job) for job in jobs]
    started = start(fn, jobs, workers)
    if started is not None:
        return started.finish()
    ctx = _spawn_context()
    if ctx is None:
        return [fn(job) for job in jobs]
    return _spawned(fn, jobs, workers, ctx)


def start(fn: Callable[[_Job], _Result], jobs: list[_Job], workers: int) -> Started[_Job, _Result] | None:
    """Fork the workers now and let them take jobs; this process joins in at `finish()`, after whatever else it has
    to do (the imports `trace` needs next: they run while the workers read). None where forking is not safe."""
    if workers <= 1 or len(jobs) <= 1 or not can_fork():
        return None
    return Started(fn, jobs, min(workers, len(jobs)))


# ---- forked workers, one queue of jobs


class Started(Generic[_Job, _Result]):
    """Forked workers taking jobs from one queue; `finish()` takes the rest here and gathers every result."""

    def __init__(self, fn: Callable[[_Job], _Result], jobs: list[_Job], processes: int) -> None:
        _reap()
        self.fn, self.jobs = fn, jobs
        self._children: list[tuple[int, int]] = []
        self._claims_read, claims_write = os.pipe()
        _widen(claims_write)  # 262,144 job numbers fit: writing them never waits for a worker to take one
        parent = os.getpid()
        try:
            with _blocked_signals():  # a signal between fork and the worker's set-up would run the caller's handler
                for _ in range(processes - 1):
                    results_read, results_write = os.pipe()
                    _widen(results_write)
                    pid = os.fork()
                    if pid == 0:  # the worker: never returns
                        os.close(results_read)
                        os.close(claims_write)
                        _work(fn, jobs, self._claims_read, results_write, parent)
                    os.close(results_write)
                    self._children.append((pid, results_read))
            _enqueue(claims_write, len(jobs))  # after the forks: every process holds the read end
        except BaseException:
            self.abandon()
            raise
        finally:
            os.close(claims_write)

    def finish(self) -> list[_Result]:
        """Take jobs here until none is left, then each worker's results; results in the jobs' order. A job a dead
        worker had taken is done here; an error is raised as the jobs' order meets it."""
        try:
            done: dict[int, tuple[bool, Any]] = {}
            for i in _claims(self._claims_read):
                done[i] = (True, self.fn(self.jobs[i]))  # an error here is raised at once
            for pid, results_read in self._children:
                done.update(_receive(results_read))
                _unreaped.append(pid)
            self._children = []
        finally:
            self.abandon()
        return [_outcome(done[i]) if i in done else self.fn(self.jobs[i]) for i in range(len(self.jobs))]

    def abandon(self) -> None:
        """End the workers whose results are not wanted (an error here, Ctrl-C) and close every pipe."""
        _stop(self._children)
        self._children = []
        if self._claims_read >= 0:
            os.close(self._claims_read)
            self._claims_read = -1
        _reap()


def _widen(fd: int) -> None:
    """A pipe holds 64 KiB, so 16 MiB of results took 256 turns between the two processes (80-110 ms); at 1 MiB (the
    most an unprivileged process may ask for on Linux) it takes 16 (30 ms)."""
    with contextlib.suppress(OSError, AttributeError):
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), _RESULTS_PIPE_BYTES)


def _enqueue(fd: int, count: int) -> None:
    data = b"".join(_CLAIM.pack(i) for i in range(count))
    view = memoryview(data)
    while view:  # a pipe holds 64 KiB: workers start claiming while the rest is written
        written = os.write(fd, view[:_PIPE_BUF])
        view = view[written:]


def _claims(fd: int) -> Iterator[int]:
    while len(raw := os.read(fd, _CLAIM.size)) == _CLAIM.size:
        yield _CLAIM.unpack(raw)[0]


def _attempt(fn: Callable[[_Job], _Result], job: _Job) -> tuple[bool, Any]:
    try:
        return True, fn(job)
    except Exception as exc:  # sent to the caller, which raises it in the jobs' order
        return False, exc


def _outcome(attempt: tuple[bool, Any]) -> Any:
    ok, value = attempt
    if not ok:
        raise value
    return value


def _work(fn: Callable[[_Job], _Result], jobs: list[_Job], claims: int, results: int, parent: int) -> None:
    """In a forked worker: take jobs until the queue is empty, send every result in one pickle, end at once."""
    code = 1
    try:
        _worker_start(parent)
        done = {}
        for i in _claims(claims):
            done[i] = _attempt(fn, jobs[i])
            if not done[i][0]:
                break  # the caller raises it (or an earlier job's error) once every process is done
        with os.fdopen(results, "wb") as out:
            pickle.dump(done, out, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0
    finally:  # whatever happened, this process never goes back into the caller's code
        os._exit(code)  # no atexit handlers, no flush of the caller's buffers, no teardown to wait for


def _receive(fd: int) -> dict[int, tuple[bool, Any]]:
    """A worker's results; nothing when it died before sending them (its jobs are done here instead)."""
    with os.fdopen(fd, "rb") as stream:
        try:
            received: dict[int, tuple[bool, Any]] = pickle.load(stream)
        except (EOFError, pickle.UnpicklingError):
            return {}
    return received


@contextlib.contextmanager
def _blocked_signals() -> Iterator[None]:
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    every = signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, every)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def _stop(children: list[tuple[int, int]]) -> None:
    """Workers whose results are not wanted (an error here, Ctrl-C): end them and close their pipes."""
    for pid, fd in children:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(OSError):
            os.close(fd)
        _unreaped.append(pid)


def _reap() -> None:
    """Collect the exit status of workers that have ended, without waiting for the others (a zombie costs nothing,
    and the ones left when this process exits are reaped by the system)."""
    for pid in list(_unreaped):
        try:
            ended, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            ended = pid
        if ended:
            _unreaped.remove(pid)


def _worker_start(parent: int) -> None:
    """In each worker: SIGTERM and SIGHUP end it at once (the parent cleans up), and it dies with its parent."""
    for signum in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
    if sys.platform == "linux":
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # the parent died before that took effect
        os._exit(1)


def can_fork() -> bool:
    """Whether workers can be forked: on Linux, from a process with no other thread alive."""
    return sys.platform == "linux" and threading.active_count() == 1


# ---- spawned workers (another thread is alive: run --trace inside a job, the API in a threaded program)


def _spawned(
    fn: Callable[[_Job], _Result], jobs: list[_Job], workers: int, ctx: multiprocessing.context.BaseContext
) -> list[_Result]:
    # Imported here: one process (a small trace, --jobs 1) and the forked path do not pay their 20 ms.
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    try:
        size = min(workers - 1, len(jobs) - 1)
        with ProcessPoolExecutor(size, mp_context=ctx, initializer=_worker_start, initargs=(os.getpid(),)) as pool:
            try:
                futures = [pool.submit(fn, job) for job in jobs[1:]]
                first = fn(jobs[0])
                return [first, *(f.result() for f in futures)]
            except BaseException:
                _stop_pool(pool)  # their results are not wanted: do not wait for them
                raise
    except BrokenProcessPool:  # a worker died (the OOM killer): the work is done here instead
        return [fn(job) for job in jobs]


def _stop_pool(pool: object) -> None:
    # ProcessPoolExecutor gained terminate_workers() only in Python 3.14; before it, its processes are a private dict.
    processes = getattr(pool, "_processes", None) or {}
    for process in list(processes.values()):
        with contextlib.suppress(Exception):
            process.terminate()


def _spawn_context() -> multiprocessing.context.BaseContext | None:
    import multiprocessing

    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if main_file is not None and not Path(main_file).is_file():
        return None  # spawned children re-import __main__ from its file; code from stdin has none
    return multiprocessing.get_context("spawn")
