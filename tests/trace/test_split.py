"""A large plain trace read by several processes gives exactly what one process reads."""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from builders import training_loop

from gputriage.errors import InputError
from gputriage.tracing import split
from gputriage.tracing.summary import analyse_trace


def test_byte_ranges_match_one_pass(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    b = training_loop(steps=30, loader_us=1500, sync_idle_us=800, pageable_copy_us=100, kernel_us=100)
    b.op('aten::tricky}, {"ph": "X"', 5, 1)  # an event boundary look-alike inside a string
    path = b.write(tmp_path / "big.json")
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(split, "_MIN_RANGE_BYTES", path.stat().st_size // 5)
    planned = split._plan(path, 4)
    assert planned is not None and len(planned[2]) >= 3  # really split into ranges
    one, meta_one = split.collect(path, jobs=1)
    many, meta_many = split.collect(path, jobs=4)
    assert meta_one == meta_many and "traceName" in meta_many
    assert (many.events_total, len(many.gpu), len(many.cpu)) == (one.events_total, len(one.gpu), len(one.cpu))
    for table in ("gpu", "runtime", "cpu"):
        a, c = getattr(one, table), getattr(many, table)
        for col in ("ts", "end", "corr", "extra"):
            assert np.array_equal(getattr(a, col), getattr(c, col)), (table, col)
        assert [one.names[i] for i in a.name] == [many.names[i] for i in c.name]
    whole = msgspec.to_builtins(analyse_trace(path, jobs=1))
    parts = msgspec.to_builtins(analyse_trace(path, jobs=3))
    assert whole == parts


def test_truncated_file_split_into_ranges_is_a_clean_error(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    path = training_loop(steps=30, kernel_us=100).write(tmp_path / "cut.json")
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * 0.9)])  # the profiler was still writing
    monkeypatch.setattr(split, "SPLIT_MIN_BYTES", 0)
    monkeypatch.setattr(split, "_MIN_RANGE_BYTES", len(data) // 4)
    with pytest.raises(InputError, match="truncated or corrupt"):
        split.collect(path, jobs=3)
