"""report.md: verdict, ladder table, findings, and the two diagrams as Mermaid blocks with the measured values."""

from __future__ import annotations

import re

from report_records import (
    INJECTION,
    crashed_run,
    diagnosis_with,
    distributed_run,
    injected_finding,
    injected_run,
    no_gpu_run,
    starvation_finding,
    starved_run,
    trace_only_run,
)

from gputriage.report.fmt import evidence_value
from gputriage.report.markdown import fenced, md, render_markdown
from gputriage.report.mermaid import label


def mermaid_blocks(text: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)\n```", text, re.S)


def test_starved_run_report_for_an_issue() -> None:
    text = render_markdown(diagnosis_with(starved_run(), [starvation_finding()]))

    assert text.startswith("# gputriage: UNDERUSED\n\n> The step waits for the DataLoader 60% of the time.")
    ladder_rows = [line for line in text.splitlines() if re.match(r"\| \d \|", line)]
    assert len(ladder_rows) == 5
    assert ladder_rows[4].endswith("| ✗ fail | input-pipeline-bound |")
    assert "**Where:** train.py:31" in text
    assert "| data\\_wait\\_pct | 60.3 |" in text
    assert "```python\nloader = DataLoader(dataset, batch_size=64, num_workers=8" in text

    relationship, sequence = mermaid_blocks(text)
    assert relationship.startswith("flowchart LR")
    for measured in (
        "dataset: ImageFolder",
        "batch_size: 64",
        "architecture: ResNet",
        "parameters: 11.7 M",
        "usage: 31% mean #40;NVML, 60 readings#41;",
        "memory: 9.0 GiB peak of 80.0 GiB",
    ):
        assert measured in relationship, measured
    assert sequence.startswith("sequenceDiagram")
    # The highlighted arrow sits in a coloured rect with the note; the others carry their times plainly.
    hot = re.search(r"rect rgb\(255, 210, 210\)\n(.*?)\n    end", sequence, re.S)
    assert hot is not None and "loader->>host: 1. load data: 60.0 ms #40;60.0%#41;" in hot.group(1)
    assert "host->>gpu: 5. backpropagate: 24.0 ms #40;24.0%#41;" in sequence


def test_runs_without_gpu_data_or_steps_say_not_measured() -> None:
    no_gpu = render_markdown(diagnosis_with(no_gpu_run(), []))
    assert "usage: not measured" in mermaid_blocks(no_gpu)[0]
    crashed = render_markdown(diagnosis_with(crashed_run(), []))
    assert "**The script ended:** exit code 1, crashed with RuntimeError: Expected all tensors" in crashed
    assert "cuda:0 and cpu!, at train.py:57 in Net.head (Linear)" in crashed
    sequence = mermaid_blocks(crashed)[1]
    assert "1. load data: not measured" in sequence
    assert "rect" not in sequence  # nothing was timed, so nothing is highlighted


def test_distributed_and_trace_only_runs() -> None:
    dist = render_markdown(diagnosis_with(distributed_run(world_size=3, killed=(1,)), []))
    rank_rows = [line for line in dist.split("## Ranks")[1].splitlines() if re.match(r"\| \d \|", line)]
    assert rank_rows[1].startswith("| 2 | node-a | cuda:2 | 19 | 120.0 ms | 80.0 ms | 66.7% |")
    assert "Rank 1 of 3 left no record" in dist
    trace = render_markdown(diagnosis_with(trace_only_run(), []))
    assert "1. load data: 63.5 ms #40;62.0%#41;" in mermaid_blocks(trace)[1]
    assert "- traces/rank0.pt.trace.json" in trace


def test_user_strings_cannot_become_html_or_break_the_markdown() -> None:
    text = render_markdown(diagnosis_with(injected_run(), [injected_finding()]))
    outside_code = re.sub(r"(`{3,})[a-z]*\n.*?\n\1", "", text, flags=re.S)
    assert "<" not in outside_code.replace("<br/>", "")
    for block in mermaid_blocks(text):
        assert "<img" not in block and "</script" not in block
    # The fix holds a ``` run, so its fence is longer and the block stays one block.
    assert "````python\n# </script>" in text


def test_helpers() -> None:
    assert fenced("a ``` b") == "````\na ``` b\n````"
    assert evidence_value(2312140804) == "2,312,140,804" and evidence_value(6.66e6) == "6,660,000"
    assert evidence_value(None) == "n/a" and evidence_value(0.06972) == "0.06972" and evidence_value(True) == "yes"
    assert md("a|b *c* `d` [e](f) <g>") == "a\\|b \\*c\\* \\`d\\` \\[e\\](f) &lt;g&gt;"
    assert label('x"]; y') == "x#34;#93;#59; y"
    assert label(INJECTION).count("#60;") == 2
