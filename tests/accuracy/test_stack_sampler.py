"""The stack sampler: CPU work in the step found by time, attributed to the user's line, and gone after its window."""

from __future__ import annotations

import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import msgspec
import numpy as np

from gputriage.collectors.cpu_timer import TIMER_SIGNAL
from gputriage.collectors.probe.state import ProbeState
from gputriage.collectors.stack_sampler import SAMPLING_SWITCH_INTERVAL_S, StackSampler
from gputriage.record import Run
from gputriage.record.sampler import SampledLine, SamplerSection
from gputriage.rules.steps import loader_hot_line


def _numpy_work(seconds: float) -> None:
    # Not np.pad: a loop of np.pad on a small image keeps the GIL from the sampler thread for most of its time (6 to
    # 68 samples in 0.6 s at a 2 ms interval, against 280 for a loop of np.clip, np.concatenate or a copy on the same
    # machine), so this test's share went from 0.03 to 0.47 with the machine's load and failed the full suite. That
    # limit of a GIL-bound sampler is said in docs/run.md; this test checks what the sampler does with its samples.
    end = time.perf_counter() + seconds
    image = np.random.rand(64, 64)
    while time.perf_counter() < end:
        np.concatenate([image[:, -2:], image, image[:, :2]], axis=1)  # THE NUMPY LINE


def _sleep(seconds: float) -> None:
    time.sleep(seconds)  # THE SLEEP LINE


def _line_of(marker: str) -> int:
    lines = Path(__file__).read_text(encoding="utf-8").splitlines()
    return next(i for i, line in enumerate(lines, start=1) if f"# {marker}" in line and "_line_of" not in line)


def test_cpu_work_outside_the_model_is_found_at_its_line() -> None:
    state = ProbeState(expected_device="meta")
    sampler = StackSampler(state, first_step=1, end_step=3, interval_s=0.002)
    state.clock.begin()
    state.step = 1
    sampler.on_step(1)
    _numpy_work(0.6)  # "other": no probe phase is open
    state.clock.push("forward")
    _numpy_work(0.15)  # inside the model's forward: not "other" (4x shorter: the order survives a few samples)
    state.clock.pop()
    _sleep(0.2)  # "other", but the thread sleeps: not CPU work
    state.step = 3
    sampler.on_step(3)
    run = Run(command="run")
    sampler.finish(run)
    section = run.sampler
    assert section is not None and section.samples > 30
    mine = [line for line in section.lines if line.where.startswith(("tests/", "/")) and "test_stack" in line.where]
    by_line = {line.where.rsplit(":", 1)[1]: line for line in mine}
    numpy_line = by_line[str(_line_of("THE NUMPY LINE"))]
    share = section.share_pct(numpy_line) / 100
    # 0.6 s of 0.95 s, busy, in "other"; a loaded 2-core machine stretches the sampler's interval and takes cores from
    # the busy spell (0.15 seen in a full run), so the bounds are wide, and the order of the two busy spells (0.6 s
    # outside, 0.15 s inside the forward) is what must hold
    assert 0.1 < share < 0.85
    # wall time against wall time: a loaded machine lowers the busy share of both spells alike, not their order
    assert numpy_line.phase_s.get("other", 0) > numpy_line.phase_s.get("forward", 0) > 0
    assert numpy_line.other_busy_s > 0
    sleep_line = by_line.get(str(_line_of("THE SLEEP LINE")))
    assert sleep_line is None or sleep_line.other_busy_s <= 0.2 * sleep_line.time_s


def _pad_loop(seconds: float, midway: Callable[[], object] = lambda: None) -> None:
    images = np.random.rand(64, 1, 28, 28).astype(np.float32)
    for part in (0, 1):
        if part:
            midway()
        end = time.perf_counter() + seconds / 2
        while time.perf_counter() < end:
            for image in images:
                np.pad(image, ((0, 0), (2, 2), (2, 2)), mode="edge")  # THE PAD LINE


def _sample_pad_loop(seconds: float, midway: Callable[[], object] = lambda: None) -> SamplerSection | None:
    state = ProbeState(expected_device="meta")
    sampler = StackSampler(state, first_step=1, end_step=3)
    state.clock.begin()
    state.step = 1
    sampler.on_step(1)
    _pad_loop(seconds, midway)
    state.step = 3
    sampler.on_step(3)
    run = Run(command="run")
    sampler.finish(run)
    return run.sampler


