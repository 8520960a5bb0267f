"""Text from other people's files, cleaned for a terminal, Markdown or Mermaid: one sanitiser, applied at each text
renderer's entry.

Op names, device names, rank-record strings, exception messages, paths and argv come from the user's job or from a
file someone forwarded. rich drops BEL and a few others but prints ESC as is, so `aten::copy_\\x1b]0;evil\\x07` would
retitle the window and `\\x1b[2J` clear the screen. Every control character (C0, DEL, C1) and every bidirectional
override is shown as a visible escape instead (`\\x1b`, `\\u202e`); a newline and a tab stay where the layout places
them. The JSON document is never cleaned: it keeps every string exact.

`clean_tree` applies `terminal_text` to every string of a record, a finding or a diagnosis (Structs, lists, dicts, keys
included), copying only the objects that held something to clean, so a clean record costs one walk and no copy.
`report_tree` does the same for a report, where every string is one line (`inline_text`) but a fix's code: an op
name with a newline in it ("aten::mul\ngputriage verdict: HEALTHY") would otherwise print a line of its own, a fake
verdict under the real one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import Enum
from functools import cache
from typing import Any, TypeVar, get_type_hints

import msgspec

T = TypeVar("T")

# C0 controls but \t and \n, DEL, C1 controls, and the Unicode bidirectional controls that reorder what a reader sees
# (ALM, LRM, RLM, LRE/RLE/PDF/LRO/RLO, LRI/RLI/FSI/PDI), plus the line and paragraph separators some terminals and
# editors treat as newlines.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_UNSAFE_INLINE = re.compile(_UNSAFE.pattern[:-1] + "\t\n]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_text(text: str, limit: int | None = None) -> str:
    """`text` with every control character shown as an escape; newlines and tabs kept; cut to `limit` characters
    (a line a person reads: an op name, a device name) when one is given."""
    cleaned = _UNSAFE.sub(_visible, text)
    if limit is None or len(cleaned) <= limit:
        return cleaned
    return cleaned[: limit - 1] + "…"


def inline_text(text: str) -> str:
    """`text` for one line (a table cell, a title): newlines and tabs are shown as escapes too."""
    return _UNSAFE_INLINE.sub(_visible, text)


# The fields whose text is several lines by design: a finding's fix (code, commands, comments).
BLOCK_FIELDS = frozenset({"fix"})


def clean_tree(value: T, clean: Callable[[str], str] = terminal_text) -> T:
    """A copy of `value` whose every string (dict keys too) went through `clean`; `value` itself when nothing needed it.

    Walks Structs, lists, tuples and dicts. Enum members (a finding's severity) and numbers are left alone.
    """
    cleaned: T = _clean(value, clean)
    return cleaned


def report_tree(value: T) -> T:
    """`clean_tree` for a report: every string on one line (newlines shown as `\\x0a`), but the BLOCK_FIELDS."""
    cleaned: T = _clean(value, inline_text, terminal_text)
    return cleaned


def _clean(value: Any, clean: Callable[[str], str], block: Callable[[str], str] | None = None) -> Any:
    kind = type(value)
    if kind is str:
        return clean(value)
    if kind is list or kind is tuple:
        return _clean_sequence(value, clean, block)
    if kind is dict:
        return _clean_dict(value, clean, block)
    if isinstance(value, msgspec.Struct):
        return _clean_struct(value, clean, block)
    return value


def _clean_sequence(
    value: list[Any] | tuple[Any, ...], clean: Callable[[str], str], block: Callable[[str], str] | None
) -> Any:
    items = [_clean(item, clean, block) for item in value]
    if all(new is old for new, old in zip(items, value, strict=True)):
        return value
    return items if type(value) is list else tuple(items)


def _clean_dict(
    value: dict[Any, Any], clean: Callable[[str], str], block: Callable[[str], str] | None
) -> dict[Any, Any]:
    pairs = [(_clean(k, clean, block), _clean(v, clean, block)) for k, v in value.items()]
    if all(nk is k and nv is v for (nk, nv), (k, v) in zip(pairs, value.items(), strict=True)):
        return value
    return dict(pairs)


def _clean_struct(value: Any, clean: Callable[[str], str], block: Callable[[str], str] | None) -> Any:
    changed = {}
    kind: Any = type(value)
    for name in _text_fields(kind):
        old = getattr(value, name)
        new = _clean(old, block, None) if block is not None and name in BLOCK_FIELDS else _clean(old, clean, block)
        if new is not old:
            changed[name] = new
    return msgspec.structs.replace(value, **changed) if changed else value


@cache
def _text_fields(kind: Any) -> tuple[str, ...]:
    """The fields of a record class that may hold a string somewhere below them: a list of 100,000 steps, all numbers,
    is skipped without a look at each step."""
    try:
        hints = get_type_hints(kind)
    except (NameError, TypeError):  # an annotation that cannot be resolved: look at every field
        return kind.__struct_fields__  # type: ignore[no-any-return]
    return tuple(name for name in kind.__struct_fields__ if _may_hold_text(hints.get(name, Any), set()))


def _may_hold_text(hint: Any, seen: set[int]) -> bool:
    if id(hint) in seen:
        return False
    seen.add(id(hint))
    if hint is str or hint is Any or hint is object:
        return True
    if isinstance(hint, type):
        return _class_may_hold_text(hint, seen)
    args = getattr(hint, "__args__", None)
    if args is None:
        return True  # a form this walk does not know: assume it may hold text
    return any(_may_hold_text(arg, seen) for arg in args if arg is not type(None))


def _class_may_hold_text(kind: type, seen: set[int]) -> bool:
    if issubclass(kind, Enum) or not issubclass(kind, msgspec.Struct):
        return False  # numbers, bools; a str-valued Enum is one of ours (a severity), never a file's text
    hints = _hints(kind)
    return hints is None or any(_may_hold_text(h, seen) for h in hints.values())


def _hints(kind: type) -> dict[str, Any] | None:
    try:
        return get_type_hints(kind)
    except (NameError, TypeError):
        return None
