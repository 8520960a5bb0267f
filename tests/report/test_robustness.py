"""Any record renders: every section may be missing, every number may be absurd (a saved file from a broken run).

The timeline stays a valid Chrome trace whatever the record holds; a value no axis can place is left out.
"""

from __future__ import annotations

from typing import Any, get_type_hints

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from report_records import diagnosis_with, starved_run
from test_timeline import check_trace_event_format

from gputriage.record import Run
from gputriage.record.gpu import GpuSample, GpuSection, GpuTrack
from gputriage.record.steps import Step, StepsSection
from gputriage.report.html import render_html
from gputriage.report.markdown import render_markdown
from gputriage.report.output import report_files
from gputriage.report.timeline import build_timeline

_ANY_FLOAT = st.floats(allow_nan=True, allow_infinity=True)
_STEPS = st.lists(
    st.builds(
        Step,
        index=st.integers(-5, 10**6),
        start_s=_ANY_FLOAT,
        wall_s=_ANY_FLOAT,
        data_wait_s=_ANY_FLOAT,
        h2d_s=_ANY_FLOAT,
        forward_s=_ANY_FLOAT,
        sync_s=_ANY_FLOAT,
        backward_s=_ANY_FLOAT,
        optimizer_s=_ANY_FLOAT,
        other_s=_ANY_FLOAT,
        rank=st.none() | st.integers(0, 3),
    ),
    max_size=20,
)
_SAMPLES = st.lists(
    st.builds(
        GpuSample,
        t_s=_ANY_FLOAT,
        gpu_util_pct=st.none() | _ANY_FLOAT,
        memory_used_bytes=st.none() | st.integers(-10, 2**50),
    ),
    max_size=20,
)
_SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _field_values(kind: type[msgspec.Struct]) -> dict[str, st.SearchStrategy[Any]]:
    """Any value of each field's type, or its default: hypothesis calls a Struct with its signature's defaults, where
    a default factory is an object of msgspec's, not the value it makes."""
    hints = get_type_hints(kind)
    values: dict[str, st.SearchStrategy[Any]] = {}
    for f in msgspec.structs.fields(kind):
        drawn = st.from_type(hints[f.name])
        if f.default is not msgspec.NODEFAULT:
            drawn = st.just(f.default) | drawn
        elif f.default_factory is not msgspec.NODEFAULT:
            drawn = st.builds(f.default_factory) | drawn
        values[f.name] = drawn
    return values


def _register_records(kind: type[msgspec.Struct], seen: set[type]) -> None:
    """Every record class below `kind` is drawn field by field (_field_values)."""
    if kind in seen:
        return
    seen.add(kind)
    # A function, not a strategy: it runs when a record is first drawn, once every class below is registered.
    st.register_type_strategy(kind, lambda _: st.builds(kind, **_field_values(kind)))
    for hint in get_type_hints(kind).values():
        for inner in _classes_in(hint):
            if issubclass(inner, msgspec.Struct):
                _register_records(inner, seen)


def _classes_in(hint: Any) -> list[type]:
    args = getattr(hint, "__args__", None)
    if args is None:
        return [hint] if isinstance(hint, type) else []
    return [kind for arg in args for kind in _classes_in(arg)]


_register_records(Run, set())


# Whole random records are slow to generate (a deep tree of records); a few dozen cover the None/empty combinations.
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.from_type(Run))
def test_any_run_record_renders_every_file(run: Run) -> None:
    files = report_files(diagnosis_with(run, []))
    assert set(files) == {"report.json", "report.html", "report.md", "timeline.json"}


@_SETTINGS
@given(_STEPS, _SAMPLES)
def test_absurd_times_never_break_the_timeline_or_the_pages(steps: list[Step], samples: list[GpuSample]) -> None:
    run = starved_run()
    run.steps = StepsSection(steps=steps)
    run.gpu = GpuSection(available=True, devices=[GpuTrack(index=0, samples=samples)])
    diag = diagnosis_with(run, [])

    check_trace_event_format(build_timeline(diag))
    assert "nan" not in render_markdown(diag).lower()
    render_html(diag)
