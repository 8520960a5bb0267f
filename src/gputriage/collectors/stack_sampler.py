"""CPU work in the step, found by time: a low-overhead sampler of the training thread's stack (record/sampler.py).

In the spirit of py-spy and pyinstrument, but from inside the process: a daemon thread wakes every
SAMPLE_INTERVAL_S, reads the training thread's frame with `sys._current_frames()` (and, where the training thread is
the main thread, a CPU-time timer samples it too while it keeps the GIL from the thread), and counts each line of the
user's code on it, with the phase of the step the probe's clock is in and whether the thread was busy since the last
sample: running on a core or runnable and waiting for one (Linux's per-thread schedstat; elsewhere its CPU clock), as
opposed to sleeping or blocked. On a busy shared machine a thread that computes gets a fraction of a core, so "got CPU
time" would undercount; "wanted CPU time" does not. It never touches the user's objects: the thread and the timer run
only inside its window of steps (from the step after the probes' own windows, the op census's, to the probes'
`--steps` limit, ending before a `--trace` profiler window, and after at most MAX_SAMPLES samples), and are gone
when the window ends, so it costs nothing after it.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

import msgspec

from gputriage.collectors.probe.state import ProbeState
from gputriage.collectors.usercode import is_own_file, is_user_file, short_path
from gputriage.collectors.windows import PROBE_STEPS
from gputriage.record import Run
from gputriage.record.sampler import MAX_LINES, SampledLine, SamplerSection

if TYPE_CHECKING:
    from gputriage.collectors.cpu_timer import CpuTimer
    from gputriage.collectors.probe import RunProbe

# 250 samples per second: a 25 ms step gets 6, and 100 steps 600. One sample (the frame walk of a 30-frame stack, one
# small /proc read) costs about 30 us of CPU, under 1% of a core at this rate.
SAMPLE_INTERVAL_S = 0.004
# Step 0 pays for lazy initialisation, and the op census (probe/window.py) routes every op through Python in the steps
# after it: ten times the step's host time on a model with many small ops, all of it charged to the model's lines and
# none of it the job's. Sampling starts once those windows have closed.
FIRST_SAMPLED_STEP = max(steps.stop for steps in PROBE_STEPS.values())
DEFAULT_END_STEP = 201  # without a --steps limit
# Of the kept lines, places held for the lines with the most CPU work outside the model, and the most DataLoader wait.
_RESERVED_LINES = 8
MAX_SAMPLES = 2500  # 10 s of sampling is plenty; the thread ends itself then
# The sampler needs the GIL to read a frame. A training thread in pure Python hands it over only when the waiting
# sampler forces a switch, after sys.getswitchinterval() (5 ms by default), while one that calls into C code that
# releases the GIL (a NumPy op on an array) hands it over at once: with 5 ms, every sample that began in the last
# 5 ms of a Python loop landed on the next NumPy line (a hand-written resize was charged to the ToTensor after it).
# A short interval while the sampler runs makes where a sample lands follow where the time goes; the user's own
# interval is back when the window ends. It matters only while a thread waits for the GIL.
SAMPLING_SWITCH_INTERVAL_S = 0.0005
# The thread alone is not enough: CPython hands the GIL to a waiting thread only when no other switch happened during
# its timed wait, and code that releases and retakes the GIL in short bursts (a NumPy copy of more than 500 elements
# releases it each time) restarts that wait again and again. A loop of np.pad on 28x28 images, the augmentation of a
# real tutorial script (corpus case 13), let the thread take 6-11 samples in a second at any switch interval from
# 0.5 ms down to 20 us (105 at 5 us), against about 250 for a loop of np.clip. A timer on the training thread's CPU
# clock (cpu_timer.py) makes CPython run a signal handler in the main thread at its next bytecode, with its frame: the
# GIL cannot keep that out. It ticks only while that thread computes (the sampler thread covers the waits), and a
# tick samples only when nothing did for half an interval. Used only when the training thread is the main thread and
# the job has no handler of its own for the timer's signal; the handler goes with the window.
_HANDLER_MIN_GAP = 0.5  # of the interval
# A sample counts as busy when the thread ran or waited for a core at least this share of the time since the last one.
BUSY_RATIO = 0.5
MAX_TRACKED_LINES = 2000  # lines counted while sampling; memory stays bounded on any program
_DEVICE_WORK = frozenset({"torch", "gputriage"})  # what runs on top when a sample is not the user's CPU work


def stack_sampler_observers(steps: int | None, trace_steps: int | None, probe: RunProbe) -> list[StackSampler]:
    """The sampler, following the probe's step counter, up to the probes' `steps` limit and before a `--trace` window;
    none when no step after warm-up is left to sample, or when the job is meant for the CPU (CPU work in the step is
    then the job itself: no rule reads it, so it is not measured)."""
    if probe.state.expected_device == "cpu":
        return []
    end_step = DEFAULT_END_STEP
    if trace_steps is not None:
        from gputriage.collectors.windows import first_traced_step

        end_step = min(end_step, first_traced_step())  # the profiler's window must not see the sampler
    if steps is not None:
        end_step = min(end_step, steps)
    if end_step <= FIRST_SAMPLED_STEP:
        return []
    sampler = StackSampler(probe.state, FIRST_SAMPLED_STEP, end_step)
    probe.step_listeners.append(sampler.on_step)
    return [sampler]


class _LineCount(msgspec.Struct):
    function: str | None
    samples: int = 0
    time_s: float = 0.0
    busy_s: float = 0.0
    other_busy_s: float = 0.0
    self_s: float = 0.0
    depth: int = 1 << 30
    phases: dict[str, float] = msgspec.field(default_factory=dict)
    libraries: dict[str, float] = msgspec.field(default_factory=dict)


class _Tally(msgspec.Struct):
    """The samples of some steps, by line and phase."""

    samples: int = 0
    time_s: float = 0.0
    busy_s: float = 0.0
    phases: dict[str, float] = msgspec.field(default_factory=dict)
    lines: dict[tuple[str, int], _LineCount] = msgspec.field(default_factory=dict)
    steps: set[int] = msgspec.field(default_factory=set)

    def merge(self, later: _Tally) -> None:
        self.samples += later.samples
        self.time_s += later.time_s
        self.busy_s += later.busy_s
        _add(self.phases, later.phases)
        self.steps |= later.steps
        for key, count in later.lines.items():
            mine = self.lines.get(key)
            if mine is None:
                if len(self.lines) < MAX_TRACKED_LINES:
                    self.lines[key] = count
                continue
            mine.samples += count.samples
            mine.time_s += count.time_s
            mine.busy_s += count.busy_s
            mine.other_busy_s += count.other_busy_s
            mine.self_s += count.self_s
            mine.depth = min(mine.depth, count.depth)
            _add(mine.phases, count.phases)
            _add(mine.libraries, count.libraries)


def _add(into: dict[str, float], more: dict[str, float]) -> None:
    for key, value in more.items():
        into[key] = into.get(key, 0.0) + value


class StackSampler:
    """Observer: samples the training thread's stack during steps [first_step, end_step).

    A step's samples count once the step completes (the next one begins): the code after a job's last step (its
    test loop, its checkpoint save) runs in a step that never completes, and was read as CPU work in every step (a
    trial)."""

    def __init__(
        self, state: ProbeState, first_step: int, end_step: int, interval_s: float = SAMPLE_INTERVAL_S
    ) -> None:
        self._state = state
        self.first_step = first_step
        self.end_step = end_step
        self.interval_s = interval_s
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._done = _Tally()  # the completed steps' samples: what the record holds
        self._open = _Tally()  # the samples of the step under way (its `steps` holds that one step)
        self._stand_in_start_s: float | None = None  # the stand-in's compute clock when the window began
        self._stand_in_done_at_s: float | None = None  # and when the last completed step of the samples ended
        self._stand_in_s: float | None = None
        self._busy_clock: Callable[[], float] | None = None  # seconds the thread ran or waited to run
        self._last: tuple[float, float] | None = None  # (wall, busy clock) at the last sample
        self._switch_interval_s: float | None = None  # the job's, while ours is set
        self._handler: Callable[[int, FrameType | None], None] | None = None  # the timer's, while installed
        self._timer: CpuTimer | None = None  # made with the handler (ctypes loads only then)
        self._timer_armed = False
        self._clock_id = 0  # the training thread's CPU clock, for the timer
        # One sample counts at a time (see _sample): the handler runs in the main thread between any two bytecodes,
        # also between two of the sampler thread's when the GIL passes, and two samples counting at once lost one's
        # time from the total but not from its lines ("has more time than possible", in 1 full suite of 3).
        self._sampling = threading.Lock()

    # -- Observer ------------------------------------------------------------------------------------------------------

    def start(self, run: Run) -> None:
        """Nothing before the window: the thread starts with step `first_step`."""

    def on_step(self, step: int) -> None:
        """Called on the training thread when `step` begins."""
        if self._state.in_child:
            return
        if step == self.first_step and self._thread is None:
            self._begin()
            return
        with self._sampling:
            self._complete_before(step)
        if step >= self.end_step:
            self._end()

    def _complete_before(self, step: int) -> None:
        """The step under way completed when a later one began: its samples count. Under `_sampling`."""
        if self._open.steps and step > max(self._open.steps):
            self._done.merge(self._open)
            self._open = _Tally()
            stand_in = self._state.stand_in_clock
            if stand_in is not None:  # the stand-in's compute over the same completed steps as the samples
                self._stand_in_done_at_s = stand_in()

    def finish(self, run: Run) -> None:
        self._end()
        if self._done.samples:  # the step still under way at the end never completed: its samples are dropped
            run.sampler = self.section()

    # -- the thread ----------------------------------------------------------------------------------------------------

    def _begin(self) -> None:
        """On the training thread, as step `first_step` begins."""
        self._busy_clock = busy_clock()
        self._last = (time.perf_counter(), self._read_busy_clock())
        stand_in = self._state.stand_in_clock
        self._stand_in_start_s = stand_in() if stand_in is not None else None
        self._thread = threading.Thread(target=self._run, name="gputriage-stack-sampler", daemon=True)
        before = sys.getswitchinterval()
        if before > SAMPLING_SWITCH_INTERVAL_S:
            sys.setswitchinterval(SAMPLING_SWITCH_INTERVAL_S)
            self._switch_interval_s = before
        self._install_handler()
        self._thread.start()

    def _install_handler(self) -> None:
        """The timer's handler, when this is the main thread and the job has none for its signal."""
        if threading.current_thread() is not threading.main_thread():
            return  # a handler runs in the main thread only: it would sample the wrong thread
        from gputriage.collectors.cpu_timer import TIMER_SIGNAL, CpuTimer

        with contextlib.suppress(AttributeError, OSError, ValueError):
            if signal.getsignal(TIMER_SIGNAL) != signal.SIG_DFL:
                return  # the job's own (or a C library's: getsignal gives None): left alone
            clock_id = time.pthread_getcpuclockid(threading.get_ident())  # this thread's CPU time
            handler = self._on_tick
            signal.signal(TIMER_SIGNAL, handler)
            self._handler, self._timer, self._clock_id = handler, CpuTimer(), clock_id

    def _remove_handler(self) -> None:
        handler, self._handler = self._handler, None
        # the default back, unless the job set its own meanwhile; a handler is set from the main thread only (from
        # another, ours stays, and with its timer deleted it never runs)
        if handler is None or threading.current_thread() is not threading.main_thread():
            return
        from gputriage.collectors.cpu_timer import TIMER_SIGNAL

        with contextlib.suppress(OSError, ValueError):
            if signal.getsignal(TIMER_SIGNAL) == handler:
                signal.signal(TIMER_SIGNAL, signal.SIG_DFL)

    def _on_tick(self, signum: int, frame: FrameType | None) -> None:
        """In the main thread, between two of its bytecodes: `frame` is where the training loop is."""
        last = self._last
        if frame is None or last is None or self._stop.is_set() or self._taken() >= MAX_SAMPLES:
            return
        if time.perf_counter() - last[0] < _HANDLER_MIN_GAP * self.interval_s:
            return
        with contextlib.suppress(Exception):  # a sample that fails is a sample not taken, never the job's error
            self._sample(frame)

    def _end(self) -> None:
        start = self._stand_in_start_s
        if start is not None and self._stand_in_s is None:
            self._stand_in_s = (self._stand_in_done_at_s or start) - start
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        self._remove_handler()
        before, self._switch_interval_s = self._switch_interval_s, None
        # the job's own value back, unless the job set one of its own meanwhile
        if before is not None and sys.getswitchinterval() == SAMPLING_SWITCH_INTERVAL_S:
            sys.setswitchinterval(before)

    def _run(self) -> None:
        # the timer signals this thread, whose waits CPython resumes: no system call of the job's is interrupted
        timer = self._timer
        armed = timer is not None and timer.start(self._clock_id, threading.get_native_id(), self.interval_s)
        self._timer_armed = armed
        try:
            while not self._stop.wait(self.interval_s) and self._taken() < MAX_SAMPLES:
                with contextlib.suppress(Exception):  # a sample that fails is a sample not taken
                    self._sample(None)
        finally:
            self._timer_armed = False
            if timer is not None:
                timer.stop()

    def _read_busy_clock(self) -> float:
        clock = self._busy_clock
        if clock is None:
            return 0.0
        try:
            return clock()
        except (OSError, ValueError):
            self._busy_clock = None
            return 0.0

    def _sample(self, frame: FrameType | None) -> None:
        """`frame`: the main thread's, from the timer's handler; None: the thread reads the training thread's.

        The busy clock first: reading it is a file read that lets go of the GIL, and a thread waiting to take it back
        behind a loop of np.pad waits ~100 ms. Then the frame, fresh, and the count under `_sampling`, which is only
        Python (no wait for the GIL inside, whoever holds it). The thread waits for the lock; the handler, in the main
        thread, never does: it skips its tick (a main thread blocked on the lock would wait for the thread).
        """
        now = (time.perf_counter(), self._read_busy_clock())
        from_thread = frame is None
        if from_thread:
            frame = sys._current_frames().get(self._state.owner_thread)
        if not self._sampling.acquire(blocking=from_thread):
            return
        try:
            self._count_sample(frame, now, from_thread)
        finally:
            self._sampling.release()

    def _count_sample(self, frame: FrameType | None, now: tuple[float, float], from_thread: bool) -> None:
        last = self._last
        if last is not None and now[0] <= last[0]:
            return  # a sample taken after this one read the clock counted the time
        if from_thread and self._timer_armed and last is not None and now[0] - last[0] < self.interval_s:
            return  # the timer sampled just now
        self._last = now
        phase = self._state.clock.phase
        step = self._state.step
        if phase is None or not self.first_step <= step < self.end_step:
            return
        if frame is None or last is None:
            return
        # This sample stands for the time since the last one (at most a few intervals: a pause between steps or a
        # sampler starved of the GIL for long is not all this line's).
        weight_s = min(now[0] - last[0], 4 * self.interval_s + 0.02)
        busy = self._busy_clock is None or now[1] - last[1] >= BUSY_RATIO * max(now[0] - last[0], 1e-9)
        self._complete_before(step)
        self._open.steps.add(step)
        self._count(self._open, frame, phase, busy, weight_s)

    def _taken(self) -> int:
        return self._done.samples + self._open.samples

    def _count(self, tally: _Tally, top: FrameType, phase: str, busy: bool, weight_s: float) -> None:
        tally.samples += 1
        tally.time_s += weight_s
        tally.busy_s += weight_s if busy else 0.0
        tally.phases[phase] = tally.phases.get(phase, 0.0) + weight_s
        user = _user_frames(top)
        library = _library_of(top.f_code.co_filename)
        seen: set[tuple[str, int]] = set()
        for depth, frame in enumerate(reversed(user)):
            key = (frame.f_code.co_filename, frame.f_lineno)
            if key in seen:
                continue  # recursion: one sample counts once per line
            seen.add(key)
            count = tally.lines.get(key)
            if count is None:
                if len(tally.lines) >= MAX_TRACKED_LINES:
                    continue
                count = tally.lines[key] = _LineCount(getattr(frame.f_code, "co_qualname", frame.f_code.co_name))
            count.samples += 1
            count.time_s += weight_s
            count.busy_s += weight_s if busy else 0.0
            # torch's own Python (a functional loss, zero_grad) dispatches work to the device: the op census
            # judges it; this counts the CPU work it cannot see. gputriage's own frames on top are a probe's or the
            # stand-in's (computing an op a GPU runs): not the user's CPU work either.
            if busy and phase == "other" and library not in _DEVICE_WORK:
                count.other_busy_s += weight_s
            count.depth = min(count.depth, depth)
            count.phases[phase] = count.phases.get(phase, 0.0) + weight_s
            count.libraries[library] = count.libraries.get(library, 0.0) + weight_s
        if user:
            innermost = tally.lines.get((user[0].f_code.co_filename, user[0].f_lineno))
            if innermost is not None:
                innermost.self_s += weight_s

    # -- the record ----------------------------------------------------------------------------------------------------

    def _kept_lines(self) -> list[tuple[tuple[str, int], _LineCount]]:
        """The MAX_LINES lines the record keeps: most by time, but the lines that can be a finding's (CPU work no probe
        attributed, the DataLoader's wait) are never crowded out by a deep model's forward lines (a GPT's twenty
        lines of attention took every place, and the step's batch building went unseen)."""

        def by(measure: Callable[[_LineCount], float]) -> list[tuple[str, int]]:
            busy = [kv for kv in self._done.lines.items() if measure(kv[1]) > 0]
            return [k for k, _ in sorted(busy, key=lambda kv: (-measure(kv[1]), kv[1].depth, kv[0]))]

        reserved = (
            by(lambda c: c.other_busy_s)[:_RESERVED_LINES]
            + by(lambda c: c.phases.get("data_wait", 0.0))[:_RESERVED_LINES]
        )
        keys = list(dict.fromkeys(reserved))
        for key in by(lambda c: c.time_s) + list(self._done.lines):
            if len(keys) >= MAX_LINES:
                break
            if key not in keys:
                keys.append(key)
        ordered = [(k, self._done.lines[k]) for k in keys]
        return sorted(ordered, key=lambda kv: (-kv[1].time_s, kv[1].depth, kv[0]))

    def section(self) -> SamplerSection:
        ordered = self._kept_lines()
        done = self._done
        steps = sorted(done.steps)
        return SamplerSection(
            interval_s=self.interval_s,
            first_step=steps[0] if steps else None,
            last_step=steps[-1] if steps else None,
            steps=len(steps),
            samples=done.samples,
            time_s=round(done.time_s, 6),
            busy_s=round(done.busy_s, 6),
            phase_s={k: round(v, 6) for k, v in done.phases.items()},
            busy_clock=self._busy_clock is not None,
            stand_in_s=round(self._stand_in_s, 6) if self._stand_in_s is not None else None,
            lines=[
                SampledLine(
                    where=f"{short_path(filename)}:{line}",
                    function=c.function,
                    samples=c.samples,
                    time_s=round(c.time_s, 6),
                    busy_s=round(c.busy_s, 6),
                    phase_s={k: round(v, 6) for k, v in c.phases.items()},
                    other_busy_s=round(c.other_busy_s, 6),
                    self_s=round(c.self_s, 6),
                    depth=c.depth,
                    library=max(c.libraries, key=lambda k: c.libraries[k]) if c.libraries else None,
                )
                for (filename, line), c in ordered
            ],
        )


