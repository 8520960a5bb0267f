"""A large plain trace read by several processes, or spilled to disk, gives exactly what one process reads."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest
from builders import TraceBuilder, training_loop

from gputriage.errors import InputError
from gputriage.tracing import collect as collect_module
from gputriage.tracing import reader, split, store, sweep
from gputriage.tracing.limits import DEFAULT_LIMITS
from gputriage.tracing.reader import first_event_at
from gputriage.tracing.store import SpillDir
from gputriage.tracing.summary import analyse_trace


def _split_small(monkeypatch: pytest.MonkeyPatch, size: int, parts: int, budget_rows: int = 10**9) -> None:
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(split, "_MIN_RANGE_BYTES", size // (parts + 1))
    monkeypatch.setattr(split, "MEMORY_BUDGET_ROWS", budget_rows)
    monkeypatch.setattr(split, "_MIN_WORKER_BUDGET", budget_rows)


def _record(path: Path, jobs: int) -> object:
    return msgspec.to_builtins(analyse_trace(path, jobs=jobs))


def test_byte_ranges_match_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    b = training_loop(steps=30, loader_us=1500, sync_idle_us=800, pageable_copy_us=100, kernel_us=100)
    b.op('aten::tricky}, {"ph": "X"', 5, 1)  # an event boundary look-alike inside a string
    path = b.write(tmp_path / "big.json")
    whole = _record(path, jobs=1)
    _split_small(monkeypatch, path.stat().st_size, 4)
    planned = split._plan(path, 4, DEFAULT_LIMITS)
    assert planned is not None and len(planned[2]) >= 3  # really split into ranges
    assert _record(path, jobs=4) == whole


def test_spilled_runs_and_small_windows_match_one_pass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = training_loop(steps=40, loader_us=1500, sync_idle_us=800, cpu_op_us=300, kernel_us=100).write(
        tmp_path / "t.json"
    )
    whole = _record(path, jobs=1)
    # Rows spilled to disk every batch, read back in windows of a few hundred rows, from three processes.
    _split_small(monkeypatch, path.stat().st_size, 3, budget_rows=300)
    monkeypatch.setattr(collect_module, "MEMORY_BUDGET_ROWS", 300)
    monkeypatch.setattr(sweep, "WINDOW_ROWS", 300)
    assert _record(path, jobs=3) == whole


def test_a_name_full_of_braces_is_never_a_range_boundary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # `{}, {}, ...` inside a name decodes as a list of empty objects: a split must never start inside it.
    b = training_loop(steps=20, kernel_us=100)
    b.op("{}, " * 50_000 + "}, {", 7, 1)
    b.events.insert(len(b.events) // 2, b.events.pop())
    path = b.write(tmp_path / "braces.json")
    data = path.read_bytes()
    inside = data.index(b"{}, {}, {}") + 1000
    found = first_event_at(path, inside, DEFAULT_LIMITS)
    assert found is not None and data[found : found + 2] == b'{"' and found > data.index(b'}, {"', inside)
    whole = _record(path, jobs=1)
    _split_small(monkeypatch, len(data), 3)
    assert _record(path, jobs=3) == whole


def test_truncated_file_split_into_ranges_is_a_clean_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = training_loop(steps=30, kernel_us=100).write(tmp_path / "cut.json")
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.9)])  # the profiler was still writing
    _split_small(monkeypatch, len(data), 3)
    spill = SpillDir()
    with pytest.raises(InputError, match="truncated or corrupt"):
        split.collect(path, DEFAULT_LIMITS, spill, jobs=3)
    spill.cleanup()


def test_no_temporary_file_is_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    path = training_loop(steps=10).write(tmp_path / "t.json")
    monkeypatch.setattr(collect_module, "MEMORY_BUDGET_ROWS", 50)
    analyse_trace(path)
    bad = TraceBuilder()
    bad.events.append({"ph": "X", "cat": "kernel", "name": "k", "ts": "1e999999", "dur": 1, "args": {"stream": 7}})
    with pytest.raises(InputError):
        analyse_trace(bad.write(tmp_path / "bad.json"))
    assert list((tmp_path / "tmp").iterdir()) == []


def test_a_large_key_after_the_events_is_read_exactly_and_within_bounds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chrome JSON may carry stackFrames or a blob after traceEvents: a byte range cut inside it held the list's end
    and the file was refused as corrupt. One process then reads it exactly, keeping only a bounded part of the tail."""

    b = training_loop(steps=12, loader_us=1500, kernel_us=100)
    clean = b.write(tmp_path / "clean.json")
    text = clean.read_text()
    big = tmp_path / "big_tail.json"
    blob = '{"frame": {"name": "x", "parent": 1}}, ' * 20_000
    big.write_text(text[:-1] + ', "stackFrames": [' + blob + '{"frame": 0}], "junk": "' + "y" * 400_000 + '"}')
    _split_small(monkeypatch, big.stat().st_size, 4)
    monkeypatch.setattr(reader, "MAX_TAIL_BYTES", 64 << 10)
    monkeypatch.setattr(reader, "CHUNK_BYTES", 64 << 10)
    r = analyse_trace(big, jobs=4)
    expected = analyse_trace(clean, jobs=1)
    assert (r.steps, r.gpu_events, r.busy_pct) == (expected.steps, expected.gpu_events, expected.busy_pct)
    assert any("after traceEvents were not read" in n for n in r.notes), r.notes


