"""The two diagrams as inline SVG, generated here so that report.html needs no renderer and no network.

Every string that came from the user's run goes through `_esc` (XML escaping), and long values are cut with an
ellipsis, the full text kept in a <title> tooltip.
"""

from __future__ import annotations

from gputriage.report.diagrams import (
    Entity,
    Message,
    RelationshipDiagram,
    SequenceDiagram,
    footer_text,
    message_label,
)
from gputriage.stdlib import html

_FONT = "font-family='system-ui, -apple-system, Segoe UI, sans-serif'"
_CHAR_PX = 6.6  # average glyph width at 12px, to size boxes without a text-measuring engine
_HOT = "#c9302c"
_INK = "#222"
_MUTED = "#888"

_BOX_W = 250
_BOX_GAP = 80
_ATTR_LINES = 2  # an attribute wraps onto at most this many lines, then is cut with an ellipsis
_LINE_H = 18
_HEAD_H = 28


def _esc(value: str) -> str:
    return html.escape(value, quote=True)


def _fit(value: str, width_px: float) -> str:
    max_chars = max(4, int(width_px / _CHAR_PX))
    return value if len(value) <= max_chars else value[: max_chars - 1] + "…"


def _text(x: float, y: float, value: str, width_px: float, *, extra: str = "") -> str:
    shown = _fit(value, width_px)
    tooltip = f"<title>{_esc(value)}</title>" if shown != value else ""
    return f"<text x='{x:.0f}' y='{y:.0f}' {extra}>{tooltip}{_esc(shown)}</text>"


def _wrap(value: str, width_px: float) -> list[str]:
    """Split at spaces into lines that fit, at most _ATTR_LINES of them (the last one cut if it still overflows)."""
    max_chars = max(4, int(width_px / _CHAR_PX))
    lines: list[str] = []
    rest = value
    while rest and len(lines) < _ATTR_LINES - 1 and len(rest) > max_chars:
        cut = rest.rfind(" ", 0, max_chars + 1)
        cut = cut if cut > 0 else max_chars
        lines.append(rest[:cut])
        rest = rest[cut:].lstrip()
    lines.append(rest)
    return lines


def _arrow_marker(marker_id: str, color: str) -> str:
    return (
        f"<marker id='{marker_id}' viewBox='0 0 10 10' refX='9' refY='5' markerWidth='7' markerHeight='7' "
        f"orient='auto-start-reverse'><path d='M0,0 L10,5 L0,10 z' fill='{color}'/></marker>"
    )


def relationship_svg(diagram: RelationshipDiagram) -> str:
    width_px = _BOX_W - 20
    rows = max(sum(len(_wrap(f"{a.name}: {a.value}", width_px)) for a in e.attributes) for e in diagram.entities)
    box_h = _HEAD_H + rows * _LINE_H + 14
    top = 30
    width = len(diagram.entities) * _BOX_W + (len(diagram.entities) - 1) * _BOX_GAP + 20
    height = top + box_h + 20
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='diagram' id='relationship-diagram' role='img' "
        f"viewBox='0 0 {width} {height}' width='{width}' height='{height}' {_FONT} font-size='12'>",
        "<title>Relationship diagram: User, DataLoader, Model, GPU, with measured values</title>",
        f"<defs>{_arrow_marker('rel-arrow', _INK)}</defs>",
    ]
    for i, entity in enumerate(diagram.entities):
        x = 10 + i * (_BOX_W + _BOX_GAP)
        parts.append(_entity_box(entity, x, top, box_h))
        if i + 1 < len(diagram.entities):
            x1, x2, y = x + _BOX_W, x + _BOX_W + _BOX_GAP, top + box_h / 2
            parts.append(
                f"<line x1='{x1}' y1='{y:.0f}' x2='{x2 - 2}' y2='{y:.0f}' stroke='{_INK}' stroke-width='1.5' "
                "marker-end='url(#rel-arrow)'/>"
            )
            label = diagram.edge_labels[i] if i < len(diagram.edge_labels) else ""
            parts.append(
                _text(
                    x1 + _BOX_GAP / 2,
                    y - 6,
                    label,
                    _BOX_GAP + 16,
                    extra=f"text-anchor='middle' font-size='10' fill='{_MUTED}'",
                )
            )
    parts.append("</svg>")
    return "".join(parts)


def _entity_box(entity: Entity, x: float, y: float, box_h: float) -> str:
    parts = [
        f"<g class='entity' data-entity='{_esc(entity.key)}'>",
        f"<rect x='{x}' y='{y}' width='{_BOX_W}' height='{box_h:.0f}' rx='6' fill='#fff' stroke='#555'/>",
        f"<rect x='{x}' y='{y}' width='{_BOX_W}' height='{_HEAD_H}' rx='6' fill='#2f4f6f'/>",
        _text(
            x + _BOX_W / 2,
            y + 19,
            entity.title,
            _BOX_W - 10,
            extra="text-anchor='middle' fill='#fff' font-weight='600' font-size='13'",
        ),
    ]
    row = 0
    for attr in entity.attributes:
        color = _INK if attr.measured else _MUTED
        style = "" if attr.measured else " font-style='italic'"
        full = f"{attr.name}: {attr.value}"
        lines = _wrap(full, _BOX_W - 20)
        parts.append(f"<g class='attr' data-measured='{str(attr.measured).lower()}'><title>{_esc(full)}</title>")
        for line in lines:
            parts.append(
                _text(x + 10, y + _HEAD_H + 18 + row * _LINE_H, line, _BOX_W - 20, extra=f"fill='{color}'{style}")
            )
            row += 1
        parts.append("</g>")
    parts.append("</g>")
    return "".join(parts)


