"""Text from other people's files made safe to print: no control sequence ever reaches a terminal or a document.

A trace's op names, a device name in its header, a pasted environment text: any of them can hold an escape
sequence (`aten::copy_\\x1b]0;evil\\x07\\x1b[2J` retitles the terminal and clears it). rich drops BEL but not ESC,
so every string from a record passes through `terminal_text` before the terminal, Markdown or Mermaid renderers
see it. The JSON report keeps the exact text.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and the Unicode bidirectional overrides and isolates (which
# can make text read differently from what it is).
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")
MAX_CHARS = 400


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: str, limit: int = MAX_CHARS) -> str:
    """`text` with every control character shown as an escape (`\\x1b`) and cut to `limit` characters."""
    cleaned = _UNSAFE.sub(_visible, text)
    return cleaned if len(cleaned) <= limit else cleaned[: limit - 1] + "…"
