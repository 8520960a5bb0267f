"""`gputriage compare`'s outputs: the terminal text, the `gputriage.compare/1` JSON document, the HTML page.

Renderers only: every number and every call (better / worse / within noise) comes from `compare/model.py`. Text for
the terminal goes through `sanitize.inline_text` (paths and finding titles come from files); the HTML page is a
Jinja2 template with autoescape on, and its SVG is built by `svg.py` and `timeline_svg` here, which escape what they
place.
"""

from __future__ import annotations

from typing import Any, TextIO

from gputriage.compare.model import COMPARE_SCHEMA, Change, Comparison, FindingRef, Side, steps_of, times_text
from gputriage.compare.stats import UNMEASURED
from gputriage.diagnosis import Diagnosis
from gputriage.record.numbers import PARTS, host_parts_s
from gputriage.report.diagrams import build_sequence
from gputriage.report.sanitize import inline_text, report_tree
from gputriage.report.svg import sequence_svg
from gputriage.stdlib import html
from gputriage.wording import counted

# -- JSON --------------------------------------------------------------------------------------------------------------


def _change_doc(c: Change) -> dict[str, Any]:
    interval = c.judgement.interval
    return {
        "key": c.key,
        "label": c.label,
        "unit": c.unit,
        "before": c.before,
        "after": c.after,
        "ratio": round(c.ratio, 4) if c.ratio is not None else None,
        "direction": c.judgement.direction,
        "interval_90": [interval.low, interval.high] if interval is not None else None,
        "basis": c.judgement.reason,
    }


def _side_doc(s: Side) -> dict[str, Any]:
    return {"path": s.label, "status": s.status, "exit_code": s.exit_code, "steps": s.steps, "stand_in": s.stand_in}


def _refs(refs: list[FindingRef]) -> list[dict[str, Any]]:
    return [{"code": r.code, "rung": r.rung, "severity": r.severity, "where": r.where, "title": r.title} for r in refs]


def compare_document(c: Comparison) -> dict[str, Any]:
    """The `gputriage.compare/1` document (docs/contract.md)."""
    return {
        "schema": COMPARE_SCHEMA,
        "verdict": {"status": c.status, "summary": c.summary},
        "regressed_timing": c.regressed_timing(),
        "timing_judged": c.timing_judged,
        "unjudged_because": c.unjudged_because,
        "caveats": c.caveats,
        "before": _side_doc(c.before),
        "after": _side_doc(c.after),
        "step_time": _change_doc(c.step_time),
        "parts": [_change_doc(p) for p in c.parts],
        "gpu_busy": [_change_doc(g) for g in c.gpu_busy],
        "throughput": _change_doc(c.throughput) if c.throughput is not None else None,
        "findings": {
            "resolved": _refs(c.findings.resolved),
            "still": _refs(c.findings.still),
            "new": _refs(c.findings.new),
        },
    }


# -- terminal ----------------------------------------------------------------------------------------------------------


def _value_text(c: Change) -> str:
    if c.unit == "s":
        return times_text(c.before, c.after)
    if c.unit == "pct":
        b = "not measured" if c.before is None else f"{c.before:.0f}%"
        a = "not measured" if c.after is None else f"{c.after:.0f}%"
        return f"{b} -> {a}"
    b = "not measured" if c.before is None else f"{c.before:.1f}"
    a = "not measured" if c.after is None else f"{c.after:.1f}"
    return f"{b} -> {a}"


def _direction(c: Change, judged: bool, because: str | None = None) -> str:
    timing = c.key in ("step_time", "samples_per_s") or c.unit in ("s", "pct")
    unmeasured = c.judgement.direction == UNMEASURED  # nothing to judge, on a stand-in or not
    return (
        c.judgement.direction
        if judged or not timing or unmeasured
        else f"not judged ({c.judgement.direction} {because or 'on a stand-in'})"
    )


def _row(c: Change, judged: bool = True, because: str | None = None) -> str:
    ratio = (
        f" ({c.ratio:.2f}x)"
        if c.ratio is not None and c.unit == "s" and c.judgement.direction != "not measured"
        else ""
    )
    return f"  {c.label:<22} {_value_text(c) + ratio:<34} {_direction(c, judged, because)}"


