"""Pass two in segments (tracing/segments.py): the timeline cut into stretches swept on their own and merged in
order gives every number that one sweep gives, on every corpus trace and on the cases each merge has to get right."""

from __future__ import annotations

import json
import subprocess
import sys
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import pytest
from builders import GPU_PID, MAIN_TID, PID, TraceBuilder, training_loop

from gputriage.errors import InputError
from gputriage.tracing import activity, analysis, quantile, segments, store, sweep
from gputriage.tracing.limits import DEFAULT_LIMITS
from gputriage.tracing.split import collect
from gputriage.tracing.store import SpillDir
from gputriage.tracing.summary import Sweep, merge_sweeps, sweep_timeline


@pytest.fixture
def fine_cuts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Plan cuts on small traces too (a sampled start time every 16 rows); each segment is one window, so the only
    cuts of the timeline are the segments' own (tests/trace/test_split.py cuts windows)."""
    monkeypatch.setattr(store, "INDEX_STRIDE", 16)
    monkeypatch.setattr(segments, "INDEX_STRIDE", 16)
    monkeypatch.setattr(segments, "_BAND_ROWS", 400)
    monkeypatch.setattr(sweep, "WINDOW_ROWS", 1 << 30)


def _both_ways(path: Path, count: int) -> tuple[Any, Any, int]:
    """(one sweep's record, the segmented sweep's record, how many segments), read in this process."""
    spill = SpillDir()
    try:
        collected, header = collect(path, DEFAULT_LIMITS, spill, jobs=1)
        ctx = sweep.context_of(collected)
        whole = sweep_timeline(ctx, collected.runs, spill, jobs=1)
        one = msgspec.to_builtins(whole.result(collected, header, path, None))
        start = partial(Sweep.start, ctx, spill)
        parts = segments.sweep_in_segments(ctx, collected.runs, start, count=count, workers=1)
        merged = merge_sweeps(parts)
        return one, msgspec.to_builtins(merged.result(collected, header, path, None)), len(parts)
    finally:
        spill.cleanup()


def _corpus_traces(traces: Path) -> list[Path]:
    return sorted(p for p in traces.rglob("*") if p.name.endswith((".json", ".json.gz")) and p.is_file())


@pytest.mark.usefixtures("fine_cuts")
def test_every_corpus_trace_gives_the_same_record_in_segments(traces: Path) -> None:
    segmented = 0
    for path in _corpus_traces(traces):
        try:
            one, merged, parts = _both_ways(path, count=6)
        except InputError:
            continue  # a trace that is refused is refused before pass two
        assert merged == one, path
        segmented += parts > 1
    assert segmented >= 15  # most traces really were cut: the comparison is not one sweep against itself


@pytest.mark.usefixtures("fine_cuts")
@pytest.mark.parametrize(
    "loop",
    [
        training_loop(steps=30, loader_us=1500, sync_idle_us=800, pageable_copy_us=100, kernel_us=100),
        training_loop(steps=30, cpu_op_us=3000, kernel_us=50, with_nccl=True),
        training_loop(steps=40, sync_idle_us=2500, kernel_us=20, busy_share=0.5),
    ],
    ids=["loader-sync-copies", "cpu-ops-nccl", "short-kernels"],
)
def test_generated_loops_give_the_same_record_in_segments(tmp_path: Path, loop: TraceBuilder) -> None:
    one, merged, parts = _both_ways(loop.write(tmp_path / "t.json"), count=5)
    assert parts >= 3
    assert merged == one


@pytest.mark.usefixtures("fine_cuts")
def test_caps_and_spilled_medians_merge_as_one_sweep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Each capped list keeps its first entries in time order, the longest gaps are ranked across segments, and a
    # median's values spilled to files by several segments are read together.
    monkeypatch.setattr(activity, "MAX_ATTRIBUTED", 7)
    monkeypatch.setattr(activity, "MAX_COLLECTIVES", 11)
    monkeypatch.setattr(activity, "_TOP_GAPS", 3)
    monkeypatch.setattr(analysis, "MAX_STEP_TIMES", 9)
    monkeypatch.setattr(quantile, "MEMORY_VALUES", 50)
    b = training_loop(steps=30, sync_idle_us=1500, kernel_us=40, busy_share=0.6, with_nccl=True)
    one, merged, parts = _both_ways(b.write(tmp_path / "t.json"), count=5)
    assert parts >= 3
    assert merged == one
    assert len(one["syncs"]["sites"]) >= 1 and one["gaps"]["count"] > 3 and len(one["step_times_us"]) == 9


@pytest.mark.usefixtures("fine_cuts")
def test_a_stream_first_seen_in_a_later_segment(tmp_path: Path) -> None:
    # Stream 9 starts halfway: its first gap is known only in the merge, and only once stream 9 is known.
    b = training_loop(steps=30, kernel_us=100, busy_share=0.8)
    for i in range(15, 30):
        b._corr += 1
        b._x("cuda_runtime", "cudaLaunchKernel", i * 10_000 + 50, 4.0, PID, MAIN_TID, correlation=b._corr)
        b._x("kernel", "side_kernel", i * 10_000 + 400, 300.0, GPU_PID, 9, stream=9, correlation=b._corr)
    one, merged, parts = _both_ways(b.write(tmp_path / "t.json"), count=4)
    assert parts >= 3
    assert merged == one
    assert any(s["stream"] == 9 for s in one["streams"])


