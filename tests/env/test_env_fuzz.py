"""Hostile and mutated pasted texts: one clear InputError or a diagnosis, never a traceback, and rendered safely.

The seeded mutational fuzzer (env_fuzz.py) cuts, splices and poisons the real reports of tests/data/envs; hypothesis
builds texts from the lines that carry numbers. `bench/fuzz.py` runs the same cases by the thousand.
"""

from __future__ import annotations

import io
import json

import pytest
from env_fuzz import _LINES, _POISON, check_env_case, env_fuzz_cases
from hypothesis import given, settings
from hypothesis import strategies as st

from gputriage.diagnosis import Diagnosis
from gputriage.report.document import build_document, encode_document
from gputriage.report.output import make_console
from gputriage.report.terminal import render

_FUZZ_CASES = 120  # a few seconds on two cores; bench/fuzz.py runs thousands


def _render_everything(diag: object) -> None:
    assert isinstance(diag, Diagnosis)
    out = io.StringIO()
    render(diag, make_console(out, width=100))
    assert "\x1b]" not in out.getvalue() and "\x07" not in out.getvalue(), "control characters reached the terminal"
    json.loads(encode_document(build_document(diag)))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_mutated_reports_never_raise(seed: int) -> None:
    outcomes = [check_env_case(text, _render_everything) for _, text in env_fuzz_cases(seed, _FUZZ_CASES // 3)]

    assert set(outcomes) <= {"ok", "input-error"}
    assert "ok" in outcomes  # the mutations keep most reports readable


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(_LINES), st.lists(st.sampled_from(_POISON) | st.text(max_size=12), max_size=3)),
        max_size=8,
    )
)
def test_poisoned_numbers_give_a_verdict_or_one_input_error(parts: list[tuple[str, list[str]]]) -> None:
    lines = []
    for template, values in parts:
        lines.append(template.format(*(values + ["1"] * 3)[: template.count("{}")]))
    assert check_env_case("\n".join(lines), _render_everything) in ("ok", "input-error")


@settings(max_examples=150, deadline=None)
@given(st.text(max_size=600))
def test_any_text_gives_a_verdict_or_one_input_error(text: str) -> None:
    assert check_env_case(text, _render_everything) in ("ok", "input-error")


def test_the_fuzzer_is_deterministic() -> None:
    assert list(env_fuzz_cases(7, 5)) == list(env_fuzz_cases(7, 5))