def test_many_runs_still_give_full_windows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Many byte ranges (or spilled runs) each cover a stretch of the timeline: a window is still cut where its rows,
    # counted across every run, reach the limit, not where each run's share of the limit would.
    path = training_loop(steps=40, loader_us=1500, sync_idle_us=800, kernel_us=100).write(tmp_path / "t.json")
    _split_small(monkeypatch, path.stat().st_size, 8, budget_rows=200)
    monkeypatch.setattr(collect_module, "MEMORY_BUDGET_ROWS", 200)
    monkeypatch.setattr(store, "INDEX_STRIDE", 16)
    spill = SpillDir()
    try:
        collected, _ = split.collect(path, DEFAULT_LIMITS, spill, jobs=8)
        runs = sum(len(r) for r in collected.runs.values())
        rows = sum(run.count for r in collected.runs.values() for run in r)
        windows = list(sweep.iterate_windows(sweep.context_of(collected), collected.runs, window_rows=2000))
    finally:
        spill.cleanup()
    assert runs >= 20  # many runs: each one's share of a window would be under a hundred rows
    assert len(windows) <= 2 * rows // 2000 + 2


def test_a_worker_that_reads_two_ranges_keeps_both_ranges_files(tmp_path: Path) -> None:
    # A pool process may take two byte ranges; each opens the shared folder anew. Its second range's run files
    # once got the first one's names, and overwrote them.
    first, second = SpillDir(tmp_path), SpillDir(tmp_path)
    names = {first.new_file("gpu"), second.new_file("gpu"), first.new_file("gpu")}
    assert len(names) == 3


def test_strays_between_large_events_at_the_files_start_are_dropped(tmp_path: Path) -> None:
    """Trial 9: three kernels at ts 5-7 µs between events with a large `args` string, at the very start of the file,
    were most of its first batch, whose median was taken for the trace's time: the third was kept (a 51-year window,
    the GPU "0.0% busy"). The trace's time is read from its first 256 timed events."""
    from builders import GPU_PID, STREAM

    b = training_loop(steps=30, loader_us=1500, kernel_us=100)
    clean = b.write(tmp_path / "clean.json")
    t0 = b.events[0]["ts"]
    blob = {
        "ph": "X",
        "cat": "cpu_op",
        "name": "blob",
        "pid": 1,
        "tid": 1,
        "ts": t0,
        "dur": 1,
        "args": {"x": "y" * 2_000_000},
    }
    stray = [
        {"ph": "X", "cat": "kernel", "name": "stray", "pid": GPU_PID, "tid": STREAM, "ts": 5 + i, "dur": 1,
         "args": {"stream": STREAM}}
        for i in range(3)
    ]  # fmt: skip
    b.events[0:0] = [blob, blob, *stray, blob]
    path = b.write(tmp_path / "sandwich.json")
    expected = analyse_trace(clean, jobs=1)
    for jobs in (1, 2):
        got = analyse_trace(path, jobs=jobs)
        assert (got.window_us, got.busy_pct, got.events_dropped) == (expected.window_us, expected.busy_pct, 3), jobs


def test_stray_timestamps_are_dropped_wherever_the_batches_and_ranges_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trial 8: kernels at ts 5 µs among events of 2023 were dropped by their batch's own median start only where
    they were few in their batch: twenty side by side, or one alone in its batch or byte range, were kept, the window
    became 53 years and the GPU "0.0% busy", and `--jobs 1` and `--jobs 2` differed. Each batch is judged against
    the trace's time: the byte ranges' first events, or the batches read so far, weighted by their sizes."""
    from builders import GPU_PID, STREAM

    b = training_loop(steps=30, loader_us=1500, kernel_us=100)
    clean = b.write(tmp_path / "clean.json")
    stray = [
        {"ph": "X", "cat": "kernel", "name": "stray", "pid": GPU_PID, "tid": STREAM, "ts": 5 + i, "dur": 10,
         "args": {"stream": STREAM}}
        for i in range(21)
    ]  # fmt: skip
    middle, late = len(b.events) // 2, 3 * len(b.events) // 4
    b.events[late:late] = stray[20:]
    b.events[middle:middle] = stray[:20]
    path = b.write(tmp_path / "strays.json")
    monkeypatch.setattr(reader, "CHUNK_BYTES", 4 << 10)  # small batches: the twenty strays are most of theirs
    expected = analyse_trace(clean, jobs=1)
    for jobs in (1, 3):
        if jobs > 1:
            _split_small(monkeypatch, path.stat().st_size, 3)
        got = analyse_trace(path, jobs=jobs)
        assert (got.window_us, got.busy_pct, got.events_dropped) == (expected.window_us, expected.busy_pct, 21), jobs
