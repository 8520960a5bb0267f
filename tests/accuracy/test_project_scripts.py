"""The project's own real-pattern scripts (tests/scripts/EXPECTED.tsv) through the real CLI: the right cause at the
right line, and no warning on a healthy control."""

from __future__ import annotations

import bench_accuracy as accuracy
import pytest
from cli_cases import Outcome, run_and_score

from contract import ladder_problems
from gputriage.diagnosis import diagnose
from gputriage.report.document import build_document, run_from_document

pytestmark = pytest.mark.timeout(1500)
CASES = accuracy.read_expected(accuracy.PROJECT_SCRIPTS)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    return run_and_score(CASES, tmp_path_factory.mktemp("project"))


@pytest.mark.parametrize("case", [c.case for c in CASES])
def test_the_expected_cause_at_the_expected_line(outcomes: dict[str, Outcome], case: str) -> None:
    score = outcomes[case].score
    assert score.right, score
    assert score.where_right is not False, score
    assert not score.false_alarms, score


@pytest.mark.parametrize("case", [c.case for c in CASES])
def test_the_saved_report_re_renders_the_same_findings(outcomes: dict[str, Outcome], case: str) -> None:
    """Rules are pure and the fixes come from the record's own source snippets: report.json alone gives the same."""
    report = outcomes[case].report
    again = build_document(diagnose(run_from_document(report)))
    assert again["findings"] == report["findings"]
    assert again["ladder"] == report["ladder"] and again["verdict"] == report["verdict"]
    assert ladder_problems(report["ladder"]) == []
