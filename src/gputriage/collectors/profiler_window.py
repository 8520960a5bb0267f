"""`gputriage run --trace`: a short torch.profiler window inside the user's job, driven by the step counter.

The window opens at the first step after every probe window of `probe/window.py` (step 0 is warm-up: cuDNN
autotuning, allocator growth; steps 1-3 carry the op census's dispatch mode and the sync debug mode, whose overhead
would show up in the trace as launch delay). It records `--trace-steps` steps (default 3: enough to see a static
loop's pattern and the gaps between its steps, small enough for a Python-stack trace of a large model), then the
profiler is stopped and the Chrome trace is written into `--out`, so the rest of the job runs untouched. The trace is
analysed when the job has ended (the analysis costs the report, not the training), with the same code as
`gputriage trace`.

Step boundaries come from the run probe (the optimizer's step post-hook, or each DataLoader batch without one): the
profiler's `ProfilerStep#N` spans carry the run's own step numbers, so the trace and timeline.json line up. Nothing
here raises into the user's job: a profiler that cannot start, export or be read becomes `trace.note`.

Kineto logs its own life to the process's stderr (`USDT: ... profiler_start`, `STAGE: ... Completed Stage: Warm Up`),
into the middle of the user's output. While the profiler starts and stops, fd 2 goes to a temporary file; then every
line that is not such chatter is written back (`quiet_profiler_chatter`), so a warning or an error still shows.
"""

from __future__ import annotations

import contextlib
import gzip
import os
import re
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import msgspec
import torch
from torch.profiler import ProfilerAction, ProfilerActivity

from gputriage import outdir
from gputriage.collectors.distributed import is_multi_rank, rank_from_env
from gputriage.collectors.probe import RunProbe
from gputriage.collectors.windows import first_traced_step
from gputriage.record import Run
from gputriage.record.trace import TraceSection

# gzip level 6: about as small as 9 for Kineto JSON, at a fraction of the time (the job waits for the export).
GZIP_LEVEL = 6
# Kineto's log lines at its informational levels: "USDT:2026-11-30 23:07:36 11064:11064 File.cpp:52] profiler_start".
# Its WARNING and ERROR lines, and anything else, are kept.
KINETO_CHATTER = re.compile(rb"^(?:USDT|STAGE|INFO|VERBOSE):\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \d+:\d+ [^\]\s]+:\d+\] ")


def profiler_observers(trace_steps: int | None, out_dir: Path | None, probe: RunProbe) -> list[ProfilerWindow]:
    """The `--trace` observer, following `probe`'s step counter; none without --trace (or without a folder)."""
    if trace_steps is None or out_dir is None:
        return []
    window = ProfilerWindow(out_dir, trace_steps)
    probe.step_listeners.append(window.on_step)
    return [window]


def _unsafe_here() -> str | None:
    """Why torch's profiler cannot be started, stepped or stopped from here (None: it can). It must be driven from
    the thread that runs the job's main code, outside autograd's backward: a window opened from an optimizer stepped
    in a gradient hook, or from a training loop in a worker thread, killed the job with SIGSEGV."""
    if threading.current_thread() is not threading.main_thread():
        return "the training steps run in a thread other than the main one, where torch's profiler cannot be driven"
    if torch._C._current_graph_task_id() != -1:
        return (
            "the training steps end inside autograd's backward (an optimizer stepped from a gradient hook), where "
            "torch's profiler cannot be started or stopped"
        )
    return None


def _always_record(step: int) -> ProfilerAction:
    # A schedule makes the profiler mark each step with a ProfilerStep#N span; the window itself is ours.
    return ProfilerAction.RECORD


