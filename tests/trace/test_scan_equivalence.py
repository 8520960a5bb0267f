"""The compiled scanner (tracing/_scan.c) is a fast path, never a second definition: whatever it accepts, the Python
path accepts too and turns into the same rows, ids and counts; whatever it declines, the Python path decides.

Each test runs the same input both ways (the scanner on, then `scan.NATIVE = None`) and compares everything pass
one keeps, or the whole `trace --json` document. Inputs: every real trace of the corpus, generated traces, hostile
mutations of real batches, and events of any JSON shape (hypothesis).
"""

from __future__ import annotations

import importlib.util
import json
import random
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest
from builders import training_loop
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzzing
from corpus_path import CORPUS, REPO_ROOT
from gputriage.cli import main
from gputriage.tracing import scan
from gputriage.tracing.collect import Collector
from gputriage.tracing.decode import EventDecoder
from gputriage.tracing.limits import DEFAULT_LIMITS
from gputriage.tracing.store import SpillDir

pytestmark = pytest.mark.skipif(scan.NATIVE is None, reason="the compiled scanner is not built (no C compiler)")

_KINETO_BATCH = b"""[
  {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 12, "tid": 12, "ts": 1712195495505543.217,
   "dur": 25.5, "args": {"External id": 3, "Input Dims": [[64, 64], [64, 64]], "Input type": ["float", "float"]}},
  {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 12, "tid": 12,
   "ts": 1712195495505550.001, "dur": 4.25, "args": {"External id": 3, "cbid": 211, "correlation": 77}},
  {"ph": "s", "id": 77, "pid": 12, "tid": 12, "ts": 1712195495505550.001, "cat": "ac2g", "name": "ac2g"},
  {"ph": "X", "cat": "kernel", "name": "volta_sgemm_128x64_nn", "pid": 0, "tid": 7, "ts": 1712195495505560,
   "dur": 31.999, "args": {"queued": 0, "device": 0, "stream": 7, "correlation": 77, "grid": [4, 1, 1]}},
  {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pageable)", "pid": 0, "tid": 7,
   "ts": 1712195495505600.5, "dur": 3, "args": {"stream": 7, "correlation": 80, "bytes": 4096}},
  {"ph": "X", "cat": "python_function", "name": "train.py(42): step", "pid": 12, "tid": 12,
   "ts": 1712195495505540, "dur": 100, "args": {"Python id": 9}},
  {"ph": "X", "cat": "python_function", "name": "torch/nn/modules/module.py(1743): _call_impl", "pid": 12,
   "tid": 13, "ts": 1712195495505541, "dur": 90},
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 12, "tid": 12, "ts": 1712195495505500,
   "dur": 200.0004},
  {"ph": "M", "name": "process_name", "pid": 12, "args": {"name": "python"}},
  {"ph": "X", "cat": "gpu_user_annotation", "name": "ProfilerStep#3", "pid": 0, "tid": 7, "ts": 1712195495505500,
   "dur": 200, "args": {"stream": 7}},
  {"ph": "X", "name": "an event without a category", "pid": 0, "tid": 9, "ts": -1.5, "dur": 0,
   "args": {"stream": 9}}
]"""


