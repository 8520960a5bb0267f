"""The terminal report (rich): verdict first, then the ladder, then each finding's evidence and fix."""

from __future__ import annotations

from typing import Any

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text

from gputriage.diagnosis import Diagnosis, RungView
from gputriage.findings import Finding, Severity
from gputriage.record.environment import Environment
from gputriage.record.trace import RankTrace
from gputriage.report import fmt
from gputriage.report.diagrams import RelationshipDiagram, SequenceDiagram, build_relationship, build_sequence
from gputriage.report.sanitize import clean_tree, terminal_text

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
    "skipped": ("· not measured", "dim"),
}
_SEVERITY_STYLE = {Severity.CRITICAL: "bold red", Severity.WARNING: "yellow", Severity.INFO: "cyan"}


def render(diag: Diagnosis, console: Console) -> None:
    diag = clean_tree(diag)  # every string from the job or a file, with its control characters made visible
    console.print(verdict_panel(diag))
    console.print(ladder_table(diag))
    if diag.run.environment is not None:
        console.print(environment_table(diag.run.environment))
    measured = measured_tables(diag)
    if measured:
        console.print(Text("What was measured", style="bold"))
        for table in measured:
            console.print(table)
    for finding in diag.findings:
        console.print(finding_panel(finding))


def verdict_panel(diag: Diagnosis) -> Panel:
    v = diag.verdict
    title = Text(f"gputriage verdict: {v.status.upper()}", style=_VERDICT_STYLE.get(v.status, "bold"))
    if v.label:
        title.append(f" · {v.label}", style="bold magenta")
    body = _plain(v.summary)
    if v.root_cause:
        body.append(f"\nroot cause: {v.root_cause}", style="bold")
    if v.scope:
        body.append(f"\n{v.scope}", style="italic")
    return Panel(body, title=title, title_align="left", expand=True)


def ladder_table(diag: Diagnosis) -> Table:
    table = Table(title="The ladder", title_justify="left", show_edge=False, pad_edge=False)
    table.add_column("rung", justify="right")
    table.add_column("question")
    table.add_column("status")
    table.add_column("findings")
    for view in diag.ladder:
        label, style = _RUNG_MARK[view.status]
        table.add_row(str(view.rung), view.question, Text(label, style=style), _rung_detail(view))
    return table


def _rung_detail(view: RungView) -> Text:
    """The decisive findings; the info ones as notes; for a rung not measured, why."""
    text = Text(", ".join(view.decisive_codes))
    if view.note_codes:
        text.append(("; " if view.decisive_codes else "") + "notes: " + ", ".join(view.note_codes), style="dim")
    if view.reason:
        text.append(("; " if len(text) else "") + view.reason, style="dim italic")
    return text


def environment_table(env: Environment) -> Table:
    """The rung-1 facts behind the findings, and what could not be told (never guessed)."""
    title = "What this machine has" if env.source == "probe" else "What the pasted text says"
    table = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    table.add_column(style="dim")
    table.add_column()
    for label, value in _environment_rows(env):
        table.add_row(_plain(label), _plain(value))
    for sentence in env.unknown:
        shown = sentence.removeprefix("could not tell ")  # the label says it already
        table.add_row("could not tell", _plain(shown, style="italic"))
    return table


def _environment_rows(env: Environment) -> list[tuple[str, str]]:
    t, d, h = env.torch, env.driver, env.host
    rows: list[tuple[str, str]] = []
    if t.installed is False:
        rows.append(("torch", "not installed"))
    elif t.version:
        build = f"CUDA {t.cuda_version}" if t.cuda_version else (f"HIP {t.hip_version}" if t.hip_version else "CPU")
        avail = {True: "available", False: "not available", None: "availability unknown"}[t.is_available]
        rows.append(("torch", f"{t.version} ({build} build, {t.install_method or 'install unknown'}), {avail}"))
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
    return rows


