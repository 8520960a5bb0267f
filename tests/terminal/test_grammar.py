"""Every text built from counts reads right at 0, 1 and 2: the reports are rendered for records at those counts and
read for the slips people saw ("(rungs 4 were not measured)", "over 1 steps", "all 1 workers", a label said twice),
and report.md fences each fix in the language it is written in."""

from __future__ import annotations

import re

import pytest
from report_records import distributed_run, make_steps, starved_run, trace_only_run
from terminal_helpers import render_text

from gputriage.diagnosis import Diagnosis, diagnose
from gputriage.record import Run
from gputriage.record.environment import Environment
from gputriage.record.stand_in import PREFLIGHT_LABEL, StandInSection
from gputriage.record.steps import LoaderInfo, StepsSection
from gputriage.report.fmt import fix_blocks, is_shell_line
from gputriage.report.html import render_html
from gputriage.report.markdown import render_markdown
from gputriage.rules.steps import WorkerSizing, loader_fix
from gputriage.wording import counted, listed, numbered, was_were

PLURALS = "steps|workers|ranks|rungs|GPUs|cores|readings|samples|batches|findings|ops|calls|records|processes"
# A count of 1 with a plural noun, a plural "rungs"/"Ranks" naming one, "all 1", a word or phrase said twice in a row
SLIPS = [
    re.compile(rf"(?<![\d.,])\b1 (?:{PLURALS})\b"),
    re.compile(r"\b(?:rungs|Ranks|ranks) \d+ (?:were|of)\b"),
    re.compile(r"\ball 1 \w+"),
    re.compile(r"\b(\w{3,}(?: \w+){0,3}) +\1\b", re.IGNORECASE),
]


def slips(text: str) -> list[str]:
    found = []
    for pattern in SLIPS:
        found += [m.group(0) for m in pattern.finditer(text)]
    return [s for s in found if not _allowed_repeat(s)]


def _allowed_repeat(match: str) -> bool:
    # numbers or unmeasured cells side by side in a table are not prose; `gputriage report report.json` is a command
    if re.fullmatch(r"[\d.,:% ]+|not measured {2,}not measured", match):
        return True
    return match.lower() in ("side by side by", "report report")


def every_view(diag: Diagnosis) -> dict[str, str]:
    views = {
        "report.md": re.sub(r"```mermaid\n.*?```", "", render_markdown(diag), flags=re.S),  # diagram code
        "report.html": re.sub(r"<[^>]+>", " | ", render_html(diag).split('<script type="application/json"', 1)[0]),
    }
    for width in (60, 120):
        views[f"terminal {width}"] = render_text(diag, width, verbose=True)
    return views


def with_steps(count: int) -> Run:
    run = starved_run(step_count=max(count, 1))
    assert run.steps is not None
    run.steps.steps = make_steps(count, 0.060)
    return run


def with_workers(workers: int) -> Run:
    run = starved_run()
    assert run.steps is not None and run.steps.loader is not None
    run.steps.loader.num_workers = workers
    run.steps.cpu_count = workers + 1 if workers else 2
    return run


def one_rung_skipped() -> Run:
    """Only rung 4 unmeasured: the verdict names one rung."""
    run = starved_run()
    run.compute = None
    run.steps = StepsSection(steps=make_steps(40, 0.0005), loader=LoaderInfo(num_workers=2), steps_observed=40)
    run.gpu = None
    return run


def one_missing_rank() -> Run:
    return distributed_run(4, killed=(3,))


def unknown_facts() -> Run:
    env = Environment(source="text")
    env.unknown = ["could not tell the torch version (python -c 'import torch; print(torch.__version__)')"]
    return Run(command="env", argv=["env", "--from", "x.txt"], environment=env)


def preflight_stopped(steps: int) -> Run:
    run = starved_run()
    run.stand_in = StandInSection(preflight=True, backing="cpu", label=PREFLIGHT_LABEL, stopped_after_steps=steps)
    return run


RECORDS = {
    "0 steps": lambda: with_steps(0),
    "1 step": lambda: with_steps(1),
    "2 steps": lambda: with_steps(2),
    "0 workers": lambda: with_workers(0),
    "1 worker": lambda: with_workers(1),
    "2 workers": lambda: with_workers(2),
    "one rung not measured": one_rung_skipped,
    "one rank missing": one_missing_rank,
    "two ranks missing": lambda: distributed_run(4, killed=(2, 3)),
    "one trace rank": lambda: trace_only_run(partition=True),
    "unknown facts": unknown_facts,
    "preflight ended after 1 step": lambda: preflight_stopped(1),
}


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_no_count_slips_in_any_view(name: str) -> None:
    diag = diagnose(RECORDS[name]())
    for view, text in every_view(diag).items():
        assert not slips(text), f"{view}: {slips(text)}"