@contextmanager
def _pure_python(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    with monkeypatch.context() as patch:
        patch.setattr(scan, "NATIVE", None)
        yield


def _columns(run: Any) -> dict[str, list[int]]:
    return {name: values.tolist() for name, values in run.read(0, run.count).items()}


def _collected(payloads: list[bytes], tmp_path: Path) -> dict[str, Any]:
    """Everything pass one keeps from these batches, as plain values; or the error the decoder raised."""
    decoder = EventDecoder()
    tmp_path.mkdir(parents=True, exist_ok=True)
    spill = Path(tempfile.mkdtemp(dir=tmp_path))  # hypothesis runs many examples in one tmp_path
    collector = Collector(DEFAULT_LIMITS, SpillDir(spill), budget_rows=3)  # spill often: spilled runs are compared
    try:
        for payload in payloads:
            collector.feed(decoder.decode(payload))
    except msgspec.DecodeError as exc:
        return {"error": type(exc).__name__}
    got = collector.finish()
    stats = got.lane_stats
    return {
        "names": got.names,
        "bits": got.name_bits,
        "wheres": got.wheres,
        "lanes": [(repr(pid), repr(tid)) for pid, tid in got.lanes],  # types too: 0, not numpy's int64(0)
        "lane_stats": [a.tolist() for a in (stats.cpu, stats.steps, stats.loader, stats.runtime)],
        "runs": {label: [_columns(r) for r in runs] for label, runs in got.runs.items()},
        "events": got.events,
        "unread": got.unread_events,
        "dropped": dict(got.dropped),
        "d2h": got.d2h_corr.tolist(),
        "gpu": (got.gpu_rows, got.gpu_first_ts, got.gpu_last_end, got.first_op_ts),
    }


def _both_ways(payloads: list[bytes], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    fast = _collected(payloads, tmp_path / "fast")
    with _pure_python(monkeypatch):
        slow = _collected(payloads, tmp_path / "slow")
    return fast, slow


def test_a_kineto_batch_is_scanned_and_gives_the_python_paths_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert scan.scan(_KINETO_BATCH) is not None
    fast, slow = _both_ways([_KINETO_BATCH], tmp_path, monkeypatch)
    assert fast == slow
    assert fast["events"] == 11
    assert [r["stream"] for r in fast["runs"]["gpu"]] == [[7, 7]]  # the kernel and the copy; not the annotation
    assert fast["dropped"] == {"ts more than a day away from the rest of the trace": 1}  # the event at -1.5 µs
    assert 1712195495505543217 in fast["runs"]["cpu"][0]["ts"]  # exact to the ns, beyond a float's reach
    assert "torch/nn/modules/module.py(1743): _call_impl" in fast["names"]  # interned, then its row dropped


# One edit of the Kineto batch each, and whether the scanner takes the edited batch (else the Python path decides).
_DECLINED = [
    ("an exponent in a time", b'"dur": 25.5', b'"dur": 2.55e1'),
    ("an escaped key", b'"ts": 1712195495505560,', b'"t\\u0073": 1712195495505560,'),
    ("an escaped phase", b'"ph": "X", "cat": "kernel"', b'"ph": "\\u0058", "cat": "kernel"'),
    (
        "a duplicated key",
        b'"pid": 12, "tid": 12, "ts": 1712195495505543.217',
        b'"pid": 12, "pid": 13, "tid": 12, "ts": 1712195495505543.217',
    ),
    (
        "a float pid on a CPU op",
        b'"cat": "cpu_op", "name": "aten::mm", "pid": 12',
        b'"cat": "cpu_op", "name": "aten::mm", "pid": 12.0',
    ),
    ("a stream that is a list", b'"stream": 7, "correlation": 77', b'"stream": [7], "correlation": 77'),
    ("a NaN token", b'"dur": 25.5', b'"dur": NaN'),
    ("a control character in a skipped string", b'"Input type": ["float"', b'"Input type": ["fl\x01oat"'),
    ("a lone surrogate in a skipped string", b'"Input type": ["float"', b'"Input type": ["\\ud800"'),
    ("deep nesting", b'"Input Dims": [[64, 64]', b'"Input Dims": [' + b"[" * 80 + b"]" * 80 + b", [64, 64]"),
    ("args that are a list", b'"args": {"Python id": 9}', b'"args": [9]'),
    ("a missing dur", b', "dur": 100, "args": {"Python id": 9}', b', "args": {"Python id": 9}'),
    ("a time with 17 integer digits", b'"ts": 1712195495505560,', b'"ts": 17121954955055600,'),
    ("a name that is not UTF-8", b'"volta_sgemm_128x64_nn"', b'"volta_\xff_nn"'),
    ("a quoted time with a space", b'"dur": 25.5', b'"dur": " 25.5"'),
    ("a quoted time that is no number", b'"dur": 25.5', b'"dur": "25.5us"'),
    ("a trailing comma", b'"args": {"name": "python"}}', b'"args": {"name": "python"},}'),
]
_SCANNED = [  # string ids and escaped strings, read by the Python path's own functions
    (
        "AMD's string stream and bytes",
        b'"stream": 7, "correlation": 80, "bytes": 4096',
        b'"stream": "0x7", "correlation": 80, "bytes": "4096"',
    ),
    (
        "a 2021 Kineto string tid",
        b'"pid": 12, "tid": 12, "ts": 1712195495505543.217',
        b'"pid": 12, "tid": "1890023232", "ts": 1712195495505543.217',
    ),
    (
        "a null pid",
        b'"pid": 12, "tid": 12,\n   "ts": 1712195495505550.001',
        b'"pid": null, "tid": 12,\n   "ts": 1712195495505550.001',
    ),
    ("a string that is no number", b'"correlation": 77}', b'"correlation": "0x"}'),
    ("an escaped stream", b'"stream": 7, "correlation": 77', b'"stream": "\\u0037", "correlation": 77'),
    ("an escaped name", b'"aten::mm"', b'"aten::\\u006dm"'),
    ("a Windows path in a frame", b'"train.py(42): step"', b'"C:\\\\work\\\\train.py(42): step"'),
    ("a quote in a kernel name", b'"volta_sgemm_128x64_nn"', b'"k<\\"a\\">"'),
    ("torch_npu's quoted time", b'"ts": 1712195495505543.217', b'"ts": "1712195495505543.217"'),
    ("a quoted negative duration", b'"dur": 25.5', b'"dur": "-25.5"'),
]


@pytest.mark.parametrize(
    ("label", "old", "new", "scanned"),
    [(*edit, False) for edit in _DECLINED] + [(*edit, True) for edit in _SCANNED],
)
def test_an_edited_batch_is_scanned_or_declined_and_read_the_same_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, label: str, old: bytes, new: bytes, scanned: bool
) -> None:
    assert old in _KINETO_BATCH, label
    payload = _KINETO_BATCH.replace(old, new, 1)
    assert (scan.scan(payload) is not None) == scanned, label
    fast, slow = _both_ways([payload], tmp_path, monkeypatch)
    assert fast == slow, label


def test_threads_are_keyed_as_the_python_path_keys_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A string tid only on a library frame, which is dropped before threads are keyed: the other threads are plain
    ints, keyed in the Python path's order (hypothesis found the scanned rows keyed by numpy ints, in another order)."""
    payload = b"""[
      {"ph": "X", "ts": 0, "dur": 1, "pid": 0, "tid": 1, "cat": "cuda_runtime", "name": "cudaLaunchKernel"},
      {"ph": "X", "ts": 0, "dur": 1, "pid": 0, "tid": 0, "cat": "cpu_op", "name": "aten::mm"},
      {"ph": "X", "ts": 0, "dur": 1, "pid": 0, "tid": "0x0", "cat": "python_function", "name": "torch/a.py(1): f"}
    ]"""
    assert scan.scan(payload) is not None
    fast, slow = _both_ways([payload], tmp_path, monkeypatch)
    assert fast == slow
    assert fast["lanes"] == [("0", "0"), ("0", "1")]


def test_call_stacks_give_the_python_paths_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Older traces write a "Call stack" on each op: the user's innermost frame is its line, read once per stack."""
    payload = _KINETO_BATCH.replace(
        b'"args": {"External id": 3, "Input', b'"args": {"Call stack": "torch/nn/f.py(3): g;train.py(9): f", "In'
    ).replace(b'"args": {"Python id": 9}', b'"args": {"Python id": 9, "Call stack": "train.py(1): main"}')
    assert EventDecoder().decode(payload).scanned is not None
    fast, slow = _both_ways([payload], tmp_path, monkeypatch)
    assert fast == slow
    assert fast["wheres"] == ["train.py:9", "train.py:1"]  # the Python frame's stack registers a line too
    where = {(ts, w) for run in fast["runs"]["cpu"] for ts, w in zip(run["ts"], run["where"], strict=True)}
    assert (1712195495505543217, 0) in where  # aten::mm at train.py:9


def _mutations(payload: bytes, rng: random.Random) -> Iterator[bytes]:
    """Single-byte edits, deletions and insertions of JSON's own characters anywhere in the batch."""
    alphabet = b'{}[]",:\\ 0123456789.-eEnulltrfaX\x00\x1f\x7f\xff'
    for _ in range(400):
        at = rng.randrange(len(payload))
        kind = rng.randrange(3)
        byte = bytes([rng.choice(alphabet)])
        if kind == 0:
            yield payload[:at] + byte + payload[at + 1 :]
        elif kind == 1:
            yield payload[:at] + payload[at + 1 :]
        else:
            yield payload[:at] + byte + payload[at:]


def test_no_mutation_of_a_batch_is_accepted_that_the_python_path_would_not_read_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    accepted = declined = 0
    for i, payload in enumerate(_mutations(_KINETO_BATCH, random.Random(5))):
        fast, slow = _both_ways([payload], tmp_path / str(i), monkeypatch)
        assert fast == slow, payload
        if scan.scan(payload) is None:
            declined += 1
        else:
            accepted += 1
            assert "error" not in slow, payload  # the scanner accepted bytes msgspec refuses: it must never
    assert accepted > 50 and declined > 50  # both sides of the fast path were exercised


_SCALARS = st.none() | st.booleans() | st.integers(-(2**65), 2**65) | st.floats(allow_nan=False) | st.text(max_size=6)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)
_TIME = st.integers(-(2**64), 2**64) | st.decimals(allow_nan=False, allow_infinity=False, places=4) | _JSON
_ID = st.integers(-(2**64), 2**64) | _JSON
_CATS = ["kernel", "cpu_op", "cuda_runtime", "python_function", "user_annotation", "ac2g", "Memcpy", "KERNEL", "x"]
_EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "X", "X", "s", "M"]) | _JSON,
        "cat": st.sampled_from(_CATS) | _JSON,
        "name": st.sampled_from(["aten::mm", "train.py(1): f", "Memcpy DtoH (Device -> Pinned)", ""]) | _JSON,
        "pid": _ID,
        "tid": _ID,
        "ts": _TIME,
        "dur": _TIME,
        "args": st.fixed_dictionaries({}, optional={"stream": _ID, "correlation": _ID, "bytes": _ID}) | _JSON,
    },
)


