"""report.md: the report for a GitHub issue or PR. Verdict, ladder table, findings, and the two diagrams as Mermaid.

Text from the user's run (module names, paths, exception messages) is escaped for GitHub-flavoured Markdown: it can
neither break a table, open a code span, nor become HTML. Fixes are fenced with a fence longer than any backtick
run inside them, each run of shell lines or Python lines in its own fence with its language.
"""

from __future__ import annotations

import re

from gputriage.diagnosis import Diagnosis
from gputriage.findings import Finding
from gputriage.record import Run
from gputriage.report import fmt
from gputriage.report.diagrams import build_relationship, build_sequence
from gputriage.report.mermaid import relationship_mermaid, sequence_mermaid
from gputriage.report.sanitize import report_tree, terminal_text
from gputriage.report.timeline import OPEN_TOGETHER_NOTE, profiler_trace_paths
from gputriage.report.views import rank_summaries
from gputriage.wording import numbered

# Inline Markdown that could change meaning mid-line: emphasis, code spans, links, tables, strikethrough. (`<`, `>`
# and `&` become entities first, so no HTML can form either.)
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|~])")
_STATUS_MARK = {
    "fail": "✗ fail",
    "warn": "! warn",
    "pass": "✓ pass",
    "skipped": "· not measured",
    "inconclusive": "? inconclusive",
}


def md(value: object) -> str:
    """Escape one value for inline Markdown (tables included); control characters never reach the file."""
    text = terminal_text(str(value).replace("\r", " ").replace("\n", " "))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MD_SPECIAL.sub(r"\\\1", text)


def fenced(code: str, lang: str = "") -> str:
    code = terminal_text(code, limit=20_000)
    longest = max((len(run) for run in re.findall(r"`+", code)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{lang}\n{code.rstrip()}\n{fence}"


def render_markdown(diag: Diagnosis) -> str:
    diag = report_tree(diag)  # control characters made visible: a report.md is read in terminals and editors too
    parts = [
        _header(diag),
        _ladder(diag),
        _findings(diag),
        _diagrams(diag),
        _ranks(diag.run),
        _files(diag.run),
    ]
    return "\n\n".join(p for p in parts if p) + "\n"


def _header(diag: Diagnosis) -> str:
    v = diag.verdict
    label = f" ({md(v.label)})" if v.label else ""
    lines = [f"# gputriage: {v.status.upper()}{label}", "", f"> {md(v.summary)}"]
    if v.root_cause:
        lines += ["", f"**Root cause:** {md(v.root_cause)}"]
    if v.scope:
        lines += ["", f"_{md(v.scope)}_"]
    run = diag.run
    facts = [f"command: {md(run.command)}", f"recorded: {fmt.timestamp(run.created_at_s)}"]
    if run.argv:
        facts.append(f"argv: {md(' '.join(run.argv))}")
    if run.expect_device:
        facts.append(f"expected device: {md(run.expect_device)}")
    lines += ["", " · ".join(facts)]
    ending = _ending(run)
    if ending:
        lines += ["", ending]
    return "\n".join(lines)


def _ending(run: Run) -> str | None:
    p = run.process
    if p is None:
        return None
    bits = [f"exit code {fmt.text(p.exit_code)}"]
    if p.signal:
        bits.append(f"stopped by {md(p.signal)}")
    if p.exception_type:
        bits.append(f"crashed with {md(p.exception_type)}: {md(p.exception_message or '')}")
    if p.crash_where:
        bits.append(f"at {md(p.crash_where)}" + (f" in {md(p.crash_module)}" if p.crash_module else ""))
    return "**The script ended:** " + ", ".join(bits)


def _ladder(diag: Diagnosis) -> str:
    rows = ["## The ladder", "", "| rung | question | status | findings |", "|---:|---|---|---|"]
    for r in diag.ladder:
        codes = ", ".join(md(c) for c in r.shown_decisive)
        if r.note_codes:
            codes += ("; " if codes else "") + "notes: " + ", ".join(md(c) for c in r.shown_notes)
        if r.reason:
            codes += ("; " if codes else "") + f"*{md(r.reason)}*"
        rows.append(f"| {r.rung} | {md(r.question)} | {_STATUS_MARK.get(r.mark, md(r.status))} | {codes} |")
    return "\n".join(rows)


def _findings(diag: Diagnosis) -> str:
    if not diag.findings:
        return "## Findings\n\nNone on the measured rungs."
    return "## Findings\n\n" + "\n\n".join(_finding(i, f) for i, f in enumerate(diag.findings, start=1))


def _finding(number: int, f: Finding) -> str:
    rank = f" · rank {f.rank}" if f.rank is not None else ""
    lines = [f"### {number}. {md(f.title)}", "", f"{f.severity.value} · rung {f.rung} · {md(f.code)}{rank}"]
    if f.where:
        lines += ["", f"**Where:** {md(f.where)}"]
    if f.evidence:
        lines += ["", "| evidence | value |", "|---|---|"]
        lines += [f"| {md(k)} | {md(fmt.evidence_value(v))} |" for k, v in fmt.shown_evidence(f.evidence).items()]
    if f.fix:
        lines += ["", "**Fix:**"]
        for language, code in fmt.fix_blocks(f.fix):  # shell commands fenced as sh, code as python
            lines += ["", fenced(code, language)]
    return "\n".join(lines)


def _diagrams(diag: Diagnosis) -> str:
    return "\n".join(
        [
            "## What was measured",
            "",
            "How the parts relate, with the values this run measured:",
            "",
            fenced(relationship_mermaid(build_relationship(diag.run)), "mermaid"),
            "",
            "One training step; each arrow carries its measured time per step:",
            "",
            fenced(sequence_mermaid(build_sequence(diag.run)), "mermaid"),
        ]
    )


def _ranks(run: Run) -> str | None:
    summaries = rank_summaries(run)
    if len(summaries) < 2:
        return None
    rows = [
        "## Ranks",
        "",
        "| rank | node | device | steps after warm-up | step (mean) | data wait (mean) | data wait share |",
        "|---:|---|---|---:|---:|---:|---:|",
    ]
    rows += [
        f"| {fmt.text(s.rank)} | {md(fmt.text(s.node))} | {md(fmt.text(s.device))} | {s.step_count} | "
        f"{fmt.duration(s.step_time_s)} | "
        f"{fmt.duration(s.data_wait_s)} | {fmt.share(s.data_wait_share_pct)} |"
        for s in summaries
    ]
    if run.ranks is not None and run.ranks.missing:
        missing = numbered("Rank", run.ranks.missing)
        rows += ["", f"{missing} of {run.ranks.world_size} left no record; the report covers the others."]
    return "\n".join(rows)


def _files(run: Run) -> str:
    lines = [
        "## Timeline",
        "",
        "`timeline.json` next to this file opens in https://ui.perfetto.dev and chrome://tracing: step phases as "
        "slices, NVML utilisation and memory as counters, findings as instant events.",
    ]
    traces = profiler_trace_paths(run)
    if traces:
        lines += ["", md(OPEN_TOGETHER_NOTE), ""]
        lines += [f"- {md(p)}" for p in traces]
    return "\n".join(lines)
