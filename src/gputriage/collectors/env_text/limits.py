"""Bounds on what a pasted text can make the parser do or keep: the text comes from other people's machines.

Every pattern runs on one line at a time, cut to MATCH_CHARS, so the work is linear in the size of the paste whatever
the lines look like (no pattern ever spans lines, so blank-line runs cannot make a `\\s*` quadratic). Every string kept
in the record is cut to VALUE_CHARS, and every number read from the text is range-checked before `int()`.
"""

from __future__ import annotations

import re

MATCH_CHARS = 400  # the longest line prefix any pattern looks at; real report lines are far shorter
VALUE_CHARS = 200  # the longest string kept from the text (names, versions, messages)
MAX_LINES = 50_000  # lines read; a report is hundreds of lines, a long pip log a few thousand
MAX_ITEMS = 64  # GPUs, errors, companions ... kept per list
_SMALL_INT = re.compile(r"[0-9]{1,6}")
_VERSION = re.compile(r"[0-9]{1,4}(?:\.[0-9]{1,6}){0,3}(?:(?:\.?(?:post|dev|a|b|rc)[0-9]{1,12})|\+[0-9a-z_.]{1,32})*")


def cap(text: str) -> str:
    """`text` stripped and cut to VALUE_CHARS (the JSON keeps what was read; terminals sanitise it)."""
    text = text.strip()
    return text if len(text) <= VALUE_CHARS else text[: VALUE_CHARS - 1] + "…"


def small_int(text: str, limit: int = 999_999) -> int | None:
    """An ASCII non-negative integer of at most six digits and at most `limit`, else None (never a ValueError)."""
    if not _SMALL_INT.fullmatch(text):
        return None
    value = int(text)
    return value if value <= limit else None


def version(text: str) -> str | None:
    """A version as people paste it ("2.1.0+cu121", "1.8.0.dev20201023", "535.104.05"), else None."""
    match = _VERSION.match(text.strip())
    return match.group(0) if match else None