# Events as Kineto writes them, with the odd forms real traces have (string ids, a missing name, times with more
# or fewer decimals): most batches of these are scanned, so the two paths are compared on rows, not only on refusals.
_PLAIN_TIME = st.decimals(min_value=-(10**6), max_value=10**16, places=4) | st.integers(-(10**6), 10**16)
_PLAIN_TIME = _PLAIN_TIME | _PLAIN_TIME.map(str)  # torch_npu writes times as strings
_PLAIN_ID = st.integers(-(2**40), 2**40) | st.sampled_from(["0x0", "7", "0x1F", "1890023232", "", "12a", "0123"])
_PLAIN_EVENT = st.fixed_dictionaries(
    {
        "ph": st.sampled_from(["X", "X", "X", "X", "X", "s", "M"]),
        "ts": _PLAIN_TIME,
        "dur": _PLAIN_TIME,
        "pid": st.integers(0, 3) | _PLAIN_ID,
        "tid": st.integers(0, 3) | _PLAIN_ID,
    },
    optional={
        "cat": st.sampled_from(_CATS) | st.none(),
        "name": st.sampled_from(
            [
                "aten::mm",
                "train.py(1): f",
                "Memcpy DtoH (Device -> Pinned)",
                "ProfilerStep#2",
                "",
                "C:\\w\\t.py(1): f",
                'k<"q">',
                "tab\there",
                "µs",
            ]
        )
        | st.none(),
        "args": st.fixed_dictionaries(
            {},
            optional={
                "stream": _PLAIN_ID | st.none(),
                "correlation": _PLAIN_ID,
                "bytes": _PLAIN_ID,
                "Call stack": st.sampled_from(["train.py(9): f;torch/x.py(1): g", "", "/a/x.py(3): h"]) | _PLAIN_ID,
            },
        ),
    },
)
_ENCODE = msgspec.json.Encoder(decimal_format="number")  # Decimal times as plain decimals, as Kineto writes them


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(st.lists(_PLAIN_EVENT, max_size=8) | st.lists(_PLAIN_EVENT | _EVENT, max_size=8), min_size=1, max_size=3)
)
def test_events_of_any_shape_give_the_same_rows_both_ways(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batches: list[list[dict[str, Any]]]
) -> None:
    payloads = [_ENCODE.encode(events) for events in batches]
    fast, slow = _both_ways(payloads, tmp_path, monkeypatch)
    assert fast == slow