def render_terminal(c: Comparison, stream: TextIO) -> None:
    """The comparison as plain lines: the verdict first, then the numbers, then the findings."""
    lines = [
        f"gputriage compare: {c.summary}",
        f"  before: {c.before.label} ({c.before.status}, {counted(c.before.steps, 'step')})",
        f"  after:  {c.after.label} ({c.after.status}, {counted(c.after.steps, 'step')})",
        *(f"  note: {caveat}" for caveat in c.caveats),
        "",
        _row(c.step_time, c.timing_judged, c.unjudged_because),
    ]
    lines += [_row(p, c.timing_judged, c.unjudged_because) for p in c.parts if p.before or p.after]
    lines += [_row(g, c.timing_judged, c.unjudged_because) for g in c.gpu_busy]
    if c.throughput is not None:
        lines.append(_row(c.throughput, c.timing_judged, c.unjudged_because))
    lines.append(f"  noise: {c.step_time.judgement.reason}")
    lines.append("")
    for title, refs in (("resolved", c.findings.resolved), ("still there", c.findings.still), ("new", c.findings.new)):
        names = ", ".join(f"{r.code}{f' ({r.where})' if r.where else ''}" for r in refs) or "none"
        lines.append(f"  findings {title}: {names}")
    stream.write("".join(inline_text(line) + "\n" for line in lines))


# -- HTML --------------------------------------------------------------------------------------------------------------

_PART_COLOURS = ("#e4572e", "#f3a712", "#4c9f70", "#a01a7d", "#29335c", "#9e9e9e")
_TIMELINE_W, _ROW_H, _PAD_L = 900.0, 28.0, 70.0


def timeline_svg(before: Diagnosis, after: Diagnosis) -> str:
    """Both runs' steps on one time axis (seconds from each run's first step): one row each, every step drawn as its
    parts (load data, send data, compute, ...), so a shorter step and a smaller part are seen at a glance."""
    rows = [("before", steps_of(before.run)), ("after", steps_of(after.run))]
    spans = [s.start_s - steps[0].start_s + s.wall_s for _, steps in rows if steps for s in steps]
    end_s = max(spans, default=0.0)
    height = _ROW_H * 2 + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_TIMELINE_W + _PAD_L:.0f}" height="{height:.0f}" role="img">'
    ]
    if end_s <= 0:
        out.append('<text x="10" y="20">no step timing in either run</text></svg>')
        return "".join(out)
    scale = _TIMELINE_W / end_s
    for row, (name, steps) in enumerate(rows):
        y = 10 + row * _ROW_H
        out.append(f'<text x="4" y="{y + 16:.0f}" font-size="12">{html.escape(name)}</text>')
        for step in steps:
            x = _PAD_L + (step.start_s - steps[0].start_s) * scale
            for i, part_s in enumerate(host_parts_s(step)):
                w = part_s * scale
                if w > 0.05:
                    title = html.escape(f"step {step.index}: {PARTS[i].label} {part_s * 1e3:.2f} ms")
                    out.append(
                        f'<rect x="{x:.2f}" y="{y:.0f}" width="{w:.2f}" height="{_ROW_H - 6:.0f}" '
                        f'fill="{_PART_COLOURS[i]}"><title>{title}</title></rect>'
                    )
                    x += w
    axis_y = 10 + 2 * _ROW_H + 14
    out.append(f'<text x="{_PAD_L:.0f}" y="{axis_y:.0f}" font-size="11">0 s</text>')
    out.append(f'<text x="{_PAD_L + _TIMELINE_W - 60:.0f}" y="{axis_y:.0f}" font-size="11">{end_s:.3g} s</text></svg>')
    return "".join(out)


def render_html(c: Comparison, before: Diagnosis, after: Diagnosis) -> str:
    from markupsafe import Markup

    from gputriage.report.html import _environment

    # strings from two runs' files (a GPU's name in a trace, a pasted env text): control characters made visible,
    # as on the report's page, before the template escapes them for HTML
    c, before, after = report_tree(c), report_tree(before), report_tree(after)
    template = _environment().get_template("compare.html.j2")
    return template.render(
        c=c,
        doc=compare_document(c),
        rows=[c.step_time, *[p for p in c.parts if p.before or p.after], *c.gpu_busy]
        + ([c.throughput] if c.throughput is not None else []),
        value_text=_value_text,
        direction=lambda change: _direction(change, c.timing_judged, c.unjudged_because),
        before_svg=Markup(sequence_svg(build_sequence(before.run))),
        after_svg=Markup(sequence_svg(build_sequence(after.run))),
        timeline_svg=Markup(timeline_svg(before, after)),
        legend=list(zip((p.label for p in PARTS), _PART_COLOURS, strict=True)),
    )
