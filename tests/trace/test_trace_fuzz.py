"""Mutated real and synthetic traces through the real CLI: a report or one clean line, never a traceback or a hang.

The long run is `bench/fuzz.py --cases 10000`; this is a slice of the same cases, small enough for `make test`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fuzzing
from gputriage.cli import main

CASES = 120
SLOW_CASE_S = 20.0  # a case this slow is a hang in the making (the slowest seed takes well under a second)


@pytest.mark.parametrize("start", range(0, CASES, 40))
def test_mutated_traces_give_a_report_or_one_clean_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], start: int
) -> None:
    if not fuzzing.have_corpus():
        pytest.skip("trace corpus not found: fuzzing synthetic traces only in test_fuzz_synthetic")
    _run_cases(tmp_path, capsys, range(start, start + 40))


def test_fuzz_synthetic(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    # Without the corpus the seeds are the synthetic traces alone; with it, this still runs them on their own.
    monkeypatch.setattr(fuzzing, "_SMALL_TRACES", ())
    fuzzing.trace_seeds.cache_clear()
    try:
        _run_cases(tmp_path, capsys, range(1000, 1040))
    finally:
        fuzzing.trace_seeds.cache_clear()


def _run_cases(tmp_path: Path, capsys: pytest.CaptureFixture[str], indexes: range) -> None:
    for index in indexes:
        one = fuzzing.case("trace", 7, index)
        path = tmp_path / f"case{one.suffix}"
        path.write_bytes(one.data)
        started = time.monotonic()
        code = main(fuzzing.KINDS["trace"].argv(path))
        took = time.monotonic() - started
        out, err = capsys.readouterr()
        assert took < SLOW_CASE_S, f"{one.label} took {took:.1f} s"
        if code == 2:
            assert err.count("\n") == 1 and err.startswith("gputriage: error: "), one.label
        else:
            assert code == 0, one.label
            doc = json.loads(out)
            assert "\x1b" not in err
            assert doc["trace"]["ranks"], one.label
        if index % 10 == 0 and one.mutations == ():
            assert code == 0, f"an untouched seed was refused: {one.label}: {err}"


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
_EVENT = st.fixed_dictionaries(
    {},
    optional={
        "ph": st.sampled_from(["X", "B", "i", "s", "f", "M"]) | _JSON_VALUES,
        "cat": st.sampled_from(["kernel", "cpu_op", "cuda_runtime", "python_function", "user_annotation"])
        | _JSON_VALUES,
        "name": st.sampled_from(["ProfilerStep#1", "aten::mm", "cudaLaunchKernel", "train.py(1): f"]) | _JSON_VALUES,
        "pid": st.integers() | _JSON_VALUES,
        "tid": st.integers() | _JSON_VALUES,
        "ts": st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | _JSON_VALUES,
        "dur": st.integers(-(2**70), 2**70) | st.floats(allow_nan=False) | _JSON_VALUES,
        "args": st.fixed_dictionaries(
            {}, optional={"stream": _JSON_VALUES, "correlation": _JSON_VALUES, "Call stack": _JSON_VALUES}
        )
        | _JSON_VALUES,
    },
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(_EVENT, max_size=12),
    st.dictionaries(st.sampled_from(["distributedInfo", "deviceProperties"]), _JSON_VALUES),
)
def test_any_typed_events_give_a_result_or_one_clean_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], events: list[dict[str, object]], meta: dict[str, object]
) -> None:
    path = tmp_path / "typed.json"
    path.write_text(json.dumps({**meta, "traceEvents": events}))
    code = main(["trace", str(path), "--json"])
    out, err = capsys.readouterr()
    assert code in (0, 2)
    if code == 2:
        assert err.count("\n") == 1
    else:
        json.loads(out)