def _trace_json(path: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, Any]:
    code = main(["trace", str(path), "--json", *extra])
    out, err = capsys.readouterr()
    if code != 0:
        return code, err
    return code, _without_key(json.loads(out), "created_at_s")


def _without_key(value: Any, key: str) -> Any:
    if isinstance(value, dict):
        return {k: _without_key(v, key) for k, v in value.items() if k != key}
    if isinstance(value, list):
        return [_without_key(v, key) for v in value]
    return value


def _real_traces() -> list[Path]:
    folder = CORPUS / "traces"
    return sorted(folder.rglob("*.json*")) if folder.is_dir() else []


@pytest.mark.parametrize("trace", _real_traces(), ids=lambda p: p.name)
def test_every_real_trace_gives_the_same_report_both_ways(
    trace: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    fast = _trace_json(trace, capsys)
    with _pure_python(monkeypatch):
        slow = _trace_json(trace, capsys)
    assert fast == slow


_SCENARIOS = {
    "loader, syncs, pageable copies": {"loader_us": 1500, "sync_idle_us": 800, "pageable_copy_us": 100},
    "CPU ops and NCCL": {"cpu_op_us": 300, "with_nccl": True, "kernel_us": 100},
}


@pytest.mark.parametrize("scenario", _SCENARIOS)
def test_built_traces_give_the_same_report_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, scenario: str
) -> None:
    path = training_loop(steps=12, **_SCENARIOS[scenario]).write(tmp_path / "loop.json")  # type: ignore[arg-type]
    fast = _trace_json(path, capsys)
    with _pure_python(monkeypatch):
        slow = _trace_json(path, capsys)
    assert fast[0] == 0 and fast == slow


