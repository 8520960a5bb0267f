"""The terminal report (rich): verdict first, then the ladder, then each finding's evidence and fix.

Two layouts of the same inputs:
- short (the default): the verdict, the ladder, the critical and warning findings in full, each info finding in one
  line, and one line saying what `-v` adds and where the files are;
- verbose (`-v`): everything, with what this machine has and what was measured.
Every block fits the width it is given (layout.py): a table that does not fit is stacked, a sentence wraps, and a
fix's code and a `where:` are printed whole on their lines (soft-wrapped: the terminal folds them, a copy or a pipe
gets the line intact). In plain mode (pipes, CI, NO_COLOR, TERM=dumb) there are no colours and no boxes.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import msgspec
from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.syntax import Syntax
from rich.text import Text

from gputriage import outdir
from gputriage.data.error_signatures import signature
from gputriage.diagnosis import Diagnosis, RungView
from gputriage.findings import Finding, Severity
from gputriage.record.environment import Environment, TorchFacts
from gputriage.record.trace import TRACE_MIN_DEVICE_EVENTS, RankTrace, TraceSection
from gputriage.report import fmt
from gputriage.report.diagrams import RelationshipDiagram, SequenceDiagram, build_relationship, build_sequence
from gputriage.report.layout import INDENT, Column, Framed, Grid, Heading, OneLine, Packed, Trimmed, plain
from gputriage.report.sanitize import report_tree, terminal_text
from gputriage.wording import counted, listed

_VERDICT_STYLE = {
    "idle": "bold red",
    "underused": "bold yellow",
    "healthy": "bold green",
    "inconclusive": "bold magenta",
    "unknown": "bold",
}
_RUNG_MARK = {
    "fail": ("✗ fail", "red"),
    "warn": ("! warn", "yellow"),
    "pass": ("✓ pass", "green"),
    "skipped": ("- not measured", "dim"),
    "inconclusive": ("? inconclusive", "magenta"),
}
_SEVERITY_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}
_HIGHLIGHT_LEXER = {fmt.SHELL: "bash", fmt.PYTHON: "python", fmt.TEXT: "text"}
FIX_LIMIT_CHARS = 4000
# The ladder's question in fewer than this many columns takes three lines or more: stacked reads better then.
LADDER_QUESTION_MIN_WIDTH = 30


class Block(msgspec.Struct):
    """One thing to print. `whole`: print its lines unbroken (code, a file:line), letting the terminal fold them."""

    renderable: RenderableType
    whole: bool = False


def render(diag: Diagnosis, console: Console, verbose: bool = False, out_dir: Path | None = None) -> None:
    """The report on `console`: short by default, everything with `verbose`; `out_dir` is where the files went."""
    diag = report_tree(diag)  # every string from the job or a file, with its control characters made visible
    blocks = full_report(diag) if verbose else short_report(diag, out_dir)
    print_blocks(console, blocks)


def print_blocks(console: Console, blocks: list[Block]) -> None:
    for block in blocks:
        if block.whole:
            console.print(block.renderable, soft_wrap=True, crop=False)
        else:
            console.print(Trimmed(block.renderable))


def short_report(diag: Diagnosis, out_dir: Path | None = None) -> list[Block]:
    """Verdict, ladder, critical and warning findings in full, info findings in one line each; a healthy verdict
    with what was measured, the numbers it rests on (no finding shows them)."""
    blocks = [Block(verdict_panel(diag)), Block(ladder_table(diag))]
    if _shows_measured(diag):
        blocks += _measured_blocks(diag)
    infos = [f for f in diag.findings if f.severity is Severity.INFO]
    shown, folded = _per_code(f for f in diag.findings if f.severity is not Severity.INFO)
    for finding in shown:
        blocks += finding_blocks(finding)
    shown_infos, folded_infos = _per_code(infos)
    if shown_infos:
        blocks.append(Block(Text("")))
        blocks += [Block(info_line(f)) for f in shown_infos]
    blocks += [Block(_folded_line(code, count)) for code, count in {**folded, **folded_infos}.items()]
    more = more_line(diag, len(infos), out_dir)
    if more is not None:
        blocks.append(Block(more))
    return blocks


def full_report(diag: Diagnosis) -> list[Block]:
    """Everything: the short report's parts, the machine's facts, what was measured, and every finding in full."""
    blocks = [Block(verdict_panel(diag)), Block(ladder_table(diag))]
    if diag.run.environment is not None:
        blocks.append(Block(environment_table(diag.run.environment)))
    blocks += _measured_blocks(diag)
    for finding in diag.findings:
        blocks += finding_blocks(finding)
    return blocks


def _shows_measured(diag: Diagnosis) -> bool:
    """The short report shows what was measured under a healthy or inconclusive verdict, which no finding backs with
    numbers: "healthy" with no number is not evidence, and "inconclusive" shows what there was."""
    return diag.verdict.status in ("healthy", "inconclusive")


def _measured_blocks(diag: Diagnosis) -> list[Block]:
    measured = measured_tables(diag)
    if not measured:
        return []
    return [Block(Text("What was measured", style="bold")), *(Block(table) for table in measured)]


# A job of many ranks repeats a finding once per rank: the short report shows the first ones of each code in full, and
# says how many more there are (-v and the files have each); 1,000 ranks printed 11,000 lines.
SHOWN_PER_CODE = 3


def _per_code(findings: Iterable[Finding]) -> tuple[list[Finding], dict[str, int]]:
    """The findings shown, at most SHOWN_PER_CODE of each code, and how many more of each code were left out."""
    shown: list[Finding] = []
    seen: dict[str, int] = {}
    folded: dict[str, int] = {}
    for finding in findings:
        seen[finding.code] = seen.get(finding.code, 0) + 1
        if seen[finding.code] <= SHOWN_PER_CODE:
            shown.append(finding)
        else:
            folded[finding.code] = folded.get(finding.code, 0) + 1
    return shown, folded


def _folded_line(code: str, count: int) -> Text:
    return Text(f"{code}: {counted(count, 'more finding')} of this code, on other ranks or places (-v shows each)")


def more_line(diag: Diagnosis, infos: int, out_dir: Path | None) -> Text | None:
    """What the short report left out, and where all of it is; None when it left nothing out and wrote no files."""
    left_out = []
    if infos:
        left_out.append(f"the {counted(infos, 'info finding')} in full")
    if diag.run.environment is not None:
        left_out.append(_environment_title(diag.run.environment).lower())
    if not _shows_measured(diag) and measured_tables(diag):
        left_out.append("what was measured")
    files = f"{terminal_text(outdir.shown_path(out_dir))}/ (report.md, report.html)" if out_dir else None
    if left_out:
        return Text(f"-v shows {listed(left_out)}" + (f"; every detail is in {files}" if files else ""), style="dim")
    return Text(f"Every detail is in {files}", style="dim") if files else None


def verdict_panel(diag: Diagnosis) -> RenderableType:
    v = diag.verdict
    title = Text(f"gputriage verdict: {v.status.upper()}", style=_VERDICT_STYLE.get(v.status, "bold"))
    if v.label:
        title.append(f" · {v.label}", style="bold magenta")
    body = plain(v.summary)
    if v.root_cause:
        body.append(f"\nroot cause: {v.root_cause}", style="bold")
    if v.scope:
        body.append(f"\n{v.scope}", style="italic")
    return Framed(title, body)


def ladder_table(diag: Diagnosis) -> Grid:
    grid = Grid(
        [
            Column("rung", justify="right", key=True),
            Column("question", prose=True, label=False, min_width=LADDER_QUESTION_MIN_WIDTH),
            Column("status", key=True, label=False),
            Column("findings", prose=True, label=False),
        ],
        title=Text("The ladder", style="bold"),
        ruled_header=True,
    )
    for view in diag.ladder:
        label, style = _RUNG_MARK[view.mark]
        grid.add_row(str(view.rung), view.question, Text(label, style=style), _rung_detail(view))
    return grid


def _rung_detail(view: RungView) -> Text:
    """The decisive findings; the info ones as notes; for a rung not measured, why."""
    text = Text(", ".join(view.shown_decisive))
    if view.note_codes:
        text.append(("; " if view.decisive_codes else "") + "notes: " + ", ".join(view.shown_notes), style="dim")
    if view.reason:
        text.append(("; " if len(text) else "") + view.reason, style="dim italic")
    return text


def _environment_title(env: Environment) -> str:
    return "What this machine has" if env.source == "probe" else "What the pasted text says"


def environment_table(env: Environment) -> Grid:
    """The rung-1 facts behind the findings, and what could not be told (never guessed)."""
    title = _environment_title(env)
    grid = Grid([Column("", style="dim"), Column("", prose=True)], title=Text(title, style="bold"), show_header=False)
    for label, value in _environment_rows(env):
        grid.add_row(label, value)
    for sentence in env.unknown:  # each sentence says what was missing ("could not tell ...", "could not read ...")
        grid.add_row("unknown", plain(sentence, style="italic"))
    return grid


def _environment_rows(env: Environment) -> list[tuple[str, str]]:
    t, d, h = env.torch, env.driver, env.host
    rows: list[tuple[str, str]] = []
    if t.installed is False:
        rows.append(("torch", "not installed"))
    elif t.version:
        avail = {True: "available", False: "not available", None: "availability unknown"}[t.is_available]
        rows.append(("torch", f"{t.version} ({_build_text(t)}, {t.install_method or 'install unknown'}), {avail}"))
    if d.driver_version or d.nvml_error:
        cuda = f", supports CUDA <= {d.cuda_driver_version}" if d.cuda_driver_version else ""
        rows.append(("driver", f"{d.driver_version}{cuda}" if d.driver_version else f"NVML: {d.nvml_error}"))
    for dev in d.devices:
        detail = dev.error or ", ".join(
            x
            for x in (
                f"sm_{dev.compute_capability.replace('.', '')}" if dev.compute_capability else "",
                f"{dev.memory_total_bytes / 2**30:.0f} GiB" if dev.memory_total_bytes else "",
                "MIG on" if dev.mig_mode else "",
            )
            if x
        )
        rows.append((f"GPU {dev.index}", f"{dev.name} ({detail})" if detail else dev.name))
    if h.in_container:
        rows.append(("container", h.container_kind or "yes"))
    for name, value in env.env_vars.items():
        rows.append((name, repr(value)))
    for error in env.errors:
        sig = signature(error.key) if error.finding is None else None
        if sig is not None and len(rows) < _MAX_ENV_ROWS:  # not a rung-1 cause, but the job still fails on it
            rows.append(("error", error.text[:120]))
            rows.append(("its fix", sig.fix))
    return rows


_MAX_ENV_ROWS = 40


def _build_text(t: TorchFacts) -> str:
    """Which build torch is, as far as the facts say: a text that never names its CUDA version is not a CPU build."""
    if t.cuda_version:
        return f"CUDA {t.cuda_version} build"
    if t.hip_version:
        return f"HIP {t.hip_version} build"
    return "CPU build" if t.is_cpu_build else "build unknown"


def measured_tables(diag: Diagnosis) -> list[RenderableType]:
    """The two diagrams of the HTML report, as text, plus the per-rank trace numbers; only what was measured."""
    run = diag.run
    tables: list[RenderableType] = []
    if run.placement is not None or run.steps is not None or run.gpu is not None:
        tables.append(relationship_table(build_relationship(run)))
    sequence = build_sequence(run)
    if any(m.time_s is not None or m.share_pct is not None for m in sequence.messages):
        tables.append(sequence_table(sequence))
    if run.trace is not None and run.trace.ranks:
        tables.append(trace_table(run.trace))
    return tables


def relationship_table(diagram: RelationshipDiagram) -> Grid:
    """Each part of the job with its measured attributes, packed so that no "name value" pair is split."""
    grid = Grid([Column("", style="bold"), Column("", prose=True)], show_header=False)
    for entity in diagram.entities:
        chunks = [plain(f"{a.name} {a.value}", style="" if a.measured else "dim italic") for a in entity.attributes]
        grid.add_row(entity.title, Packed(chunks))
    return grid


def sequence_table(diagram: SequenceDiagram) -> Grid:
    step = fmt.duration(diagram.step_time_s)
    grid = Grid(
        [
            Column("arrow", key=True, label=False),
            Column("per step", justify="right"),
            Column("share", justify="right"),
            Column("", prose=True, label=False),
        ],
        title=plain(f"one step: {step} ({diagram.basis})"),
    )
    for m in diagram.messages:
        mark = "← where the time goes" if m.highlighted else m.detail
        if m.caveat:
            mark += f"; {m.caveat}"
        grid.add_row(
            f"{m.number}. {m.action}",
            fmt.duration(m.time_s),
            fmt.share(m.share_pct),
            mark or "",
            style="bold red" if m.highlighted else "",
        )
    if diagram.unattributed_s is not None:
        hot = diagram.unattributed_highlighted
        grid.add_row(
            "   other",
            fmt.duration(diagram.unattributed_s),
            fmt.share(diagram.unattributed_pct),
            "← where the time goes (not attributed to an arrow)" if hot else "not attributed to an arrow",
            style="bold red" if hot else "dim",
        )
    return grid


def trace_table(section: TraceSection) -> Grid:
    # Two busy shares, each named by what it counts and its window: kernels over the ProfilerSteps (the TensorBoard
    # plugin's GPU utilization, what the findings judge when the trace marks steps) and any device work over the GPU
    # window, first kernel to last (HTA's; the idle share is the rest of it). "host wait" is
    # HTA's share of the idle time; the DataLoader's share is of the step.
    headers = ("rank", "device", "steps", "step", "kernels/steps", "busy/window", "host wait/idle", "loader/step")
    grid = Grid(
        [Column(h, justify="left" if h == "device" else "right", key=h in ("rank", "device")) for h in headers],
        title=Text(trace_table_title(section), style="bold"),
    )
    alone = _one_process(section)
    for r in section.ranks:
        idle = r.idle_breakdown
        grid.add_row(
            "none" if alone else fmt.text(r.rank),  # a job of one process has no rank: none, not "not measured"
            fmt.text(r.device),
            fmt.text(r.steps),
            fmt.duration(r.step_time_us / 1e6 if r.step_time_us is not None else None),
            fmt.percent(r.busy_pct_of_steps),
            _busy_of_window(r),
            fmt.percent(idle.host_wait_pct if idle is not None else None),
            fmt.percent(r.dataloader_pct_of_step),
        )
    return grid


def _busy_of_window(r: RankTrace) -> str:
    """The busy share of the GPU window, with its basis where the window holds too few device events to judge it
    (a trace whose events were nearly all dropped: 100% of one 2 µs copy)."""
    shown = fmt.percent(r.busy_pct)
    events = r.gpu_events
    if r.busy_pct is None or events is None or events >= TRACE_MIN_DEVICE_EVENTS:
        return shown
    return f"{shown} of {events} device event{'s' if events != 1 else ''}"


def trace_table_title(section: TraceSection) -> str:
    """Says when the traces are some of their job's ranks only: the rows are not the whole job."""
    if _one_process(section):
        return "profiler trace, one process"
    of_world = section.ranks_of_world()
    if of_world is None:
        return "profiler trace, per rank"
    return f"profiler trace, per rank: {of_world.of_the_job()} given, {of_world.not_given()} not measured"


