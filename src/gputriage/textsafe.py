"""Every string that enters the record is made safe for UTF-8, never dropped.

Python hands a program bytes it cannot decode as lone surrogates (`sys.argv`, file names, environment variables,
`os.listdir`: PEP 383), and exception messages carry whatever the user put in them. JSON and the report files are
UTF-8, where a lone surrogate cannot be written: one `\\udce9` in argv would lose the whole report. Such a character is
kept as the escape Python itself prints for it (`\\udce9`), so the text stays readable and nothing disappears.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec


def safe_text(text: str) -> str:
    """`text` unchanged when it is valid UTF-8; otherwise each lone surrogate written as its `\\uXXXX` escape."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


# Characters a terminal acts on that JSON leaves raw: the C1 controls (U+0080-U+009F: U+009B is an 8-bit CSI) and the
# bidirectional controls that reorder what is shown (U+061C, U+200E-F, U+2028-9, U+202A-E, U+2066-9), as UTF-8 bytes.
# UTF-8 lead bytes never occur inside another character, so a match is always a whole character.
_TERMINAL_ACTIVE = re.compile(rb"\xc2[\x80-\x9f]|\xd8\x9c|\xe2\x80[\x8e\x8f\xa8\xa9\xaa-\xae]|\xe2\x81[\xa6-\xa9]")


def encode_safely(record: Any) -> bytes:
    """The record as JSON; a string that UTF-8 cannot hold is made safe in place first (see the module docstring),
    and a character a terminal would act on is written as its `\\uXXXX` escape (the same string to any JSON reader),
    so that `cat report.json` or `--json` shows a trace's hostile names instead of obeying them."""
    try:
        encoded = msgspec.json.encode(record)
    except UnicodeEncodeError:
        make_safe(record)
        encoded = msgspec.json.encode(record)
    return _TERMINAL_ACTIVE.sub(_escaped, encoded)


def _escaped(match: re.Match[bytes]) -> bytes:
    return b"\\u%04x" % ord(match.group().decode("utf-8"))


def make_safe(node: Any) -> Any:
    """Make every string reachable from `node` (a record's fields, lists, dicts, tuples) safe, in place where the
    container is mutable; returns the node (a new one for a string or a tuple)."""
    if isinstance(node, str):
        return safe_text(node)
    if isinstance(node, list):
        node[:] = [make_safe(item) for item in node]
    elif isinstance(node, tuple):
        return tuple(make_safe(item) for item in node)
    elif isinstance(node, dict):
        items = [(make_safe(k), make_safe(v)) for k, v in node.items()]
        node.clear()
        node.update(items)
    elif isinstance(node, msgspec.Struct):
        for name in node.__struct_fields__:
            value = getattr(node, name)
            fixed = make_safe(value)
            if fixed is not value:
                setattr(node, name, fixed)
    return node