def _pad_line(section: SamplerSection) -> SampledLine | None:
    where = f":{_line_of('THE PAD LINE')}"
    return next((line for line in section.lines if "test_stack" in line.where and line.where.endswith(where)), None)


def test_a_numpy_loop_that_keeps_the_gil_from_the_thread_is_sampled_by_the_cpu_timer() -> None:
    """The augmentation of corpus case 13: a loop of np.pad releases and retakes the GIL so often that the sampler
    thread got 6-11 samples in a second of it. On the main thread the CPU-time timer samples it as the CPU goes."""
    assert threading.current_thread() is threading.main_thread()
    section = _sample_pad_loop(0.8)
    assert section is not None
    pad = _pad_line(section)
    assert pad is not None, section.lines
    # 0.8 s of CPU work, a tick every 4-8 ms of it; a loaded machine gives fewer cores, not fewer CPU-time ticks
    assert pad.samples >= 50, (pad.samples, section.samples)
    assert section.share_pct(pad) > 50
    assert signal.getsignal(TIMER_SIGNAL) == signal.SIG_DFL  # the job's disposition is back after the window


def test_a_library_that_resets_every_signal_handler_mid_window_does_not_end_the_job() -> None:
    """Lightning restores every signal's handler it saw before `fit` when `fit` ends. With SIGPROF (setitimer) the
    next tick then killed the job; the timer's signal is ignored by default, so a reset only stops the ticks."""
    section = _sample_pad_loop(0.4, midway=lambda: signal.signal(TIMER_SIGNAL, signal.SIG_DFL))
    assert section is not None  # this process is alive, and sampled
    assert signal.getsignal(TIMER_SIGNAL) == signal.SIG_DFL