def _bench_generator() -> Any:
    """bench/trace_gen.py, the bench's own generator (loaded from its file: bench/ is not a package)."""
    spec = importlib.util.spec_from_file_location("trace_gen", REPO_ROOT / "bench" / "trace_gen.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("shape", ["cnn", "kernels", "cpu"])
def test_generated_shapes_give_the_same_report_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, shape: str
) -> None:
    """The bench's generated shapes (bench/trace_gen.py), at 3 MiB: several batches, every event family."""
    path = tmp_path / f"{shape}.json"
    _bench_generator().generate(path, 3, shape=shape)
    fast = _trace_json(path, capsys, "--jobs", "1")
    with _pure_python(monkeypatch):
        slow = _trace_json(path, capsys, "--jobs", "1")
    assert fast[0] == 0 and fast == slow


@pytest.mark.parametrize("start", [0, 60])
def test_hostile_files_give_the_same_answer_both_ways(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, start: int
) -> None:
    for index in range(start, start + 60):
        one = fuzzing.case("trace", 13, index)
        path = tmp_path / f"case{index}{one.suffix}"
        path.write_bytes(one.data)
        argv = fuzzing.KINDS["trace"].argv(path)
        fast = _run(argv, capsys)
        with _pure_python(monkeypatch):
            slow = _run(argv, capsys)
        assert fast == slow, one.label


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, Any]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, _without_key(json.loads(out), "created_at_s") if code == 0 and out.startswith("{") else err
