"""One number per concept: terminal, JSON, HTML and Markdown show the same step numbers, and the findings too.

For each record, the step time, each part's time per step and share, and the data-wait share a finding cites come
from record/numbers.py once; every rendering must show exactly that text, and the shares must add up to 100%.
"""

from __future__ import annotations

import io
import json
import random
import re

import pytest

from gputriage.diagnosis import Diagnosis, diagnose
from gputriage.record import Run
from gputriage.record.numbers import StepNumbers, pct_text, step_numbers
from gputriage.record.steps import Step
from gputriage.report import fmt
from gputriage.report.document import build_document, encode_document
from gputriage.report.html import render_html
from gputriage.report.markdown import render_markdown
from gputriage.report.terminal import render
from gputriage.report.views import primary_steps, rank_step_lists
from report.report_records import distributed_run, lifelike_run, starved_run


def _terminal(diag: Diagnosis) -> str:
    from rich.console import Console

    out = io.StringIO()
    render(diag, Console(file=out, width=400, color_system=None, soft_wrap=True), verbose=True)  # with its tables
    return out.getvalue()


def demo_like_run() -> Run:
    """Steps whose parts vary independently, so medians of parts would not add up to the median step."""
    rng = random.Random(3)
    run = starved_run()
    steps = []
    t_s = 0.0
    for i in range(40):
        parts = [rng.uniform(0.05, 0.12), 0.0, rng.uniform(0.1, 0.2), 0.0, rng.uniform(0.15, 0.35), 0.0, 0.0005]
        steps.append(Step(i, t_s, sum(parts), *parts))
        t_s += sum(parts)
    assert run.steps is not None
    run.steps.steps = steps
    return run


def cpu_run() -> Run:
    run = demo_like_run()
    run.expect_device = "cpu"
    run.gpu = None
    return run


def _unmermaid(text: str) -> str:
    """Mermaid labels write some characters as entity codes (#59; for ';'): read them back."""
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), text)


RECORDS = {"lifelike": lifelike_run, "demo-like": demo_like_run, "cpu": cpu_run, "distributed": distributed_run}


def _numbers(run: Run) -> StepNumbers:
    numbers = step_numbers(primary_steps(run)[1])
    assert numbers is not None
    return numbers


@pytest.mark.parametrize("name", RECORDS)
def test_the_shares_add_up_to_100_with_an_explicit_other(name: str) -> None:
    numbers = _numbers(RECORDS[name]())
    assert [p.key for p in numbers.parts][-1] == "other"
    assert round(sum(p.share_pct for p in numbers.parts), 6) == 100.0
    assert sum(p.time_s for p in numbers.parts) == pytest.approx(numbers.step_time_s)


@pytest.mark.parametrize("name", RECORDS)
def test_every_rendering_shows_the_same_step_numbers(name: str) -> None:
    run = RECORDS[name]()
    diag = diagnose(run)
    numbers = _numbers(run)
    renderings = {
        "terminal": _terminal(diag),
        "html": render_html(diag),
        "markdown": _unmermaid(render_markdown(diag)),
    }
    expected = [fmt.duration(numbers.step_time_s), numbers.window.describe()]
    for part in numbers.parts:
        expected += [fmt.duration(part.time_s), pct_text(part.share_pct)]
    for where, text in renderings.items():
        for value in expected:
            assert value in text, f"{value!r} missing from the {where} report of {name}"


@pytest.mark.parametrize("name", RECORDS)
def test_a_finding_cites_the_number_the_views_show(name: str) -> None:
    run = RECORDS[name]()
    diag = diagnose(run)
    doc = json.loads(encode_document(build_document(diag)))
    lists = dict(rank_step_lists(run))
    for finding in doc["findings"]:
        if finding["code"] != "input-pipeline-bound" or "data_wait_pct_of_step" not in finding["evidence"]:
            continue
        numbers = step_numbers(lists[finding["rank"]])  # a merged job's finding names the rank it was seen on
        assert numbers is not None
        wait = numbers.part("data_wait")
        assert finding["evidence"]["data_wait_pct_of_step"] == wait.share_pct
        assert finding["evidence"]["steps_measured"] == numbers.window.count
        assert pct_text(wait.share_pct) in finding["title"]
        for text in (_terminal(diag), render_html(diag), render_markdown(diag)):
            assert finding["title"].split(" (")[0].replace("'", "&#39;") in text.replace("&#x27;", "&#39;")
        break
    else:
        assert _numbers(run).part("data_wait").share_pct < 20.0, "a starved record must carry the finding"


def test_the_demo_like_record_no_longer_shows_medians_that_exceed_100() -> None:
    """The old views took each arrow's median: 27% + 40% + 35% on such steps. The parts now come from the totals."""
    sequence_text = _terminal(diagnose(demo_like_run()))
    numbers = _numbers(demo_like_run())
    shown = [p.share_pct for p in numbers.parts if pct_text(p.share_pct) in sequence_text]
    assert len(shown) == len(numbers.parts)
    assert round(sum(shown), 6) == 100.0


def test_with_a_trace_the_step_wait_is_one_finding_citing_the_traces_own_measure() -> None:
    from gputriage.diagnosis.passes import one_input_pipeline_finding
    from gputriage.findings import Finding, Severity

    probe = Finding(
        "input-pipeline-bound", 5, Severity.WARNING, "The step waits ... 62.0%", {"data_wait_pct_of_step": 62.0}
    )
    trace = Finding(
        "input-pipeline-bound", 5, Severity.CRITICAL, "The GPU waits ... 65.0%", {"dataloader_pct_of_step": 65.0}
    )
    other = Finding("pageable-memcpy", 5, Severity.INFO, "...", {})
    kept = one_input_pipeline_finding([trace, probe, other])
    assert kept == [probe, other]
    assert probe.evidence == {"data_wait_pct_of_step": 62.0, "dataloader_pct_of_step": 65.0}


def test_one_step_far_slower_than_the_rest_is_named_beside_the_mean() -> None:
    """minGPT samples 500 tokens in one callback step: "one step: 143.7 ms" was a mean that no step resembled (the
    median was 17 ms). The mean stays the one number; the basis names the slowest step and the median."""
    from gputriage.report.diagrams import build_sequence

    steps = [Step(i, 0.1 * i, 0.02, forward_s=0.01, other_s=0.01) for i in range(6)]
    steps[3] = Step(3, 0.3, 2.0, forward_s=0.01, other_s=1.99)
    numbers = step_numbers(steps)
    assert numbers is not None and numbers.outlier()
    assert (round(numbers.median_s, 3), numbers.slowest_s) == (0.02, 2.0)
    run = Run(command="run")
    from gputriage.record.steps import StepsSection

    run.steps = StepsSection(steps=steps)
    basis = build_sequence(run).basis
    assert basis.endswith(f"; the slowest step took {fmt.duration(2.0)}, against a median of {fmt.duration(0.02)}")
    even = step_numbers([Step(i, 0.1 * i, 0.02, forward_s=0.02) for i in range(6)])
    assert even is not None and not even.outlier()
