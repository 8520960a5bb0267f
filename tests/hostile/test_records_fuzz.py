"""Fuzzing the two input kinds of `gputriage report`: rank records and report.json. Every case ends in exit 0 or in one
line and exit 2; no traceback, no hang (pytest-timeout), no control character in any text output. A few hundred cases
here; `bench/fuzz_records.py --cases 10000` runs the long version."""

from __future__ import annotations

import io
import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

from fuzz_records import (
    HOSTILE_VALUES,
    cases,
    mutate,
    rank_record_cases,
    rank_record_seeds,
    report_json_cases,
    report_json_seeds,
    run_case,
)
from gputriage.diagnosis import diagnose
from gputriage.errors import InputError
from gputriage.record.decode import decode_record
from gputriage.report import terminal
from gputriage.report.markdown import render_markdown

CASES_PER_KIND = {"rank": 60, "report": 150}
GOOD = ("ok", "left out", "refused")


@pytest.mark.parametrize("kind", ["rank", "report"])
def test_seeded_mutations_end_in_a_report_or_one_line(kind: str, tmp_path: Path) -> None:
    failures = []
    statuses: dict[str, int] = {}
    for case in cases(kind, seed=13, n=CASES_PER_KIND[kind]):
        outcome = run_case(kind, case, tmp_path)
        statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
        if outcome.status not in GOOD:
            failures.append(f"{case[0]} -> {outcome.status}: {outcome.detail}")
    assert failures == []
    # The cases reach both ends: some records are refused (or, in a job, left out), some still render.
    assert statuses.get("ok", 0) > 10 and statuses.get("refused" if kind == "report" else "left out", 0) > 10, statuses


def test_the_cases_are_reproducible_and_hostile() -> None:
    assert list(rank_record_cases(5, 30)) == list(rank_record_cases(5, 30))
    assert list(report_json_cases(5, 30)) == list(report_json_cases(5, 30))
    assert list(report_json_cases(5, 30)) != list(report_json_cases(6, 30))
    labels = " ".join(label for label, _ in report_json_cases(1, 400))
    for hostile in ("1e999", "NaN", "\\x1b", "cuda:abc", "[[[[", "delete", "flip bits", "cut at"):
        assert hostile in labels, hostile


def test_a_mutated_record_differs_from_its_seed() -> None:
    rng = random.Random(3)
    seed = report_json_seeds()[0]
    changed = [mutate(seed, rng, report_json_seeds())[1] != seed for _ in range(50)]
    assert sum(changed) >= 45  # a swap of two equal values is the rare no-op


# --- hypothesis: any JSON value anywhere in a record -----------------------------------------------------------------
_JSON_LEAF = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
    | st.sampled_from([v for v in HOSTILE_VALUES if not isinstance(v, str) or not v.startswith("\0")])
)
_JSON = st.recursive(
    _JSON_LEAF,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def _slots(doc: object) -> list[tuple[object, object]]:
    found: list[tuple[object, object]] = []
    stack = [doc]
    while stack:
        node = stack.pop()
        items = node.items() if isinstance(node, dict) else enumerate(node[:4]) if isinstance(node, list) else ()
        for key, value in items:
            found.append((node, key))
            stack.append(value)
    return found


def _render_clean(data: bytes) -> None:
    """Decode, diagnose and render; the only exception allowed is InputError, the only text control chars \\n \\t."""
    try:
        run = decode_record(data, "case.json")
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    diag = diagnose(run)
    stream = io.StringIO()
    terminal.render(diag, Console(file=stream, width=100))
    for text in (stream.getvalue(), render_markdown(diag)):
        assert not [ch for ch in text if ch not in "\n\t" and (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_any_json_value_at_any_field_of_a_report(data: st.DataObject) -> None:
    seeds = report_json_seeds() + tuple(record for job in rank_record_seeds() for record in job)
    doc = json.loads(data.draw(st.sampled_from(seeds)))
    slots = _slots(doc)
    node, key = data.draw(st.sampled_from(slots))
    node[key] = data.draw(_JSON)  # type: ignore[index]
    _render_clean(json.dumps(doc).encode())  # json.dumps writes NaN and Infinity tokens as some exporters do


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_are_a_record_or_one_line(data: bytes) -> None:
    _render_clean(data)