class ProfilerWindow:
    """Observer: profile steps [first_step, first_step + steps), export the trace, then put its analysis in the Run."""

    def __init__(self, out_dir: Path, steps: int, first_step: int | None = None) -> None:
        self.first_step = first_traced_step() if first_step is None else first_step
        self.steps = steps
        self.rank = _rank()
        # Resolved now: the user's script may chdir before the export.
        self.path = (out_dir / outdir.trace_file_name(self.rank)).resolve()
        self._prof: Any = None  # torch.profiler.profile while the window is open
        self._last_step = 0
        self._exported = False
        self._opened = False
        self._note: str | None = None
        self._start_frames: set[tuple[str, int]] = set()

    @property
    def end_step(self) -> int:
        return self.first_step + self.steps

    # -- Observer ------------------------------------------------------------------------------------------------------

    def start(self, run: Run) -> None:
        with contextlib.suppress(OSError):  # a trace left by an earlier run in the same --out is not this job's
            self.path.unlink(missing_ok=True)

    def finish(self, run: Run) -> None:
        """The job has ended: close a window it ended inside, then analyse the trace."""
        if self._prof is not None:
            last = self._prof.step_num
            self._guarded(self._close)
            if self._note is None:
                # Kineto cannot end a span after the fact; say so, so nobody reads the tail as a slow step.
                self._note = (
                    f"the job ended inside the profiler window (steps {self.first_step}-{self.end_step - 1}): the "
                    f"last span, ProfilerStep#{last}, runs from the last step boundary to the job's end"
                )
        if self._exported:
            self._guarded(lambda: self._analyse(run))
        elif self._note is None and self._opened:
            self._note = "the job was stopped while the profiler trace was being written"
        elif self._note is None:
            self._note = (
                f"the profiler window (steps {self.first_step}-{self.end_step - 1}) never opened: the job ended "
                f"after {self._last_step} detected training steps"
            )
        if self._note is not None:
            if run.trace is None:
                run.trace = TraceSection()
                with contextlib.suppress(Exception):
                    print(f"gputriage: warning: --trace: {self._note}", file=sys.stderr)
            run.trace.note = self._note

    # -- the step counter ----------------------------------------------------------------------------------------------

    def on_step(self, step: int) -> None:
        """Step `step` begins (called by the run probe). Never raises into the job."""
        self._guarded(lambda: self._advance(step))

    def _advance(self, step: int) -> None:
        if step <= self._last_step and self._note is None:
            # The probe re-based its count (gradient accumulation found at the first optimizer step): the steps
            # recorded so far were micro-batches, not steps. Start again on the real count.
            if self._prof is not None:
                self._discard()
            if self._exported:
                self.path.unlink(missing_ok=True)
            self._exported = self._opened = False
        self._last_step = step
        if self._exported or self._note is not None:
            return
        unsafe = _unsafe_here()
        if unsafe is not None and self._prof is None and step == self.first_step:
            self._note = f"the profiler window never opened: {unsafe}"
            return
        if unsafe is not None:
            return  # open already: it records on, and closes at a step boundary where it can, or at the job's end
        if self._prof is None and step == self.first_step:
            self._open(step)
        elif self._prof is not None and step < self.end_step:
            self._prof.step()
        elif self._prof is not None:
            self._close()

    def _open(self, step: int) -> None:
        if torch.autograd.profiler._is_profiler_enabled:
            self._note = "the job runs its own profiler, so gputriage did not start a second one"
            return
        if sys.getprofile() is not None:
            # torch's profiler with stacks takes the Python profile hook, and leaves none: the job's cProfile saw
            # nothing from the window on
            self._note = "the job runs its own Python profiler (cProfile, sys.setprofile), which torch's would replace"
            return
        prof = torch.profiler.profile(
            activities=_activities(),
            schedule=_always_record,
            record_shapes=False,
            with_stack=True,  # so findings name the user's file:line
        )
        prof.step_num = step  # ProfilerStep#N is the run's step N
        self._start_frames = _stack_lines()
        self._prof = prof
        self._opened = True
        with quiet_profiler_chatter():
            prof.start()

    def _close(self) -> None:
        prof, self._prof = self._prof, None
        with quiet_profiler_chatter():
            prof.stop()
        _export(prof, self.path)
        self._exported = True

    def _discard(self) -> None:
        prof, self._prof = self._prof, None
        with contextlib.suppress(Exception), quiet_profiler_chatter():
            prof.stop()

    def _analyse(self, run: Run) -> None:
        from gputriage.tracing import analyse_trace

        rank = analyse_trace(self.path, rank_hint=self.rank, jobs=1)  # jobs=1: nothing is spawned in the job
        _drop_unreliable_where(rank, self._start_frames)
        run.trace = TraceSection(ranks=[rank])

    def _guarded(self, action: Any) -> None:
        """Run one profiler action; a failure turns the window off and becomes the note, never the job's error."""
        try:
            action()
        except Exception as exc:
            self._note = f"the profiler failed ({type(exc).__name__}: {str(exc)[:300]})"
            if self._prof is not None:
                self._discard()


