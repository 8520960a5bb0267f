"""Hostile and odd input (issue #13): one bad field drops one event and says so; the trace is refused only when
nothing usable is left; nothing blocks, recurses without bound, or reaches the terminal raw."""

from __future__ import annotations

import gzip
import json
import os
import struct
import threading
import zlib
from pathlib import Path
from typing import Any

import pytest
from builders import TraceBuilder, training_loop

from gputriage.cli import main
from gputriage.errors import InputError
from gputriage.tracing.limits import TraceLimits
from gputriage.tracing.source import Source
from gputriage.tracing.summary import analyse_trace

DEEP = 100_000
_RAW_KERNEL = '{"ph": "X", "cat": "kernel", "name": "k", "ts": %s, "dur": 1, "args": {"stream": 7}}'


def _loop_with(*extra: dict[str, Any] | str, meta: dict[str, Any] | None = None) -> str:
    """A small healthy loop's JSON text with extra events (dicts, or raw JSON text) in the middle of its list."""
    b = training_loop(steps=3)
    if meta:
        b.meta.update(meta)
    text = json.dumps({**b.meta, "traceEvents": b.events})
    raw = [json.dumps(e) if isinstance(e, dict) else e for e in extra]
    at = text.index('"traceEvents": [') + len('"traceEvents": [')
    text = text[:at] + "".join(r + ", " for r in raw) + text[at:]
    # The builder writes ns-exact times as "@ns:..." strings; turn them into numbers as Kineto writes them.
    import re

    return re.sub(r'"@ns:(\d+)"', lambda m: f"{int(m.group(1)) // 1000}.{int(m.group(1)) % 1000:03d}", text)


def _kernel(**fields: Any) -> dict[str, Any]:
    event = {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 10, "dur": 5, "args": {"stream": 7}}
    event.update(fields)
    return event


def _write(tmp_path: Path, text: str, name: str = "t.json") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("event", "reason"),
    [
        (_kernel(ts=5 * 10**15, dur=5 * 10**15), "ts + dur out of range"),
        (_kernel(cat=[]), "cat is not a string"),
        (_kernel(dur=-40), "dur negative"),  # a time that runs backwards
        (_kernel(ts=0), "ts more than a day away from the rest of the trace"),  # a 53-year window otherwise
        (
            '{"ph": "X", "cat": "kernel", "name": "k", "ts": 1e999999, "dur": 1, "args": {"stream": 7}}',
            "ts out of range",
        ),
        (
            '{"ph": "X", "cat": "kernel", "name": "k", "ts": ' + "9" * 5000 + ', "dur": 1, "args": {"stream": 7}}',
            "ts out of range",
        ),
        ('{"ph": "X", "cat": "kernel", "name": "k", "ts": NaN, "dur": 1, "args": {"stream": 7}}', "ts not a number"),
        (_kernel(dur="soon"), "dur not a number"),
        (_kernel(name=["a"]), "name is not a string"),
        (_kernel(ph=None), "ph is not a string"),  # a trial: dropped with no note, `events_dropped: 0`
        (_kernel(ph=1.5), "ph is not a string"),
        (_kernel(ph=["X"]), "ph is not a string"),
        ('{"ph": "X", "cat": "kernel", "args": {"x": ' + "[" * DEEP + "]" * DEEP + "}}", "nested too deeply"),
        ("17", "not an object"),
    ],
)
def test_one_bad_event_is_dropped_and_counted(tmp_path: Path, event: dict[str, Any] | str, reason: str) -> None:
    clean = analyse_trace(_write(tmp_path, _loop_with(), "clean.json"))
    r = analyse_trace(_write(tmp_path, _loop_with(event)))
    assert r.events_dropped == 1
    assert any(note.startswith("1 event dropped: " + reason) for note in r.notes), r.notes
    assert (r.busy_pct, r.gpu_events, r.steps) == (clean.busy_pct, clean.gpu_events, clean.steps)