@pytest.mark.usefixtures("fine_cuts")
def test_no_cut_where_nothing_is_busy_across_a_target(tmp_path: Path) -> None:
    # One op and one kernel over the whole trace, nothing else: no cut can be chosen outside the op, and every
    # planned cut that runs across more rows than a segment may carry is dropped: one sweep, the same record.
    b = TraceBuilder()
    b.step(0, 0, 100_000)
    b.op("aten::mul", 10, 90_000)
    for i in range(3000):
        b.op("aten::view", 20 + i * 25, 2)
    b.launch(5, 12, 99_000)
    one, merged, _ = _both_ways(b.write(tmp_path / "t.json"), count=4)
    assert merged == one


_WITH_PROCESSES = """
import json, sys, tempfile
import msgspec
import numpy as np
from pathlib import Path
from gputriage.tracing import pool, quantile, segments, store
from gputriage.tracing.summary import analyse_trace

path, scratch = Path(sys.argv[1]), sys.argv[2]
one = msgspec.to_builtins(analyse_trace(path, jobs=1))
store.INDEX_STRIDE = segments.INDEX_STRIDE = 16
segments.SEGMENT_MIN_ROWS = segments.ROWS_PER_SEGMENT = 1
quantile.MEMORY_VALUES = 50  # the workers' medians go to files in the shared folder
tempfile.tempdir = scratch
planned = []
real_plan = segments.plan
segments.plan = lambda *a: planned.append(len(p := real_plan(*a))) or p
three = msgspec.to_builtins(analyse_trace(path, jobs=3))
print(json.dumps({"same": three == one, "segments": planned, "forked": pool.can_fork()}))
"""


def test_the_trace_command_path_with_forked_processes(tmp_path: Path) -> None:
    # In a fresh interpreter: a test session may hold threads of its own, and with a thread alive nothing is forked.
    path = training_loop(steps=60, loader_us=800, sync_idle_us=600, kernel_us=60).write(tmp_path / "t.json")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", _WITH_PROCESSES, str(path), str(scratch)], capture_output=True, text=True, check=True
    )
    result = json.loads(out.stdout)
    assert result["forked"] and result["segments"] and result["segments"][0] >= 2
    assert result["same"]
    assert not list(scratch.iterdir())  # every worker's file went with the analysis's own folder


def test_a_stretch_gets_enough_rows_to_pay_for_itself() -> None:
    assert segments.segment_count(400_000, 8) == 1  # a trace this small is swept in one process
    assert segments.segment_count(900_000, 2) == 6  # three stretches per process: a slower one takes fewer
    assert segments.segment_count(3_600_000, 2) == 6
    assert segments.segment_count(3_600_000, 64) == 24  # not 192 stretches of under 150,000 rows each
    assert segments.segment_count(50_000_000, 1) == 1


def test_the_first_found_wins_across_segments_as_in_one_sweep() -> None:
    # One sweep keeps the first DataLoader line it finds and the first of equally long CPU ops; so does the merge.
    found, later = activity.LoaderWhere(done=True, where="train.py:10"), activity.LoaderWhere(True, "train.py:99")
    found.merge(later)
    assert found.where == "train.py:10"
    missing = activity.LoaderWhere()
    missing.merge(later)
    assert missing.where == "train.py:99"
    first, tie = activity.CpuCompute(longest_ns=5, where="a.py:1"), activity.CpuCompute(longest_ns=5, where="b.py:2")
    first.merge(tie)
    assert first.where == "a.py:1"
    first.merge(activity.CpuCompute(longest_ns=6, where="c.py:3"))
    assert (first.longest_ns, first.where) == (6, "c.py:3")


@pytest.mark.parametrize("seed", range(40))
def test_rows_near_a_target_are_those_that_start_before_it_and_end_after_its_lo(seed: int) -> None:
    rng = np.random.default_rng(seed)
    count = int(rng.integers(0, 400))
    ts = np.sort(rng.integers(0, 1000, count)).astype(np.int64)  # many equal starts
    end = ts + rng.choice([0, 1, 5, 50, 400], count)  # some rows span several targets, some none
    at = np.sort(rng.choice(np.arange(10, 1100), int(rng.integers(1, 8)), replace=False))
    targets = [segments._Target(int(a) - int(rng.integers(1, 60)), int(a)) for a in at]
    targets = [t for i, t in enumerate(targets) if i == 0 or t.lo > targets[i - 1].lo]  # as planned: lo ascending
    found = segments._near_in_chunk(ts, end, targets)
    for target, rows in zip(targets, found, strict=True):
        expected = np.flatnonzero((ts < target.at) & (end > target.lo))
        assert rows.tolist() == expected.tolist()