def test_a_jobs_own_handler_for_the_timers_signal_is_left_alone() -> None:
    """A job with a handler of its own for the signal keeps it, and gets no tick of ours: the thread samples alone."""
    received: list[int] = []

    def jobs_handler(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = signal.signal(TIMER_SIGNAL, jobs_handler)
    try:
        _sample_pad_loop(0.3)  # the thread alone: a few samples, or none
        assert signal.getsignal(TIMER_SIGNAL) is jobs_handler
        assert received == []
    finally:
        signal.signal(TIMER_SIGNAL, previous)


def test_a_tick_while_the_thread_samples_is_skipped_and_the_counts_stay_whole() -> None:
    """The handler runs between any two bytecodes of the main thread, also while the sampler thread is inside a sample
    (the GIL passed to the main thread mid-sample). Two samples counting at once lost one's time from the total but
    not from its lines: "has more time than possible" in 1 full suite of 3. A tick while a sample is being taken is
    skipped; the thread waits for the handler's."""
    state = ProbeState(expected_device="meta")
    sampler = StackSampler(state, first_step=1, end_step=3, interval_s=0.001)
    state.clock.begin()
    state.step = 1
    sampler.on_step(1)
    time.sleep(0.01)
    with sampler._sampling:  # the thread is inside a sample
        taken = sampler.section().samples
        sampler._last = (time.perf_counter() - 1.0, 0.0)  # long enough since the last one for a tick to sample
        sampler._on_tick(int(TIMER_SIGNAL), sys._getframe())
        assert sampler.section().samples == taken
    # both triggers at full speed: the pad loop ticks the timer, the sleeps let the thread in
    _pad_loop(0.3, midway=lambda: _sleep(0.05))
    state.step = 3
    sampler.on_step(3)
    run = Run(command="run")
    sampler.finish(run)
    assert run.sampler is not None and run.sampler.samples > taken
    assert run.sampler.self_check() == []


def test_no_timer_when_the_training_thread_is_not_the_main_thread() -> None:
    """A signal handler runs in the main thread only: it would sample the wrong thread."""
    seen: list[object] = []

    def train() -> None:
        state = ProbeState(expected_device="meta")  # owner_thread: this thread
        sampler = StackSampler(state, first_step=1, end_step=3)
        state.clock.begin()
        state.step = 1
        sampler.on_step(1)
        seen.append(signal.getsignal(TIMER_SIGNAL))
        state.step = 3
        sampler.on_step(3)

    worker = threading.Thread(target=train)
    worker.start()
    worker.join()
    assert seen == [signal.SIG_DFL]


def test_the_sampler_thread_ends_with_its_window() -> None:
    state = ProbeState(expected_device="meta")
    sampler = StackSampler(state, first_step=1, end_step=2, interval_s=0.002)
    before = threading.active_count()
    state.clock.begin()
    state.step = 1
    sampler.on_step(1)
    assert threading.active_count() == before + 1
    time.sleep(0.05)
    state.step = 2
    sampler.on_step(2)
    assert threading.active_count() == before  # joined: nothing runs after the window
    taken = sampler.section().samples
    time.sleep(0.05)
    assert sampler.section().samples == taken


def test_on_a_stand_in_the_share_is_judged_of_the_whole_step_and_shown_of_the_hosts_part() -> None:
    """A preflight cannot know how long the GPU would compute: the conservative share decides, the host's is shown."""
    from gputriage.record.sampler import SampledLine, SamplerSection

    line = SampledLine(where="train.py:34", time_s=0.25, busy_s=0.25, other_busy_s=0.25)
    assert SamplerSection(time_s=1.0, lines=[line]).share_pct(line) == 25.0
    assert SamplerSection(time_s=1.0, lines=[line]).host_share_pct(line) is None
    on_stand_in = SamplerSection(time_s=1.0, stand_in_s=0.5, lines=[line])
    assert on_stand_in.share_pct(line) == 25.0 and on_stand_in.host_share_pct(line) == 50.0
    assert SamplerSection(time_s=1.0, stand_in_s=1.0, lines=[line]).host_share_pct(line) is None


def test_the_loaders_hot_code_is_the_function_whose_lines_take_the_wait() -> None:
    """pytorch/examples super_resolution with a hand-written resize in __getitem__: the Python loop's time spreads over
    its lines, the ToTensor after it sits on one NumPy line; the loop line's own time is the DataLoader's machinery."""

    def waiting(where: str, function: str, self_s: float, depth: int) -> SampledLine:
        return SampledLine(where, function, 10, self_s, self_s, {"data_wait": self_s}, 0.0, self_s, depth)

    lines = [
        waiting("main.py:49", "train", 0.30, 1),
        waiting("data.py:43", "Resize.__call__", 0.25, 4),
        waiting("data.py:44", "Resize.__call__", 0.35, 4),
        waiting("data.py:51", "ToTensor.__call__", 0.10, 4),
    ]
    run = Run(command="run")
    run.sampler = SamplerSection(
        steps=9, samples=200, time_s=2.0, phase_s={"data_wait": 1.0, "forward": 1.0}, lines=lines
    )
    assert loader_hot_line(run) == "data.py:44 (Resize.__call__, 2 lines), 60.0% of the wait"


def test_the_sampler_shortens_the_switch_interval_only_inside_its_window() -> None:
    """A sample lands where the time goes only if a thread in a Python loop hands the GIL over soon: the sampler sets
    a short switch interval for its window, and the job's own is back after it."""
    before = sys.getswitchinterval()
    sampler = StackSampler(ProbeState("cpu"), first_step=1, end_step=3)
    sampler.on_step(1)
    try:
        assert sys.getswitchinterval() == SAMPLING_SWITCH_INTERVAL_S
    finally:
        sampler.on_step(3)
    assert sys.getswitchinterval() == before


def test_a_line_large_only_in_the_hosts_part_of_a_stand_in_step_is_a_borderline_note_that_says_so() -> None:
    """Python batch building beside a wide model: 7% of the stand-in's step (its compute is most of it), 68% of the
    host's part. It was silent; it is now a borderline note with both numbers and the run that decides."""
    from gputriage.record.run import Run as RunRecord
    from gputriage.rules.compute import sampled_cpu_work

    line = SampledLine(
        where="train.py:16", samples=40, time_s=0.07, busy_s=0.07, phase_s={"other": 0.07}, other_busy_s=0.07
    )
    sampler = SamplerSection(steps=9, samples=600, time_s=1.0, busy_s=1.0, phase_s={"other": 0.07, "forward": 0.93},
                             stand_in_s=0.897, lines=[line], first_step=1, last_step=9)  # fmt: skip
    run = RunRecord(command="run", expect_device="cuda", resolved_device="cuda")
    run.sampler = sampler
    [finding] = sampled_cpu_work(run)
    assert finding.severity.value == "info" and finding.where == "train.py:16"
    assert "Borderline" in finding.title and "68.0% of the host's part of the step" in finding.title
    assert "`gputriage run` on the GPU machine decides" in finding.title
    assert finding.evidence["line_pct_of_host_step"] == 68.0


def test_the_kept_lines_always_hold_the_cpu_work_and_the_loader_wait_among_many_model_lines() -> None:
    """A GPT's forward spreads over dozens of lines with more time each than the step's batch building: keeping the
    lines by time alone dropped the line a finding needed (a Python batch builder, the DataLoader's hot code)."""
    from gputriage.collectors.stack_sampler import _LineCount
    from gputriage.record.sampler import MAX_LINES

    sampler = StackSampler(ProbeState(expected_device="meta"), first_step=1, end_step=3, interval_s=0.002)
    for n in range(3 * MAX_LINES):
        sampler._done.lines[("model.py", n)] = _LineCount(
            "Block.forward", 10, 1.0 + n, 1.0 + n, 0.0, 0.0, 2, {"forward": 1.0}
        )
    sampler._done.lines[("train.py", 214)] = _LineCount("<module>", 2, 0.07, 0.07, 0.05, 0.0, 0, {"other": 0.07})
    sampler._done.lines[("data.py", 9)] = _LineCount("__getitem__", 2, 0.06, 0.06, 0.0, 0.06, 1, {"data_wait": 0.06})
    lines = sampler.section().lines
    assert len(lines) == MAX_LINES
    kept = {line.where for line in lines}
    assert {"train.py:214", "data.py:9"} <= kept
    assert f"model.py:{3 * MAX_LINES - 1}" in kept  # the busiest model lines still come first


def _stand_in_run(backing: str, syncs_per_step: int) -> Run:
    """A preflight's record: the stand-in computed half of the sampled step; one line is 20% of it, all CPU work."""
    from gputriage.record.compute import ComputeSection, HostSync
    from gputriage.record.stand_in import StandInSection

    line = SampledLine(
        where="train.py:154", samples=120, time_s=0.2, busy_s=0.2, phase_s={"other": 0.2}, other_busy_s=0.2
    )
    run = Run(command="run", expect_device="cuda", resolved_device="cuda")
    run.stand_in = StandInSection(preflight=True, backing=backing, simulated="cuda")
    run.sampler = SamplerSection(steps=90, samples=600, time_s=1.0, busy_s=1.0, phase_s={"other": 0.5, "forward": 0.5},
                                 stand_in_s=0.5, lines=[line], first_step=1, last_step=90)  # fmt: skip
    syncs = [HostSync("item", "train.py:160", count=3 * syncs_per_step, steps=3)] if syncs_per_step else []
    run.compute = ComputeSection(ops_per_device={"cuda": 300}, window_steps=3, window_wall_s=0.03, syncs=syncs)
    return run


def test_a_stand_in_line_is_judged_on_the_least_share_it_can_have_of_a_gpu_step() -> None:
    """numpy augmentation beside a small MLP: 20% of the stand-in's step, whose other half is the stand-in computing
    the model. A GPU runs that compute beside the host and at least as fast, so its step takes at most half a second
    of this window's second: the line is at least 40% of it, a warning the sampled share alone left borderline."""
    from gputriage.rules.compute import sampled_cpu_work

    [finding] = sampled_cpu_work(_stand_in_run("cpu", syncs_per_step=0))
    assert finding.severity.value == "warning" and finding.where == "train.py:154"
    assert finding.evidence["line_pct_of_step"] == 20.0
    assert finding.evidence["line_pct_of_gpu_step_min"] == 40.0
    low, high = finding.evidence["line_pct_interval_90"]  # type: ignore[misc]
    assert 20.0 < low < 40.0 < high
    assert finding.title.startswith("At least 40.0% of a GPU step is CPU work at train.py:154")
    # the views list the evidence in order: the interval sits right under the share it is of, not under the 20%
    assert list(finding.evidence)[:3] == ["line_pct_of_gpu_step_min", "line_pct_interval_90", "line_pct_of_step"]


def test_a_step_that_waits_for_the_device_or_a_meta_stand_in_keeps_the_measured_share() -> None:
    """A host read every step makes the GPU's compute add to the host's part (the sum the stand-in measured); the
    meta backing computes nothing, so it bounds nothing: both stay at the 20% share, borderline."""
    from gputriage.rules.compute import sampled_cpu_work

    [waits] = sampled_cpu_work(_stand_in_run("cpu", syncs_per_step=1))
    assert waits.evidence["line_pct_of_gpu_step_min"] == 20.0 and waits.severity.value == "info"
    [meta] = sampled_cpu_work(_stand_in_run("meta", syncs_per_step=0))
    assert "line_pct_of_gpu_step_min" not in meta.evidence and meta.severity.value == "info"
    assert meta.title.startswith("Borderline: 20.0% of the step is CPU work")


def test_gputriage_frames_on_top_are_not_the_users_cpu_work() -> None:
    """Under a preflight every op goes through the stand-in's Python dispatch, and the probes wrap a few calls: a
    sample with gputriage's frame on top is the stand-in computing (a GPU's work) or a probe, never the user's CPU
    work. Lightning's training_step, whose model calls run outside the forward phase, was charged with the stand-in's
    compute and came out as CPU work."""
    from gputriage.collectors.preflight import redirect
    from gputriage.collectors.stack_sampler import _library_of

    assert _library_of(redirect.__file__) == "gputriage"
    assert _library_of(np.__file__) == "numpy"
    assert _library_of(__file__) == "python"  # the user's own code (a test file plays it)
    sampler = StackSampler(ProbeState("cuda"), first_step=1, end_step=3)

    def users_line(work: Callable[[], FrameType]) -> FrameType:
        return work()

    redirect_frame = users_line(lambda: _frame_inside(redirect))
    sampler._count(sampler._done, redirect_frame, "other", busy=True, weight_s=0.004)
    assert redirect_frame.f_code.co_filename == redirect.__file__
    counted = [c for (path, _), c in sampler._done.lines.items() if path == __file__]
    assert counted and all(c.other_busy_s == 0.0 and c.time_s == 0.004 for c in counted)


def _frame_inside(module: object) -> FrameType:
    """A frame whose code claims to be the module's file: what the sampler sees while the stand-in computes."""
    code = compile("import sys\nframe = sys._getframe()", getattr(module, "__file__"), "exec")  # noqa: B009
    scope: dict[str, object] = {}
    exec(code, scope)
    frame = scope["frame"]
    assert isinstance(frame, FrameType)
    return frame


def test_a_shared_machines_stalls_in_the_stand_in_do_not_lengthen_the_gpu_step() -> None:
    """Ten steps of 4 ms host work and 3 ms stand-in compute, two of which stalled to 150 ms (another process's
    threads on the same two cores): each step's compute counts at most twice the median, so a GPU step is bounded by
    4 or 6 ms, never 150."""
    from gputriage.record.steps import Step

    steps = [Step(i, 0.0, 0.004 + si, stand_in_s=si) for i, si in enumerate([0.003] * 8 + [0.150, 0.150], start=1)]
    sampler = SamplerSection(first_step=1, last_step=10, steps=10, samples=100, time_s=sum(s.wall_s for s in steps),
                             stand_in_s=sum(s.stand_in_s or 0.0 for s in steps))  # fmt: skip
    scale = sampler.gpu_step_scale(steps, waits_every_step=False)
    assert scale is not None and abs(scale - sum(s.wall_s for s in steps) / (8 * 0.004 + 2 * 0.006)) < 1e-9
    # a step that waits for the device adds the (capped) compute to the host's part
    serial = sampler.gpu_step_scale(steps, waits_every_step=True)
    assert serial is not None and abs(serial - sum(s.wall_s for s in steps) / (8 * 0.007 + 2 * 0.010)) < 1e-9


def test_a_line_one_sample_landed_on_is_not_named() -> None:
    """A trial: one sample of four, at `torch.save(...)` after the loop, was "at least 32.4% of a GPU step is CPU
    work" there; a line needs MIN_SAMPLES_AT_LINE samples to be named at all."""
    from gputriage.rules.compute import MIN_SAMPLES_AT_LINE, sampled_cpu_work

    run = _stand_in_run("cpu", syncs_per_step=0)
    assert run.sampler is not None
    one = msgspec.structs.replace(run.sampler.lines[0], samples=MIN_SAMPLES_AT_LINE - 1)
    run.sampler = msgspec.structs.replace(run.sampler, samples=4, lines=[one])
    assert sampled_cpu_work(run) == []