def test_nothing_usable_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, json.dumps({"traceEvents": [_kernel(ts=5 * 10**15, dur=5 * 10**15), _kernel(cat=[])]}))
    assert main(["trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no usable event" in err and "ts + dur out of range" in err


@pytest.mark.parametrize("where", ["header", "tail"])
def test_deep_nesting_in_the_header_or_tail_loses_only_those_keys(tmp_path: Path, where: str) -> None:
    deep = "[" * DEEP + "]" * DEEP
    text = _loop_with()
    text = '{"junk": ' + deep + ", " + text[1:] if where == "header" else text[:-1] + ', "junk": ' + deep + "}"
    r = analyse_trace(_write(tmp_path, text))
    assert r.steps == 3 and r.gpu_events
    assert any("not readable JSON" in n for n in r.notes), r.notes


@pytest.mark.parametrize("rank", ["²", "--1", "9" * 5000, 2**80, -3, True, [1]])
def test_a_bad_distributed_rank_is_ignored_with_a_note(tmp_path: Path, rank: object) -> None:
    text = _loop_with(meta={"distributedInfo": {"rank": rank, "world_size": 8, "backend": "nccl"}})
    r = analyse_trace(_write(tmp_path, text))
    assert r.rank is None and r.world_size == 8
    assert any("distributedInfo.rank" in n for n in r.notes), r.notes


def test_a_nested_trace_events_key_in_the_header_is_not_the_list(tmp_path: Path) -> None:
    inner = {"traceEvents": [_kernel(name="decoy", ts=1, dur=1_000_000)]}
    r = analyse_trace(_write(tmp_path, _loop_with(meta={"meta": inner})))
    clean = analyse_trace(_write(tmp_path, _loop_with(), "clean.json"))
    assert (r.busy_pct, r.gpu_events) == (clean.busy_pct, clean.gpu_events)
    assert r.notes == []


def test_nan_and_infinity_tokens_are_read(tmp_path: Path) -> None:
    text = _loop_with(
        '{"ph": "X", "cat": "kernel", "name": "NaN", "ts": Infinity, "dur": -Infinity, "args": {"stream": 7}}',
        meta={"nanField": 0},
    ).replace('"nanField": 0', '"nanField": NaN')
    r = analyse_trace(_write(tmp_path, text))
    assert r.steps == 3 and r.events_dropped == 1


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "trace.json"
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            analyse_trace(fifo)
        except BaseException as exc:  # the test checks which one
            outcome.append(exc)
        else:
            outcome.append(None)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(timeout=10)
    assert not thread.is_alive(), "reading a FIFO blocked"
    assert isinstance(outcome[0], InputError) and "FIFO" in str(outcome[0])


def test_a_folder_passed_as_a_file_and_a_device_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="character device"):
        analyse_trace(Path("/dev/null"))


def test_a_gzip_bomb_is_refused_early(tmp_path: Path) -> None:
    stack = "train.py(1): f;" * 200
    event = json.dumps(
        {"ph": "X", "cat": "cpu_op", "name": "aten::add", "ts": 1, "dur": 1, "args": {"Call stack": stack}}
    )
    body = ('{"traceEvents": [' + ", ".join([event] * 3000) + "]}").encode()
    path = tmp_path / "bomb.json.gz"
    path.write_bytes(gzip.compress(body, 9))
    limits = TraceLimits(gzip_ratio_after_bytes=1 << 20)
    assert len(body) / path.stat().st_size > limits.max_gzip_ratio
    with pytest.raises(InputError, match="decompression bomb"):
        analyse_trace(path, limits=limits)
    assert analyse_trace(path, limits=TraceLimits(max_gzip_ratio=1e6, gzip_ratio_after_bytes=1 << 20)).cpu_ops
    # Below what real traces reach, the limit the user set is named, and the file is not called a bomb.
    with pytest.raises(InputError, match=r"more than --max-gzip-ratio 2 allows") as low:
        analyse_trace(path, limits=TraceLimits(max_gzip_ratio=2, gzip_ratio_after_bytes=1 << 20))
    assert "decompression bomb" not in str(low.value)


def test_more_events_than_the_limit_names_the_file_and_the_flag(tmp_path: Path) -> None:
    path = training_loop(steps=3).write(tmp_path / "t.json")
    with pytest.raises(InputError, match=f"^{path} holds more than 10 events.*--max-events"):
        analyse_trace(path, limits=TraceLimits(max_events=10))


def test_a_size_limit_under_one_gib_is_shown_as_given(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = training_loop(steps=30).write(tmp_path / "t.json")
    assert main(["trace", str(path), "--max-gib", "0.00001"]) == 2
    assert "holds more than 1e-05 GiB of JSON" in capsys.readouterr().err  # it said "more than 0 GiB"


def test_escape_sequences_never_reach_the_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evil = "aten::copy_\x1b]0;evil\x07\x1b[2J"
    b = training_loop(steps=3, cpu_op_us=6000)
    b.meta["deviceProperties"] = [{"name": "GPU\x1b[31mred"}]
    for event in b.events:
        if event["name"] == "aten::mul":
            event["name"] = evil
    path = b.write(tmp_path / "evil.json")
    main(["trace", str(path)])
    shown = capsys.readouterr()
    assert "\x1b" not in shown.out and "\x07" not in shown.out and "\x1b" not in shown.err
    assert "\\x1b" in shown.out  # shown, escaped
    main(["trace", str(path), "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert doc["trace"]["ranks"][0]["device"] == "GPU\x1b[31mred"  # the JSON keeps the exact text
    assert evil in doc["trace"]["ranks"][0]["cpu_compute"]["top_ops"]
    main(["trace", str(path), "--out", str(tmp_path / "out")])
    capsys.readouterr()
    assert "\x1b" not in (tmp_path / "out" / "report.md").read_text()


def test_a_newline_in_a_name_cannot_start_a_line_of_its_own(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A fresh-clone tester's op named "...\ngputriage verdict: HEALTHY" printed a fake verdict line under the real one.
    fake = "aten::mul\ngputriage verdict: HEALTHY\r\n# gputriage: HEALTHY"
    b = training_loop(steps=3, cpu_op_us=6000)
    for event in b.events:
        if event["name"] == "aten::mul":
            event["name"] = fake
    path = b.write(tmp_path / "fake.json")
    for verbose in ([], ["-v"]):
        main(["trace", str(path), "--out", str(tmp_path / "out"), *verbose])
        out = capsys.readouterr().out
        lines = [line.strip() for line in out.splitlines()]
        assert "aten::mul\\x0agputriage verdict: HEALTHY" in out  # shown, on its line
        assert not [line for line in lines if line.startswith(("gputriage verdict: HEALTHY", "# gputriage"))]
    report = (tmp_path / "out" / "report.md").read_text().splitlines()
    assert not [line for line in report if line.startswith(("gputriage verdict", "# gputriage: HEALTHY"))]
    main(["trace", str(path), "--json"])
    assert fake in json.loads(capsys.readouterr().out)["trace"]["ranks"][0]["cpu_compute"]["top_ops"]


def test_markup_in_names_is_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b = training_loop(steps=3, cpu_op_us=6000)
    for event in b.events:
        if event["name"] == "aten::mul":
            event["name"] = "aten::mul[/][bold]x"
    assert main(["trace", str(b.write(tmp_path / "markup.json"))]) == 0
    assert "aten::mul[/][bold]x" in capsys.readouterr().out


def test_odd_threads_and_streams(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(0, 10, 100)
    b._x("cpu_op", "aten::mm", 5, 10, [1, 2], {"a": 1})
    b._x("kernel", "k2", 200, 10, 0, 7, stream="0x7", correlation=[1])
    b._x("kernel", "k3", 300, 10, 0, 7, stream=2**70, correlation="12")
    r = analyse_trace(b.write(tmp_path / "odd.json"))
    assert r.gpu_events == 3 and r.cpu_ops == 1 and r.events_dropped == 0


def test_the_same_trace_given_twice_is_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A fresh-clone tester's `trace ok.json ok.json` was told "cannot tell which rank ok.json, ok.json is".
    path = training_loop(steps=3).write(tmp_path / "ok.json")
    for second in (str(path), str(tmp_path / "." / "ok.json")):
        assert main(["trace", str(path), second]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "is given twice: pass each trace once" in err
    assert main(["trace", str(tmp_path), str(path)]) == 2  # the file, and the folder that holds it
    assert "is given twice" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"traceEvents": []}', "holds no event"),
        ('{"traceEvents": [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "x"}}]}', "not a timed one"),
        ('{"traceEvents": [], "x": 1, "traceEvents": [' + json.dumps(_kernel()) + "]}", "two traceEvents lists"),
    ],
)
def test_a_trace_with_nothing_timed_is_refused_not_called_healthy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str, said: str
) -> None:
    assert main(["trace", str(_write(tmp_path, text))]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err


def test_ctrl_c_while_starting_is_an_exit_code_not_a_traceback(monkeypatch: pytest.MonkeyPatch) -> None:
    from gputriage import cli

    def interrupted(argv: object) -> object:  # Ctrl-C lands while the command's modules are imported
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "build_parser", interrupted)
    assert cli.main(["trace", "x.json"]) == 130


def _same_instant(tmp_path: Path, count: int) -> Path:
    path = tmp_path / "same.json"
    path.write_text(json.dumps({"traceEvents": [_kernel(ts=100, dur=1) for _ in range(count)]}))
    return path


def test_more_rows_than_a_window_at_one_instant_are_taken_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a window cut can only fall between two instants: 20 kernels at one instant with windows of 10 rows once looped
    # forever (a stranger's trace of 410,000 events at one timestamp hung `trace`)
    monkeypatch.setattr("gputriage.tracing.sweep.WINDOW_ROWS", 10)
    trace = analyse_trace(_same_instant(tmp_path, 20))

    assert trace.gpu_events == 20


def test_too_many_rows_at_one_instant_are_refused_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("gputriage.tracing.sweep.WINDOW_ROWS", 10)
    monkeypatch.setattr("gputriage.tracing.sweep.MAX_SAME_INSTANT_ROWS", 15)

    code = main(["trace", str(_same_instant(tmp_path, 20))])

    err = capsys.readouterr().err
    assert code == 2
    assert "start at the same instant" in err and len(err.strip().splitlines()) == 1


def test_framing_a_buffer_of_brackets_takes_memory_by_the_piece_not_by_the_buffer() -> None:
    # a stranger's 100 MB of '[' took 4.2 GB: every structural byte cost about 40 bytes of arrays at once
    import tracemalloc

    from gputriage.tracing import framing

    buf = b"[" * (8 << 20)
    tracemalloc.start()
    try:
        elements = framing.list_elements(buf)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert elements.list_end is None and not len(elements.ends)
    assert peak_bytes < 96 << 20  # 8 MiB of brackets framed whole took ~330 MiB


def test_the_header_key_is_found_across_pieces_and_not_inside_a_long_string() -> None:
    from gputriage.tracing import framing

    decoy = '"' + "x" * (3 << 20) + '\\"traceEvents\\": [' + '"'  # the key's text inside a 3 MiB string
    doc = ('{"a": ' + decoy + ', "traceEvents": [1, 2]}').encode()
    at = framing.key_at_top_level(doc, b"traceEvents")
    assert at is not None and doc[at : at + 5] == b"[1, 2"


def test_a_window_of_one_device_event_shows_its_busy_share_with_that_basis(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a stranger's trace whose kernels all had a bad ts: the one copy left made "busy/window 100%" the headline
    good = _kernel(ts=10, dur=2)
    bad = [_kernel(ts="abc") for _ in range(30)]
    path = _write(tmp_path, json.dumps({"traceEvents": [good, *bad]}))
    assert main(["trace", str(path)]) == 0
    out = capsys.readouterr().out
    assert "busy/window 100% of 1 device event" in out


def test_kernels_whose_args_hold_no_stream_are_said_to_be_unreadable_not_a_cpu_only_recording(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # every kernel's args was a string: the verdict told the user to record CUDA activity, which they had done
    events = []
    for i in range(30):
        events.append(
            {
                "ph": "X",
                "cat": "cuda_runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": 1,
                "ts": i * 10,
                "dur": 2,
                "args": {"correlation": i},
            }
        )
        events.append(
            {
                "ph": "X",
                "cat": "kernel",
                "name": "k",
                "pid": 0,
                "tid": 7,
                "ts": i * 10 + 3,
                "dur": 4,
                "args": "stream 7",
            }
        )
    path = _write(tmp_path, json.dumps({"traceEvents": events}))
    main(["trace", str(path)])
    out = capsys.readouterr().out
    assert "hold no readable `stream`" in " ".join(out.split())
    assert "ProfilerActivity.CUDA" not in out


def test_a_fifo_named_like_a_ranks_trace_in_a_folder_is_skipped_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # it was left out without a word, and the job looked one rank short
    (tmp_path / "rank1.json").write_text(_loop_with())
    os.mkfifo(tmp_path / "rank0.json")
    main(["trace", str(tmp_path)])
    err = capsys.readouterr().err
    assert "skipped rank0.json: is a FIFO, not a trace file" in err


def test_the_spill_folder_of_a_killed_run_is_removed_by_the_next_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # SIGKILL leaves /tmp/gputriage-trace-* behind (130 MB for a large trace), and nothing removed it
    import tempfile

    from gputriage.tracing.store import SpillDir

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / "gputriage-trace-999999999-abc"
    dead.mkdir()
    (dead / "gpu-1-1.rows").write_bytes(b"\0" * 16)
    live = tmp_path / f"gputriage-trace-{os.getpid()}-xyz"
    live.mkdir()
    spill = SpillDir()
    try:
        assert spill.path.parent == tmp_path
    finally:
        spill.cleanup()
    assert not dead.exists() and live.exists()


def test_a_symlink_loop_in_a_rank_folder_is_skipped_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial: two links to each other beside a rank's trace gave a traceback (RuntimeError from Path.resolve)."""
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "a.json").symlink_to("b.json")
    (folder / "b.json").symlink_to("a.json")
    training_loop(steps=3).write(folder / "rank0.json")
    assert main(["trace", str(folder)]) == 0
    assert "skipped a.json" in capsys.readouterr().err
    (folder / "rank0.json").unlink()
    assert main(["trace", str(folder)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_trace_file_name_of_bytes_utf8_cannot_hold_is_written_as_its_escape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial: `trace $'\\xff\\xfe.json' --json` (or --out) died of UnicodeEncodeError: the name entered the record
    as PEP 383 surrogates, which JSON and the HTML cannot hold."""
    name = os.fsdecode(b"run\xff\xfe.json")
    path = training_loop(steps=3).write(tmp_path / name)
    assert main(["trace", str(path), "--json"]) == 0
    assert "run\\\\udcff\\\\udcfe.json" in capsys.readouterr().out
    assert main(["trace", str(path), "--out", str(tmp_path / "out")]) == 0
    assert "udcff" in (tmp_path / "out" / "report.md").read_text()  # markdown escapes the backslash


def test_a_gzip_header_comment_past_64_kib_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial: a 20 MB gzip comment took 40 s (gzip reads it a byte per call) before any limit applied."""
    body = training_loop(steps=3).write(tmp_path / "plain.json").read_bytes()
    packed = zlib.compressobj(9, zlib.DEFLATED, -15)
    deflated = packed.compress(body) + packed.flush()
    trailer = struct.pack("<II", zlib.crc32(body), len(body))
    named = tmp_path / "named.json.gz"  # a file name in the header (FNAME), as gzip(1) writes: read as usual
    named.write_bytes(b"\x1f\x8b\x08\x08\0\0\0\0\0\xff" + b"train.json\0" + deflated + trailer)
    assert main(["trace", str(named)]) == 0
    capsys.readouterr()
    commented = tmp_path / "comment.json.gz"
    commented.write_bytes(b"\x1f\x8b\x08\x10\0\0\0\0\0\xff" + b"C" * 200_000 + b"\0" + deflated + trailer)
    assert main(["trace", str(commented)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gzip header's comment is longer than 64 KiB" in err


def test_step_marks_of_zero_length_leave_rung_5_inconclusive_not_healthy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial: four ProfilerSteps of `dur: 0` gave "one step: 0 ms", rung 5 passed and the verdict was HEALTHY."""
    b = training_loop(steps=4)
    for event in b.events:
        if str(event.get("name", "")).startswith("ProfilerStep#"):
            event["dur"] = 0
    assert main(["trace", str(b.write(tmp_path / "zero.json")), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"]["status"] == "inconclusive"
    rung5 = next(r for r in doc["ladder"] if r["rung"] == 5)
    assert rung5["status"] == "skipped" and "4 steps of zero length" in rung5["reason"]


def test_a_read_error_of_the_input_is_named_as_one(capsys: pytest.CaptureFixture[str]) -> None:
    """A trial: `trace /proc/self/mem` (a regular file whose read fails with EIO) said "cannot write the output"."""
    assert main(["trace", "/proc/self/mem"]) == 2
    assert capsys.readouterr().err == "gputriage: error: cannot read /proc/self/mem: Input/output error\n"


def test_kernels_without_a_stream_are_named_as_such_not_as_untimed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial: 100 timed kernels with no `args` were refused as "none of them timed (no op, no kernel)"."""
    events = [{"ph": "X", "cat": "kernel", "name": "k", "ts": 10 * i, "dur": 1} for i in range(100)]
    path = tmp_path / "nostream.json"
    path.write_text(json.dumps({"traceEvents": events}))
    assert main(["trace", str(path)]) == 2
    assert "its 100 timed events are no op, and no kernel, copy or memset as the PyTorch profiler writes them (no " in (
        capsys.readouterr().err
    )


def test_a_legacy_autograd_profiler_export_is_not_called_kernels(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial: torch.autograd.profiler's export_chrome_trace (a bare list of aten ops with no `cat`, pid "CPU
    functions") was refused as "its 1,442 kernels, copies or memsets carry no readable `args.stream`": no kernel."""
    events = [
        {"name": "aten::slice", "ph": "X", "ts": 10 * i, "dur": 2, "tid": 0, "pid": "CPU functions"} for i in range(50)
    ]
    path = tmp_path / "legacy.json"
    path.write_text(json.dumps(events))
    assert main(["trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert "kernels, copies or memsets carry" not in err and "export_chrome_trace" in err and err.count("\n") == 1


@pytest.mark.parametrize(
    ("head", "named"),
    [(b"PK\x03\x04", "a zip archive"), (b"\xfd7zXZ\x00", "xz-compressed"), (b"\x28\xb5\x2f\xfd", "zstd-compressed")],
)
def test_an_archive_renamed_json_gz_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], head: bytes, named: str
) -> None:
    """A trial: zip/xz/zstd files renamed .json.gz were refused with "it starts with b'P'"."""
    path = tmp_path / "trace.json.gz"
    path.write_bytes(head + b"rest of the archive")
    assert main(["trace", str(path)]) == 2
    assert f"is {named}, not a PyTorch profiler trace: unpack it" in capsys.readouterr().err


def test_gzip_inside_gzip_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = training_loop(steps=3).write(tmp_path / "t.json.gz")
    twice = tmp_path / "twice.json.gz"
    twice.write_bytes(gzip.compress(path.read_bytes()))
    assert main(["trace", str(twice)]) == 2
    assert "is gzip inside gzip: unpack it once" in capsys.readouterr().err


def test_a_long_tail_after_the_events_is_passed_over_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trial: a trace followed by 5 GiB of NULs took 25 s, read to its end only to be dropped, under a note that
    said the tail was not read. A plain file's tail past what is kept is now passed over by position."""
    path = training_loop(steps=3).write(tmp_path / "tail.json")
    with path.open("ab") as f:
        f.write(b" " * (40 << 20))
    source = Source(path, TraceLimits())
    source.read(100)
    position = source._raw.tell()
    assert source.skip_rest() == path.stat().st_size - 100 and source.eof
    assert source._raw.tell() == position  # nothing more was read
    source.close()
    assert main(["trace", str(path)]) == 0
    assert "MiB after traceEvents were not read" in capsys.readouterr().err


def test_device_events_of_no_length_at_one_instant_are_too_little_to_judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 8: a hundred kernels, all at ts 1000 with dur 0, no step marks: a window of 0 µs and no busy figure, yet
    rung 5 passed and the verdict was HEALTHY."""
    path = _write(tmp_path, json.dumps({"traceEvents": [_kernel(ts=1000, dur=0) for _ in range(100)]}))
    assert main(["trace", str(path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["verdict"]["status"] == "inconclusive"
    assert next(r for r in report["ladder"] if r["rung"] == 5)["status"] != "pass"


def test_kernels_all_unreadable_are_not_told_to_record_cuda(tmp_path: Path) -> None:
    """Trial 9: every kernel with a negative `dur` was dropped, and the answer was "the profiler recorded the CPU
    only: record with activities=[CPU, CUDA]", which the trace's own launches and drop note contradict."""
    b = training_loop(steps=6)
    for event in b.events:
        if event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"):
            event["dur"] = -abs(event["dur"]) - 1
    result = analyse_trace(b.write(tmp_path / "negative.json"), jobs=1)
    why = result.device_not_read()
    assert why is not None and "dur negative" in why and "likely among them" in why
    assert "ProfilerActivity.CUDA" not in why


def test_an_event_that_ends_decades_after_the_rest_is_dropped(tmp_path: Path) -> None:
    """A trial: one ProfilerStep with `dur` 1e15 µs was kept: "one step: 166666666.68 s", and the DataLoader's
    finding vanished."""
    clean = training_loop(steps=3)
    b = training_loop(steps=3)
    b.step(3, 1_000.0, 1e15)
    r = analyse_trace(b.write(tmp_path / "long.json"))
    assert r.events_dropped == 1
    assert any("dur runs more than a day past the rest of the trace" in note for note in r.notes), r.notes
    assert r.steps == analyse_trace(clean.write(tmp_path / "clean.json")).steps
