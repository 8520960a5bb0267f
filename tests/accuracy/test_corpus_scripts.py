"""The shared corpus of real public training scripts (../shared/corpus/scripts, read in place) through the real CLI.

In the mode these run in (cli_cases.MODE) some scripts end before gputriage can measure what their mistake needs
(on the meta stand-in `.item()` raises). Such a run must then say so ("not measured", verdict unknown), never name a
wrong cause, and a healthy control must never get a warning or a critical finding.
"""

from __future__ import annotations

import bench_accuracy as accuracy
import pytest
from cli_cases import Outcome, run_and_score

pytestmark = [pytest.mark.timeout(2400), pytest.mark.slow]
CASES = accuracy.read_expected(accuracy.CORPUS_SCRIPTS)


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    if not CASES:
        pytest.skip(f"corpus not found at {accuracy.CORPUS_SCRIPTS}")
    return run_and_score(CASES, tmp_path_factory.mktemp("corpus"))


@pytest.mark.parametrize("case", [c.case for c in CASES] or ["absent"])
def test_never_a_wrong_cause_and_the_right_line_when_named(outcomes: dict[str, Outcome], case: str) -> None:
    score = outcomes[case].score
    assert not score.false_alarms, score
    assert not score.healthy_control_alarmed, score
    if score.expected != accuracy.HEALTHY and score.got not in ("unknown", accuracy.HEALTHY):
        assert score.right or score.acceptable, score
    if score.right:
        assert score.where_right is not False, score