@contextlib.contextmanager
def quiet_profiler_chatter() -> Iterator[None]:
    """Keep Kineto's informational log lines out of the user's stderr; write back everything else, in order."""
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no stderr at all: nothing to keep clean
        yield
        return
    with tempfile.TemporaryFile() as capture:
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            with contextlib.suppress(Exception):
                sys.stderr.flush()  # Python's own writes in the meantime (a warning) are in the capture too
            os.dup2(saved, 2)
            os.close(saved)
            capture.seek(0)
            lines = capture.read().splitlines(keepends=True)
            kept = b"".join(line for line in lines if not KINETO_CHATTER.match(line))
            with contextlib.suppress(OSError):
                while kept:
                    kept = kept[os.write(2, kept) :]


def _activities() -> list[ProfilerActivity]:
    activities = [ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(ProfilerActivity.CUDA)
    xpu = getattr(ProfilerActivity, "XPU", None)
    if xpu is not None and hasattr(torch, "xpu") and torch.xpu.is_available():
        activities.append(xpu)
    return activities


def _export(prof: Any, path: Path) -> None:
    """Write the trace gzipped and atomically: a job killed mid-export leaves no half file to misread."""
    path.parent.mkdir(parents=True, exist_ok=True)
    plain = path.with_name(f".{path.name}.{os.getpid()}.json")
    packed = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        prof.export_chrome_trace(str(plain))
        with plain.open("rb") as src, gzip.open(packed, "wb", compresslevel=GZIP_LEVEL) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        packed.replace(path)
    finally:
        plain.unlink(missing_ok=True)
        packed.unlink(missing_ok=True)


def _stack_lines() -> set[tuple[str, int]]:
    """(file name, line) of every frame running now, when the window opens."""
    lines = set()
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        lines.add((Path(frame.f_code.co_filename).name, frame.f_lineno))
        frame = frame.f_back
    return lines


def _drop_unreliable_where(node: Any, start_frames: set[tuple[str, int]]) -> None:
    """Null every `where` of the trace summary that names no real place, rather than leave a wrong line.

    Kineto names a frame that was already running when the profiler started by its line at that moment, and keeps
    that one name for the whole window: the loop's own function shows up at the optimizer step that opened the window,
    whatever it did later. gputriage's own hooks are in the trace too, and are not the user's code.
    """
    if isinstance(node, list):
        for item in node:
            _drop_unreliable_where(item, start_frames)
        return
    if not isinstance(node, msgspec.Struct):
        return
    for name in node.__struct_fields__:
        value = getattr(node, name)
        if name == "where" or name.endswith("_where"):
            if isinstance(value, str) and _unreliable(value, start_frames):
                setattr(node, name, None)
        else:
            _drop_unreliable_where(value, start_frames)


def _unreliable(where: str, start_frames: set[tuple[str, int]]) -> bool:
    path, _, line = where.rpartition(":")
    if path.startswith("gputriage/") or "/gputriage/" in path:
        return True
    return line.isdigit() and (Path(path).name, int(line)) in start_frames


def _rank() -> int | None:
    info = rank_from_env() if is_multi_rank() else None
    return info.rank if info is not None else None
