"""The terminal report at 60, 80 and 120 columns, plain and boxed, short and verbose (rich's fixed-width console).

Nothing essential is cut: every finding code, every evidence value without a space, every ladder status and every
line of a fix appears whole on one line; a value never wraps in the middle ("not" / "measured"); only the info lines
of the short report end in "…". A table that does not fit is stacked. Golden files under renders/ hold the exact text
of a few of them (GPUTRIAGE_UPDATE_RENDERS=1 rewrites them after a deliberate change).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from report_records import (
    crashed_run,
    diagnosis_with,
    distributed_run,
    healthy_run,
    injected_finding,
    injected_run,
    lifelike_run,
    no_gpu_run,
    starvation_finding,
    starved_run,
    trace_only_run,
)
from terminal_helpers import BOX_CHARS, WIDTHS, lines_over, render_text

from gputriage.diagnosis import Diagnosis, diagnose
from gputriage.findings import Finding, Severity
from gputriage.record.trace import RankTrace, TraceSection
from gputriage.report.fmt import evidence_value, shown_evidence
from gputriage.report.sanitize import terminal_text

RENDERS = Path(__file__).parent / "renders"
UPDATE_ENV = "GPUTRIAGE_UPDATE_RENDERS"


def two_rank_trace() -> Diagnosis:
    """A trace folder of two ranks, one of which lacks most numbers: the cells that read "not measured"."""
    run = trace_only_run(partition=True)
    assert run.trace is not None
    run.trace = TraceSection(ranks=[*run.trace.ranks, RankTrace(rank=1, device="NVIDIA A100-SXM4-40GB", steps=5)])
    return diagnose(run)


CASES: dict[str, Callable[[], Diagnosis]] = {
    "starved": lambda: diagnose(starved_run()),
    "healthy": lambda: diagnose(healthy_run()),
    "lifelike": lambda: diagnose(lifelike_run()),
    "no_gpu": lambda: diagnose(no_gpu_run()),
    "crashed": lambda: diagnose(crashed_run()),
    "distributed": lambda: diagnose(distributed_run(4, killed=(3,))),
    "trace_two_ranks": two_rank_trace,
    "injected": lambda: diagnosis_with(injected_run(), [injected_finding(), starvation_finding()]),
}


def essential_words(finding: Finding) -> list[str]:
    """What must show whole wherever the finding is shown in full: code, and evidence names and single-word values."""
    words = [finding.code]
    for key, value in shown_evidence(finding.evidence).items():
        words.append(key)
        shown = evidence_value(value)
        if " " not in shown:
            words.append(shown)
    return words


def fix_lines(finding: Finding) -> list[str]:
    return [line.strip() for line in terminal_text(finding.fix, limit=4000).splitlines() if line.strip()]


def shown_in_full(finding: Finding, verbose: bool) -> bool:
    return verbose or finding.severity is not Severity.INFO


@pytest.mark.parametrize("boxed", [False, True], ids=["plain", "boxed"])
@pytest.mark.parametrize("verbose", [False, True], ids=["short", "verbose"])
@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_nothing_essential_is_cut(case: str, width: int, verbose: bool, boxed: bool) -> None:
    diag = CASES[case]()
    text = render_text(diag, width, boxed=boxed, verbose=verbose)
    lines = [line.strip() for line in text.splitlines()]
    whole = set()
    for finding in diag.findings:
        if not shown_in_full(finding, verbose):
            assert any(line.startswith(f"info · rung {finding.rung} · {finding.code}") for line in lines)
            continue
        for word in essential_words(finding):
            assert word in text, f"{word!r} is cut"
        for fix_line in fix_lines(finding):
            assert fix_line in lines, f"fix line {fix_line!r} is not whole on its line"
            whole.add(fix_line)
        if finding.where:
            where = f"where: {terminal_text(finding.where)}"
            assert where in lines
            whole.add(where)
    for view in diag.ladder:
        assert (view.status if view.status != "skipped" else "not measured") in text
    # Only the printed-whole lines (code, file:line) may run past the width: the terminal folds them, a copy keeps them.
    over = [line.strip() for line in lines_over(text, width)]
    assert all(line in whole for line in over), over
    # A value never wraps in the middle; only an info line of the short report is shortened.
    for first, second in itertools.pairwise(lines):
        assert not (first.endswith("not") and second.startswith("measured")), (first, second)
    cut = [line for line in lines if "…" in line and not line.startswith("info · ")]
    assert not cut, cut


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("verbose", [False, True], ids=["short", "verbose"])
def test_plain_text_has_no_boxes_and_a_terminal_has_them(width: int, verbose: bool) -> None:
    diag = CASES["starved"]()
    plain = render_text(diag, width, verbose=verbose)
    assert not BOX_CHARS & set(plain)
    assert "\x1b" not in plain
    assert all(line == line.rstrip() for line in plain.splitlines()), "trailing spaces"
    boxed = render_text(diag, width, boxed=True, verbose=verbose)
    assert "╭─ gputriage verdict: UNDERUSED" in boxed


def test_tables_stack_when_they_do_not_fit() -> None:
    diag = two_rank_trace()
    wide = render_text(diag, 120, verbose=True)
    header = next(line for line in wide.splitlines() if line.startswith("rank  device"))
    assert header.split() == [
        "rank",
        "device",
        "steps",
        "step",
        "kernels/steps",
        "busy/window",
        "host",
        "wait/idle",
        "loader/step",
    ]
    narrow = render_text(diag, 60, verbose=True)
    assert not any(line.startswith("rank  device") for line in narrow.splitlines())
    assert "rank 1 · device NVIDIA A100-SXM4-40GB · steps 5" in narrow
    assert "  step not measured · kernels/steps not measured\n  busy/window not measured" in narrow

    ladder_80 = render_text(diag, 80)
    assert "rung  question" in ladder_80
    ladder_60 = render_text(diag, 60)
    assert "rung 1 · - not measured" in ladder_60
    assert "rung 5 · ✗ fail" in ladder_60
    assert "rung  question" not in ladder_60


def test_the_short_report_is_short() -> None:
    """On a machine without a GPU, the rung-1 info findings take one line each, and say where the rest is."""
    diag = diagnose(no_gpu_run())
    infos = [f for f in diag.findings if f.severity is Severity.INFO]
    assert infos
    short = render_text(diag, 80, out_dir=Path("gputriage-out"))
    verbose = render_text(diag, 80, verbose=True)
    assert len(short.splitlines()) < len(verbose.splitlines())
    for finding in infos:
        (line,) = [line for line in short.splitlines() if f"· {finding.code}" in line]
        assert len(line) <= 80
        if finding.fix:
            assert fix_lines(finding)[-1] not in short
            assert fix_lines(finding)[-1] in verbose
    assert "-v shows" in short and "gputriage-out/" in short
    assert "-v shows" not in verbose


def test_a_healthy_short_report_shows_the_numbers_it_rests_on() -> None:
    """ "Healthy" with no number is not evidence: under that verdict alone the short report shows what was measured,
    and still says where the files are. Under a verdict with findings, their evidence holds the numbers."""
    healthy = CASES["healthy"]()
    assert healthy.verdict.status == "healthy"
    short = render_text(healthy, 80, out_dir=Path("gputriage-out"))
    assert "What was measured" in short
    assert "usage 93% mean" in short and "one step: 41.0 ms" in short  # as -v shows them
    files = "gputriage-out/ (report.md, report.html)"
    assert " ".join(short.split()).endswith(f"-v shows what this machine has; every detail is in {files}")
    assert healthy.run.environment is not None
    healthy.run.environment.source = "text"  # `env --from`: -v's section is "What the pasted text says"
    short = render_text(healthy, 80, out_dir=Path("gputriage-out"))
    assert " ".join(short.split()).endswith(f"-v shows what the pasted text says; every detail is in {files}")
    healthy.run.environment = None  # nothing left out then, but the files are still named
    short = render_text(healthy, 80, out_dir=Path("gputriage-out"))
    assert "-v shows" not in short
    assert short.rstrip().endswith(f"Every detail is in {files}")
    for other in ("starved", "trace_two_ranks"):
        assert "What was measured" not in render_text(CASES[other](), 80, out_dir=Path("gputriage-out"))


GOLDEN = [
    ("starved", 80, "plain", False),
    ("starved", 60, "plain", True),
    ("starved", 80, "boxed", False),
    ("healthy", 80, "plain", False),
    ("trace_two_ranks", 60, "plain", True),
    ("trace_two_ranks", 120, "plain", True),
    ("distributed", 80, "boxed", True),
]


@pytest.mark.parametrize(("case", "width", "mode", "verbose"), GOLDEN)
def test_golden_renders(case: str, width: int, mode: str, verbose: bool) -> None:
    text = render_text(CASES[case](), width, boxed=mode == "boxed", verbose=verbose, out_dir=Path("gputriage-out"))
    path = RENDERS / f"{case}-{width}-{mode}{'-v' if verbose else ''}.txt"
    if os.environ.get(UPDATE_ENV):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"no golden render: run {UPDATE_ENV}=1 pytest {Path(__file__).name}"
    assert text == path.read_text(), f"{path.name} differs: if the change is meant, run {UPDATE_ENV}=1 pytest"


def test_a_trace_of_one_process_has_no_rank_rather_than_an_unmeasured_one() -> None:
    """A job that is not distributed has no rank: its row reads "none" under "profiler trace, one process", not
    "rank not measured" (a new user read that as a gap in the measurement). Two ranks keep the per-rank title."""
    run = trace_only_run()
    assert run.trace is not None
    run.trace.ranks[0].rank = None
    text = render_text(diagnose(run), 80, verbose=True, out_dir=Path("gputriage-out"))
    assert "profiler trace, one process" in text and "rank none" in text
    assert "rank not measured" not in text
    assert "profiler trace, per rank" in render_text(two_rank_trace(), 80, verbose=True, out_dir=Path("o"))
