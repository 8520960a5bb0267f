"""The two diagrams as Mermaid blocks (GitHub renders them in issues and PRs), with the measured values."""

from __future__ import annotations

import re

from gputriage.report.diagrams import RelationshipDiagram, SequenceDiagram, footer_text, message_label
from gputriage.report.sanitize import inline_text

# Characters that are safe inside a quoted Mermaid label; anything else becomes an entity code (#60;), so a user's
# module name can neither close the label nor inject markup into the rendered diagram.
_SAFE = re.compile(r"[A-Za-z0-9 .,:_/+%=×·µ-]")


def label(value: str) -> str:
    visible = inline_text(value.replace("\n", " "))  # a control character shows as its escape, not as #27;
    return "".join(ch if _SAFE.fullmatch(ch) else f"#{ord(ch)};" for ch in visible)


def relationship_mermaid(diagram: RelationshipDiagram) -> str:
    lines = ["flowchart LR"]
    for entity in diagram.entities:
        rows = [label(entity.title)] + [label(f"{a.name}: {a.value}") for a in entity.attributes]
        lines.append(f'    {entity.key}["{"<br/>".join(rows)}"]')
    for i in range(len(diagram.entities) - 1):
        edge = label(diagram.edge_labels[i]) if i < len(diagram.edge_labels) else ""
        src, dst = diagram.entities[i].key, diagram.entities[i + 1].key
        lines.append(f'    {src} -->|"{edge}"| {dst}')
    return "\n".join(lines)


def sequence_mermaid(diagram: SequenceDiagram) -> str:
    lines = ["sequenceDiagram"]
    lines.extend(f"    participant {key} as {label(name)}" for key, name in diagram.participants)
    for m in diagram.messages:
        text = label(message_label(m))
        if m.highlighted:
            lines.append("    rect rgb(255, 210, 210)")
            lines.append(f"    {m.source}->>{m.target}: {text}")
            over = m.source if m.source == m.target else f"{m.source},{m.target}"
            lines.append(f"    Note over {over}: {label('where the time goes')}")
            lines.append("    end")
        else:
            lines.append(f"    {m.source}->>{m.target}: {text}")
    footer = footer_text(diagram)
    if diagram.unattributed_highlighted:
        footer += " (where the time goes)"
    first, last = diagram.participants[0][0], diagram.participants[-1][0]
    lines.append(f"    Note over {first},{last}: {label(footer)}")
    return "\n".join(lines)
