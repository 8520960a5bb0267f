"""The project's own real-pattern scripts (tests/scripts/EXPECTED.tsv) through the real CLI: the right cause at the
right line, and no warning on a healthy control."""

from __future__ import annotations

import bench_accuracy as accuracy
import pytest
from cli_cases import run_and_score

pytestmark = pytest.mark.timeout(1500)
CASES = accuracy.read_expected(accuracy.PROJECT_SCRIPTS)


@pytest.fixture(scope="module")
def scores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, accuracy.Score]:
    return run_and_score(CASES, tmp_path_factory.mktemp("project"))


@pytest.mark.parametrize("case", [c.case for c in CASES])
def test_the_expected_cause_at_the_expected_line(scores: dict[str, accuracy.Score], case: str) -> None:
    score = scores[case]
    assert score.right, score
    assert score.where_right is not False, score
    assert not score.false_alarms, score
