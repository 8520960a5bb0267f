"""What a fifth trial of real traces and hostile files found (stop 39): Kineto's cuda_sync marks counted as GPU
work, blocking copies counted with the sync calls under one name, and out-of-range numbers in a hand-edited
report.json printed as they were."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from builders import TraceBuilder


def _with_sync_marks(path: Path) -> Path:
    """Two 100 µs kernels in a 1 ms window, and a 300 µs "Event Sync" mark on the GPU lane between them."""
    b = TraceBuilder()
    b.step(1, 0.0, 1000.0)
    b.launch(10.0, 20.0, 100.0)
    b.runtime("cudaEventSynchronize", 130.0, 300.0)
    b._x("cuda_sync", "Event Sync", 130.0, 300.0, 0, 7, stream=7, correlation=-1)
    b.launch(500.0, 900.0, 100.0)
    return b.write(path)


def test_cuda_sync_marks_are_neither_kernels_nor_busy_time(tmp_path: Path, trace_json: Any) -> None:
    """HTA leaves the `cuda_sync` category out of its breakdowns: the mark is the queue waiting for the host, not
    work (was: 120 kernels where the trace has 79, 21.4% busy where it is 19.4%)."""
    code, doc = trace_json(_with_sync_marks(tmp_path / "t.json"))
    assert code in (0, 1)
    rank = doc["trace"]["ranks"][0]
    assert rank["launches"]["kernels"] == 2
    assert rank["busy_pct"] == pytest.approx(100 * 200 / 980, abs=0.01)  # 20 µs to 1000 µs: the GPU's window


def test_the_corpus_event_sync_trace_matches_the_kernel_union(traces: Path, trace_json: Any) -> None:
    _, doc = trace_json(traces / "hta/critical_path/cuda_event_sync/event_sync_trace.json.gz")
    rank = doc["trace"]["ranks"][0]
    assert rank["busy_pct"] == pytest.approx(19.392, abs=0.01)
    assert rank["launches"]["kernels"] == 4


def test_blocking_copies_are_counted_apart_from_the_sync_calls(traces: Path, trace_json: Any) -> None:
    """hta negative_queue_length rank0: 106 "sync calls" were 76 sync calls and 30 device-to-host copies."""
    _, doc = trace_json(traces / "hta/negative_queue_length_values_check/rank0.json.gz")
    syncs = doc["trace"]["ranks"][0]["syncs"]
    assert (syncs["calls"], syncs["copy_calls"]) == (106, 30)
    finding = next(f for f in doc["findings"] if f["code"] == "host-sync-in-loop")
    assert finding["evidence"]["blocking_copy_calls"] == 30


def test_compare_refuses_a_fifo_instead_of_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "before.json"
    os.mkfifo(fifo)
    done = subprocess.run(  # its own process: a blocked open fails this test after 60 s, not the whole run
        [sys.executable, "-m", "gputriage", "compare", str(fifo), str(fifo)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == f"gputriage: error: refusing to read {fifo}: it is a FIFO, not a regular file\n"


@pytest.mark.parametrize(
    ("bom", "encoding"), [(b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"), (b"\xff\xfe\x00\x00", "UTF-32")]
)
def test_a_trace_saved_as_utf16_or_32_is_named_so(tmp_path: Path, bom: bytes, encoding: str) -> None:
    """(was: "it starts with b'\\xff', where a trace's JSON starts with '{'")"""
    path = tmp_path / "t.json"
    path.write_bytes(bom + '{"traceEvents": []}'.encode("utf-16-le"))
    done = subprocess.run(
        [sys.executable, "-m", "gputriage", "trace", str(path)], check=False, capture_output=True, text=True
    )
    assert done.returncode == 2
    said = f"{path} is {encoding} text: a trace is UTF-8 JSON; save it again as UTF-8"
    assert done.stderr == f"gputriage: error: {said}\n"


def test_an_out_that_is_a_symlink_is_named_in_the_refusal(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "real")
    _with_sync_marks(tmp_path / "t.json")
    done = subprocess.run(
        [sys.executable, "-m", "gputriage", "trace", str(tmp_path / "t.json"), "--out", str(link)],
        check=False,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 2
    assert f"argument --out: {link} is a symlink; give the folder it points to" in done.stderr