_COL_W = 300
_ROW_H = 58
_SELF_LOOP_W = 46
_SELF_LABEL_W = 290


def sequence_svg(diagram: SequenceDiagram) -> str:
    columns = {key: 130 + i * _COL_W for i, (key, _label) in enumerate(diagram.participants)}
    # Room on the right for the self-message's label next to the last lifeline.
    width = 130 + _COL_W * (len(diagram.participants) - 1) + _SELF_LOOP_W + _SELF_LABEL_W + 20
    head_y = 20
    first_y = head_y + 70
    bottom = first_y + len(diagram.messages) * _ROW_H + 30
    height = bottom + 40
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' class='diagram' id='sequence-diagram' role='img' "
        f"viewBox='0 0 {width} {height}' width='{width}' height='{height}' {_FONT} font-size='12'>",
        "<title>Sequence diagram of one training step, with the measured time per step on each arrow</title>",
        f"<defs>{_arrow_marker('seq-arrow', _INK)}{_arrow_marker('seq-arrow-hot', _HOT)}</defs>",
    ]
    for key, label in diagram.participants:
        cx = columns[key]
        parts.append(f"<rect x='{cx - 95}' y='{head_y}' width='190' height='32' rx='5' fill='#2f4f6f'/>")
        parts.append(_text(cx, head_y + 21, label, 180, extra="text-anchor='middle' fill='#fff' font-weight='600'"))
        parts.append(
            f"<line x1='{cx}' y1='{head_y + 32}' x2='{cx}' y2='{bottom}' stroke='#aaa' stroke-dasharray='4 4'/>"
        )
    for row, message in enumerate(diagram.messages):
        parts.append(_message(message, columns, first_y + row * _ROW_H))
    parts.append(_text(20, bottom + 24, _footer(diagram), width - 40, extra=f"fill='{_MUTED}'"))
    parts.append("</svg>")
    return "".join(parts)


def _message(message: Message, columns: dict[str, int], y: float) -> str:
    color = _HOT if message.highlighted else _INK
    marker = "seq-arrow-hot" if message.highlighted else "seq-arrow"
    stroke_w = 3 if message.highlighted else 1.5
    weight = " font-weight='700'" if message.highlighted else ""
    x1, x2 = columns[message.source], columns[message.target]
    cls = "message hot" if message.highlighted else "message"
    parts = [f"<g class='{cls}' data-action='{_esc(message.action)}'>"]
    label = message_label(message)
    detail = message.detail
    detail_fill = _MUTED
    hot = "▲ where the time goes"
    if x1 == x2:
        parts.append(
            f"<path d='M{x1},{y} h{_SELF_LOOP_W} v22 h-{_SELF_LOOP_W - 2}' fill='none' stroke='{color}' "
            f"stroke-width='{stroke_w}' marker-end='url(#{marker})'/>"
        )
        parts.append(_text(x1 + _SELF_LOOP_W + 8, y + 4, label, _SELF_LABEL_W, extra=f"fill='{color}'{weight}"))
        parts.append(_text(x1 + _SELF_LOOP_W + 8, y + 19, detail, _SELF_LABEL_W, extra=f"fill='{detail_fill}'"))
        if message.highlighted:
            parts.append(
                _text(x1 + _SELF_LOOP_W + 8, y + 34, hot, _SELF_LABEL_W, extra=f"fill='{_HOT}' font-weight='700'")
            )
    else:
        end = x2 - 3 if x2 > x1 else x2 + 3
        parts.append(
            f"<line x1='{x1}' y1='{y + 16}' x2='{end}' y2='{y + 16}' stroke='{color}' stroke-width='{stroke_w}' "
            f"marker-end='url(#{marker})'/>"
        )
        mid = (x1 + x2) / 2
        span = abs(x2 - x1) - 20
        parts.append(_text(mid, y + 9, label, span, extra=f"text-anchor='middle' fill='{color}'{weight}"))
        parts.append(_text(mid, y + 32, detail, span, extra=f"text-anchor='middle' fill='{detail_fill}'"))
        if message.highlighted:
            parts.append(_text(mid, y + 46, hot, span, extra=f"text-anchor='middle' fill='{_HOT}' font-weight='700'"))
    parts.append("</g>")
    return "".join(parts)


def _footer(diagram: SequenceDiagram) -> str:
    text = footer_text(diagram)
    return text + " ▲ where the time goes" if diagram.unattributed_highlighted else text