def _one_process(section: TraceSection) -> bool:
    """One trace that names no rank: a job that was not distributed."""
    return len(section.ranks) == 1 and section.ranks[0].rank is None and section.ranks_of_world() is None


def finding_title(finding: Finding) -> Text:
    rank = f" rank {finding.rank}" if finding.rank is not None else ""
    return Text(
        f"{finding.severity.value} · rung {finding.rung} · {finding.code}{rank}",
        style=_SEVERITY_STYLE[finding.severity],
    )


def finding_blocks(finding: Finding) -> list[Block]:
    """A finding in full: its heading, title, where, evidence and fix. The where and the fix's lines are whole."""
    finding = report_tree(finding)  # also drawn on its own, by the live view
    blocks = [Block(Text("")), Block(Heading(finding_title(finding))), Block(plain(finding.title, style="bold"))]
    if finding.where:
        blocks.append(Block(Text.assemble(("where: ", "magenta"), plain(finding.where)), whole=True))
    if finding.evidence:
        blocks.append(Block(Padding(_evidence_table(finding.evidence), (0, 0, 0, INDENT), expand=False)))
    if finding.fix:
        blocks.append(Block(Text("fix:", style="bold green")))
        blocks += [Block(line, whole=True) for line in fix_lines(finding.fix)]
    return blocks


