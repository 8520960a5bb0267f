"""The reader's parts against plain references: number parsing vs Decimal, framing vs json, medians vs numpy."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputriage.tracing import framing, quantile
from gputriage.tracing.numbers import I64_MAX, OK, OUT_OF_RANGE, us_to_ns
from gputriage.tracing.store import SpillDir

_DECIMALS = st.builds(
    lambda whole, frac, negative: f"{'-' if negative else ''}{whole}{'.' + frac if frac else ''}",
    st.integers(0, 10**17),
    st.text("0123456789", max_size=9),
    st.booleans(),
)


@given(st.lists(_DECIMALS, min_size=1, max_size=40))
def test_times_parse_exactly_like_decimal(texts: list[str]) -> None:
    ns, codes = us_to_ns([t.encode() for t in texts])
    for text, value, code in zip(texts, ns.tolist(), codes.tolist(), strict=True):
        expected = int(Decimal(text) * 1000)  # truncated toward zero below 1 ns
        if abs(expected) <= I64_MAX and len(text.lstrip("-").split(".")[0]) <= 16:
            assert (value, code) == (expected, OK), text
        else:
            assert code == OUT_OF_RANGE, text


@given(
    st.lists(
        st.recursive(
            st.none() | st.integers() | st.text(max_size=6),
            lambda x: st.lists(x, max_size=3) | st.dictionaries(st.text(max_size=4), x, max_size=3),
            max_leaves=10,
        ),
        max_size=8,
    )
)
def test_list_elements_split_like_json(values: list[object]) -> None:
    text = json.dumps(values)
    body = text[1:].encode()  # inside the list, up to and including its ']'
    found = framing.list_elements(body)
    assert found.list_end == len(body) - 1
    assert [json.loads(body[a:b]) for a, b in zip(found.starts, found.ends, strict=True)] == values


def test_the_top_level_key_is_not_a_nested_one() -> None:
    doc = b'{"meta": {"traceEvents": [1]}, "s": "\\"traceEvents\\": [", "traceEvents": [2]}'
    at = framing.key_at_top_level(doc, b"traceEvents")
    assert at is not None and json.loads(doc[at:].split(b"]")[0] + b"]") == [2]


def test_non_json_numbers_become_strings_of_the_same_length() -> None:
    doc = b'{"a": NaN, "b": -Infinity, "c": "NaN stays", "d": Infinity}'
    fixed = framing.repair_non_json_numbers(doc)
    assert len(fixed) == len(doc)
    assert json.loads(fixed) == {"a": "N", "b": "-Infini", "c": "NaN stays", "d": "Infini"}


_INT64 = st.integers(-(2**63), 2**63 - 1)
# Wide and narrow ranges, the int64 extremes, and many equal values (a column of identical kernel times).
_MEDIAN_VALUES = st.lists(
    _INT64 | st.integers(0, 3000) | st.sampled_from([-(2**63), -1, 0, 7, 2**63 - 1]), min_size=1, max_size=3000
)


@settings(max_examples=60, deadline=None)
@given(_MEDIAN_VALUES, st.integers(1, 500))
def test_spilled_medians_are_exact(values: list[int], memory: int) -> None:
    spill = SpillDir()
    try:
        original = quantile.MEMORY_VALUES
        quantile.MEMORY_VALUES = memory
        median = quantile.Median(spill, "m")
        for chunk in np.array_split(np.array(values, dtype=np.int64), 5):
            median.add(chunk)
        ordered = sorted(values)
        assert median.middle() == (ordered[(len(values) - 1) // 2], ordered[len(values) // 2])
    finally:
        quantile.MEMORY_VALUES = original
        spill.cleanup()


def test_spill_files_live_in_one_private_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    spill = SpillDir()
    path = spill.new_file("rows")
    assert path.parent.parent == tmp_path and oct(path.parent.stat().st_mode & 0o777) == "0o700"
    spill.cleanup()
    assert list(tmp_path.iterdir()) == []