def measured_tables(diag: Diagnosis) -> list[Table]:
    """The two diagrams of the HTML report, as text, plus the per-rank trace numbers; only what was measured."""
    run = diag.run
    tables = []
    if run.placement is not None or run.steps is not None or run.gpu is not None:
        tables.append(relationship_table(build_relationship(run)))
    sequence = build_sequence(run)
    if any(m.time_s is not None or m.share_pct is not None for m in sequence.messages):
        tables.append(sequence_table(sequence))
    if run.trace is not None and run.trace.ranks:
        tables.append(trace_table(run.trace.ranks))
    return tables


def relationship_table(diagram: RelationshipDiagram) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False, title_justify="left")
    table.add_column(style="bold")
    table.add_column()
    for entity in diagram.entities:
        cells = [_plain(f"{a.name} {a.value}", style="" if a.measured else "dim italic") for a in entity.attributes]
        table.add_row(_plain(entity.title), Text(" · ").join(cells))
    return table


def sequence_table(diagram: SequenceDiagram) -> Table:
    step = fmt.duration(diagram.step_time_s)
    table = Table(title=f"one step: {step} ({diagram.basis})", title_justify="left", box=None, pad_edge=False)
    for header, justify in (("", "right"), ("arrow", "left"), ("per step", "right"), ("share", "right"), ("", "left")):
        table.add_column(header, justify=justify)  # type: ignore[arg-type]  # rich's JustifyMethod literal
    for m in diagram.messages:
        style = "bold red" if m.highlighted else ""
        mark = "← where the time goes" if m.highlighted else m.detail
        cells = (f"{m.number}.", m.action, fmt.duration(m.time_s), fmt.share(m.share_pct), mark or "")
        table.add_row(*(_plain(c) for c in cells), style=style)
    if diagram.unattributed_s is not None:
        hot = diagram.unattributed_highlighted
        table.add_row(
            "",
            "other",
            fmt.duration(diagram.unattributed_s),
            fmt.share(diagram.unattributed_pct),
            "← where the time goes (not attributed to an arrow)" if hot else "not attributed to an arrow",
            style="bold red" if hot else "dim",
        )
    return table


def trace_table(ranks: list[RankTrace]) -> Table:
    table = Table(title="profiler trace, per rank", title_justify="left", box=None, pad_edge=False)
    for header in ("rank", "device", "steps", "busy", "idle", "host wait", "step", "DataLoader"):
        table.add_column(header, justify="left" if header == "device" else "right")
    for r in ranks:
        idle = r.idle_breakdown
        table.add_row(
            fmt.text(r.rank),
            _plain(fmt.text(r.device)),
            fmt.text(r.steps),
            fmt.percent(r.busy_pct),
            fmt.percent(r.idle_pct),
            fmt.percent(idle.host_wait_pct if idle is not None else None),
            fmt.duration(r.step_time_us / 1e6 if r.step_time_us is not None else None),
            fmt.percent(r.dataloader_pct_of_step),
        )
    return table


def finding_panel(finding: Finding) -> Panel:
    finding = clean_tree(finding)  # also drawn on its own, by the live view
    parts: list[RenderableType] = [_plain(finding.title, style="bold")]
    if finding.where:
        parts.append(_plain(f"where: {finding.where}", style="magenta"))
    if finding.evidence:
        parts.append(_evidence_table(finding.evidence))
    if finding.fix:
        parts.append(Text("fix:", style="bold green"))
        fix = terminal_text(finding.fix, limit=4000)
        parts.append(Syntax(fix, "python", theme="ansi_dark", word_wrap=True, background_color="default"))
    rank = f" rank {finding.rank}" if finding.rank is not None else ""
    title = Text(
        f"{finding.severity.value} · rung {finding.rung} · {finding.code}{rank}",
        style=_SEVERITY_STYLE[finding.severity],
    )
    return Panel(Group(*parts), title=title, title_align="left")


def _evidence_table(evidence: dict[str, Any]) -> Table:
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="dim")
    table.add_column()
    for key, value in evidence.items():
        table.add_row(_plain(key), _plain(fmt.evidence_value(value)))
    return table


def _plain(value: str, style: str = "") -> Text:
    """Text from a record, as literal text: control characters escaped (sanitize.py), and never read as markup
    (a kernel named `foo[/]` would otherwise break the table)."""
    return Text(terminal_text(value), style=style)