def fix_lines(fix: str) -> list[Text]:
    """The fix's lines, indented and highlighted as the language they are in (shell or Python)."""
    lines = []
    for language, code in fmt.fix_blocks(terminal_text(fix, limit=FIX_LIMIT_CHARS)):
        highlighted = Syntax(code, _HIGHLIGHT_LEXER[language], theme="ansi_dark").highlight(code)
        highlighted.rstrip()
        lines += [Text(" " * INDENT) + line for line in highlighted.split("\n")]
    return lines


def finding_panel(finding: Finding) -> RenderableType:
    """A finding in full as one renderable, for views that cannot print lines whole (the fix wraps here)."""
    parts: list[RenderableType] = [plain(finding.title, style="bold")]
    if finding.where:
        parts.append(Text.assemble(("where: ", "magenta"), plain(finding.where)))
    if finding.evidence:
        parts.append(_evidence_table(finding.evidence))
    if finding.fix:
        parts.append(Text("fix:", style="bold green"))
        parts += fix_lines(finding.fix)
    return Framed(finding_title(finding), Group(*parts))


def info_line(finding: Finding) -> OneLine:
    """An info finding in one line: severity, rung, code and as much of its title as the width holds."""
    line = finding_title(finding)
    line.append(": ", style=line.style)
    line.append_text(plain(finding.title))
    line.style = ""
    line.stylize(_SEVERITY_STYLE[finding.severity], 0, len(finding_title(finding)))
    return OneLine(line)


def _evidence_table(evidence: dict[str, Any]) -> Grid:
    grid = Grid([Column("", style="dim"), Column("", prose=True)], show_header=False)
    for key, value in fmt.shown_evidence(evidence).items():
        grid.add_row(key, fmt.evidence_value(value))
    return grid
