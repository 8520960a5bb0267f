"""A POSIX timer on one thread's CPU clock that signals another thread of ours: the stack sampler's second trigger.

Why not `signal.setitimer(ITIMER_PROF)`: SIGPROF's default action ends the process, and libraries reset every
signal's handler to what they saw before (Lightning's signal connector does at the end of `fit`): the next tick then
killed the job (both Lightning scripts of the accuracy set, with no report). This timer sends SIGURG, whose default
action is to ignore it, so a reset handler makes it harmless, and it sends it to the sampler's own thread
(SIGEV_THREAD_ID): no system call of the job's threads is interrupted. CPython still runs the Python handler in the
main thread, at its next bytecode, which is the point. The clock is the training thread's own CPU time, not the
process's: with the process's, every other busy thread (a preflight's threaded stand-in compute) made ticks, each one
woke the sampler thread and took the GIL, and the extra work in the main thread made a DataParallel script's loader
look slow (input-pipeline-bound in 2 of 3 runs). Linux only (glibc's timer_create); elsewhere `start` says no.
"""

from __future__ import annotations

import ctypes
import signal
import sys

_SIGEV_THREAD_ID = 4
TIMER_SIGNAL = signal.SIGURG


class _SigEvent(ctypes.Structure):
    # struct sigevent on Linux: the value, the signal, how to notify, then a 48-byte union whose first int is the
    # thread id for SIGEV_THREAD_ID (64 bytes in all)
    _fields_ = [
        ("value", ctypes.c_void_p),
        ("signo", ctypes.c_int),
        ("notify", ctypes.c_int),
        ("thread_id", ctypes.c_int),
        ("_pad", ctypes.c_int * 11),
    ]


class _TimeSpec(ctypes.Structure):
    _fields_ = [("seconds", ctypes.c_long), ("nanoseconds", ctypes.c_long)]


class _ITimerSpec(ctypes.Structure):
    _fields_ = [("interval", _TimeSpec), ("value", _TimeSpec)]


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    for name in (None, "librt.so.1"):  # glibc 2.34 moved timer_create into libc
        try:
            lib = ctypes.CDLL(name, use_errno=True)
        except OSError:
            continue
        if hasattr(lib, "timer_create"):
            return lib
    return None


class CpuTimer:
    """Every `interval_s` on the clock `clock_id` (time.pthread_getcpuclockid), TIMER_SIGNAL to the thread
    `thread_id` (a native id)."""

    def __init__(self) -> None:
        self._lib: ctypes.CDLL | None = None
        self._timer = ctypes.c_void_p()
        self._armed = False

    def start(self, clock_id: int, thread_id: int, interval_s: float) -> bool:
        lib = _libc()
        if lib is None:
            return False
        event = _SigEvent(signo=int(TIMER_SIGNAL), notify=_SIGEV_THREAD_ID, thread_id=thread_id)
        if lib.timer_create(clock_id, ctypes.byref(event), ctypes.byref(self._timer)) != 0:
            return False
        whole = int(interval_s)
        period = _TimeSpec(whole, int((interval_s - whole) * 1e9))
        if lib.timer_settime(self._timer, 0, ctypes.byref(_ITimerSpec(period, period)), None) != 0:
            lib.timer_delete(self._timer)
            return False
        self._lib, self._armed = lib, True
        return True

    def stop(self) -> None:
        if self._armed and self._lib is not None:
            self._armed = False
            self._lib.timer_delete(self._timer)