def test_the_slips_the_issue_saw_are_caught() -> None:
    for slip in ("(rungs 4 were not measured)", "over 1 steps", "all 1 workers", "could not tell  could not tell"):
        assert slips(slip), slip
    assert not slips("(rungs 2 and 4 were not measured) over 2 steps, 1 step, 1 batch, 2 batches")


def test_one_rung_not_measured_is_named_in_the_singular() -> None:
    run = Run(command="env", environment=Environment())
    verdict = diagnose(run).verdict.summary
    assert "(rungs 2, 3, 4 and 5 were not measured)" in verdict or "not measured" not in verdict
    assert f"({numbered('rung', [4])} {was_were([4])} not measured)" == "(rung 4 was not measured)"


def test_wording_helpers() -> None:
    assert [counted(n, "step") for n in (0, 1, 2)] == ["0 steps", "1 step", "2 steps"]
    assert counted(1, "batch", "batches") == "1 batch" and counted(3, "batch", "batches") == "3 batches"
    assert [listed(x) for x in ([], [4], [2, 4], [2, 3, 4])] == ["", "4", "2 and 4", "2, 3 and 4"]
    assert numbered("rung", [2, 4]) == "rungs 2 and 4"
    assert (was_were(1), was_were(0), was_were(2)) == ("was", "were", "were")


def test_worker_advice_counts_read_right() -> None:
    loader = LoaderInfo(dataset_class="Images", batch_size=32, num_workers=1)
    for needed, usable in ((1, 1), (2, 1), (4, 3)):
        sizing = WorkerSizing(load_s=0.048, work_s=0.013, needed=needed, usable=usable, cpu_share=None)
        text = loader_fix(loader, usable + 1, "cuda", sizing)
        assert not slips(text), text


# -- report.md fences: the language of each fix's lines ------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "shell"),
    [
        ("python -m pip install torch==2.4.1 --index-url https://download.pytorch.org/whl/cu121", True),
        ("nvidia-smi -L", True),
        ("CUDA_VISIBLE_DEVICES=0 torchrun --nproc_per_node 1 train.py", True),
        ("sudo modprobe nvidia", True),
        ("docker run --gpus all IMAGE", True),
        ("model = model.to(device)", False),
        ("x, y = x.to(device), y.to(device)", False),
        ("loader = DataLoader(ds, num_workers=4)", False),
        ("device = torch.device('cuda')", False),
        ("lr=0.1 if warm else 0.01", False),
    ],
)
def test_shell_lines_are_told_from_python(line: str, shell: bool) -> None:
    assert is_shell_line(line) is shell


def test_a_fix_is_split_into_fences_by_language() -> None:
    fix = "# on the GPU machine:\npython -m pip install torch\n# then in the script:\nmodel = model.to('cuda')"
    assert fix_blocks(fix) == [
        ("sh", "# on the GPU machine:\npython -m pip install torch"),
        ("python", "# then in the script:\nmodel = model.to('cuda')"),
    ]
    assert fix_blocks("# nothing to change") == [("text", "# nothing to change")]


def test_report_md_never_fences_a_shell_command_as_python() -> None:
    text = render_markdown(diagnose(Run(command="env", environment=Environment())))
    for run in (starved_run(), unknown_facts(), with_workers(1)):
        text += render_markdown(diagnose(run))
    for lang, body in re.findall(r"```(\w*)\n(.*?)\n```", text, re.S):
        code = [line for line in body.splitlines() if line.strip() and not line.lstrip().startswith("#")]
        if lang == "python":
            assert not any(is_shell_line(line) for line in code), body
        if lang == "sh":
            assert all(is_shell_line(line) for line in code), body


def test_a_finding_repeated_on_many_ranks_is_shown_a_few_times_then_counted() -> None:
    """A job of 1,000 ranks repeated one finding per rank: 11,000 lines, and minutes to print. The short report shows
    the first few of each code and counts the rest; -v shows each."""
    from gputriage.findings import Finding, Severity

    diag = diagnose(Run(command="trace"))
    diag.findings = [
        Finding("input-pipeline-bound", 5, Severity.WARNING, f"The GPU waits rank {r}", fix="num_workers=8", rank=r)
        for r in range(50)
    ] + [Finding("pageable-memcpy", 4, Severity.INFO, f"copies rank {r}", rank=r) for r in range(20)]
    text = render_text(diag, 100)
    assert text.count("warning · rung 5 · input-pipeline-bound") == 3
    assert text.count("info · rung 4 · pageable-memcpy") == 3
    assert "input-pipeline-bound: 47 more findings of this code, on other ranks or places (-v shows each)" in text
    assert "pageable-memcpy: 17 more findings of this code" in text
    assert render_text(diag, 100, verbose=True).count("input-pipeline-bound") >= 50
