"""Every string that enters the record is made safe for UTF-8, never dropped.

Python hands a program bytes it cannot decode as lone surrogates (`sys.argv`, file names, environment variables,
`os.listdir`: PEP 383), and exception messages carry whatever the user put in them. JSON and the report files are
UTF-8, where a lone surrogate cannot be written: one `\\udce9` in argv would lose the whole report. Such a character is
kept as the escape Python itself prints for it (`\\udce9`), so the text stays readable and nothing disappears.
"""

from __future__ import annotations

from typing import Any

import msgspec


def safe_text(text: str) -> str:
    """`text` unchanged when it is valid UTF-8; otherwise each lone surrogate written as its `\\uXXXX` escape."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def encode_safely(record: Any) -> bytes:
    """The record as JSON; a string that UTF-8 cannot hold is made safe in place first (see the module docstring)."""
    try:
        return msgspec.json.encode(record)
    except UnicodeEncodeError:
        make_safe(record)
        return msgspec.json.encode(record)


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
