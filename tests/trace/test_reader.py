"""The reader takes every real-world spelling of a Kineto trace, and refuses anything else with one line."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from builders import TraceBuilder
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputriage.errors import InputError
from gputriage.tracing import reader
from gputriage.tracing.numbers import us_to_ns
from gputriage.tracing.summary import analyse_trace


def _tiny() -> TraceBuilder:
    b = TraceBuilder()
    b.step(1, 0, 1000)
    b.launch(10, 20, 400)
    b.launch(20, 500, 400)
    return b


def test_gzip_and_plain_give_the_same_numbers(tmp_path: Path) -> None:
    plain = analyse_trace(_tiny().write(tmp_path / "t.json"))
    packed = analyse_trace(_tiny().write(tmp_path / "t.json.gz"))
    assert plain.busy_pct == packed.busy_pct == pytest.approx(100 * 800 / 880, abs=1e-3)


def test_nanoseconds_survive_epoch_timestamps(tmp_path: Path) -> None:
    # 1.7e15 µs: a float64 would round these to 0.25 µs; the 1 ns gap between the kernels must survive.
    b = TraceBuilder()
    b.launch(0, 10.000, 1.000)
    b.launch(1, 11.001, 1.000)
    r = analyse_trace(b.write(tmp_path / "ns.json"))
    assert r.window_us == pytest.approx(2.001, abs=1e-9)
    assert r.idle_pct == pytest.approx(100 * 0.001 / 2.001, abs=1e-3)
    ns, codes = us_to_ns([b"1712195495505543.217", b"12", b"-0.5", b"1.5e3"])
    assert ns.tolist() == [1712195495505543217, 12000, -500, 1_500_000]
    assert not codes.any()


def test_old_format_categories_and_string_tids(tmp_path: Path) -> None:
    doc = {
        "schemaVersion": 1,
        "traceEvents": [
            {"ph": "X", "cat": "Operator", "name": "ProfilerStep#1", "pid": 1, "tid": "9", "ts": 0, "dur": 100},
            {
                "ph": "X",
                "cat": "Runtime",
                "name": "cudaLaunchKernel",
                "pid": 1,
                "tid": "9",
                "ts": 1,
                "dur": 2,
                "args": {"correlation": 5, "external id": 3},
            },
            {
                "ph": "X",
                "cat": "Kernel",
                "name": "k",
                "pid": 0,
                "tid": "stream 7",
                "ts": 10,
                "dur": 50,
                "args": {"stream": 7, "correlation": 5},
            },
            {
                "ph": "X",
                "cat": "Memset",
                "name": "Memset (Device)",
                "pid": 0,
                "tid": "stream 7",
                "ts": 60,
                "dur": 10,
                "args": {"stream": 7, "correlation": 6},
            },
        ],
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(doc))
    r = analyse_trace(path)
    assert (r.steps, r.gpu_events, r.busy_pct, r.compute_pct) == (1, 2, 100.0, pytest.approx(100 * 50 / 60, abs=1e-3))


def test_huge_integers_invalid_utf8_and_bare_list(tmp_path: Path) -> None:
    big = 123456789012345678901234567890
    body = (
        b'[{"ph":"X","cat":"kernel","name":"k\xff\xfe","pid":0,"tid":7,"ts":1,"dur":5,"args":{"stream":7,'
        b'"correlation":' + str(big).encode() + b',"Sequence number":' + str(big).encode() + b"}},"
        b'{"ph":"X","cat":"kernel","name":"k2","pid":0,"tid":7,"ts":' + str(big).encode() + b',"dur":5,'
        b'"args":{"stream":7}}]'
    )
    path = tmp_path / "odd.json"
    path.write_bytes(body)
    r = analyse_trace(path)
    assert (r.gpu_events, r.events_dropped, r.window_us) == (1, 1, 5.0)


def test_amd_and_mtia_streams_are_device_work(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(0, 5, 10, "dma_request", cat="mtia_ccp_events")
    b.launch(1, 20, 10, "add-dtype_Float", cat="mtia_ccp_events")
    r = analyse_trace(b.write(tmp_path / "mtia.json"))
    assert (r.gpu_events, r.memory_pct, r.compute_pct) == (2, pytest.approx(40.0), pytest.approx(40.0))


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b'{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}, {"ph": "X", "na', "truncated or corrupt"),
        (b'{"schemaVersion": 1, "traceEvents": [', "truncated or corrupt"),
        (b'{"hello": "world"}', "no traceEvents"),
        (b"not json at all", "is not a PyTorch profiler trace: it starts with b'n'"),
        (b"null", "where a trace's JSON starts with '\\{' or '\\['"),  # "null" is JSON, not a trace (was "not JSON")
        (b"", "empty"),
        (b"SQLite format 3\x00" + b"\x00" * 64, "Nsight Systems"),
    ],
)
def test_bad_input_is_one_clean_line(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(InputError, match=message):
        analyse_trace(path)


def test_truncated_gzip_and_nsys_report(tmp_path: Path) -> None:
    packed = gzip.compress(json.dumps({"traceEvents": [{"ph": "X"}] * 2000}).encode())
    cut = tmp_path / "cut.json.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(InputError, match="truncated or corrupt"):
        analyse_trace(cut)
    rep = tmp_path / "profile.nsys-rep"
    rep.write_bytes(b"\x00\x01binary")
    with pytest.raises(InputError, match="Nsight Systems"):
        analyse_trace(rep)


def test_cli_exit_code_two_on_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gputriage.cli import main

    path = tmp_path / "x.json"
    path.write_text('{"a": [1, 2')
    assert main(["trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "gputriage: error:" in err and "Traceback" not in err


def test_events_split_across_chunks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A tiny chunk forces every cut path: events and strings straddling chunks, braces inside strings.
    monkeypatch.setattr(reader, "CHUNK_BYTES", 97)
    b = _tiny()
    b.op('aten::weird}, {"name', 30, 5)
    whole = analyse_trace(b.write(tmp_path / "t.json"))
    assert (whole.gpu_events, whole.cpu_ops, whole.steps) == (2, 1, 1)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.one_of(
        st.binary(max_size=400),
        st.builds(
            lambda cut: gzip.compress(json.dumps(_tiny_doc()).encode())[:cut],
            st.integers(min_value=0, max_value=600),
        ),
        st.builds(
            lambda prefix, cut: (prefix + json.dumps(_tiny_doc())).encode()[:cut],
            st.sampled_from(["", " ", "\n"]),
            st.integers(min_value=0, max_value=2000),
        ),
        st.recursive(
            st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
            lambda inner: (
                st.lists(inner, max_size=4)
                | st.dictionaries(
                    st.sampled_from(["traceEvents", "ph", "ts", "dur", "cat", "args", "stream", "name"]),
                    inner,
                    max_size=5,
                )
            ),
            max_leaves=20,
        ).map(lambda v: json.dumps(v).encode()),
    )
)
def test_fuzz_any_bytes_give_a_result_or_a_clean_error(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "fuzz.json"
    path.write_bytes(data)
    try:
        analyse_trace(path)
    except InputError as exc:
        assert "\n" not in str(exc)


def _tiny_doc() -> dict[str, object]:
    b = _tiny()
    return {"schemaVersion": 1, "traceEvents": b.events, "traceName": "x"}


def test_nccl_old_and_new_kernel_names_are_communication(tmp_path: Path) -> None:
    b = TraceBuilder()
    b.launch(0, 10, 100, "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)")
    b.launch(1, 200, 100, "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)")
    b.launch(2, 400, 100, "void at::native::vectorized_elementwise_kernel<4>()")
    r = analyse_trace(b.write(tmp_path / "nccl.json"))
    assert r.comm is not None and r.comm.kernels == 2
    assert r.comm_pct == pytest.approx(100 * 200 / 490, abs=1e-3)