def busy_clock() -> Callable[[], float] | None:
    """For the calling thread: a clock of the seconds it ran on a core or waited runnable for one.

    Linux: /proc/self/task/TID/schedstat (run time + run-queue wait, in ns). Elsewhere its CPU clock, which undercounts
    a busy thread on an overloaded machine. None when neither exists.
    """
    with contextlib.suppress(AttributeError, OSError, ValueError):
        path = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat")
        path.read_bytes()

        def schedstat_s() -> float:
            ran_ns, waited_ns, _ = path.read_bytes().split()
            return (int(ran_ns) + int(waited_ns)) / 1e9

        return schedstat_s
    with contextlib.suppress(AttributeError, OSError):
        clock_id = time.pthread_getcpuclockid(threading.get_ident())
        return lambda: time.clock_gettime(clock_id)
    return None


def _user_frames(top: FrameType) -> list[FrameType]:
    """The frames of the user's code on the stack, innermost first."""
    out = []
    frame: FrameType | None = top
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            out.append(frame)
        frame = frame.f_back
    return out


def _library_of(filename: str) -> str:
    """What the innermost frame runs: the user's own Python, or the package it belongs to (numpy, PIL, torch...)."""
    if is_user_file(filename):
        return "python"
    if is_own_file(filename):  # a probe's wrapper, or a preflight's stand-in computing an op: never the user's work
        return "gputriage"
    parts = Path(filename).parts
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            index = parts.index(marker)
            if index + 1 < len(parts):
                return parts[index + 1].removesuffix(".py")
    return "python"
