"""Exact JSON structure in linear time, vectorised: which brackets and commas lie outside strings, at what depth.

The reader's fast path cuts batches at the last `}, {` and lets msgspec prove the cut (reader.py). This module is
the slow path's ground truth, used where a guess is not enough: finding the top-level "traceEvents" key (a nested
`"meta": {"traceEvents": [...]}` must not be taken for it), the end of the events list, the boundaries of each
event in a batch that did not decode as a whole, and the NaN/Infinity tokens some exporters write.

A quote is escaped when an odd run of backslashes precedes it; a bracket is structural when an even number of
unescaped quotes precede it (counted from a known state). Nothing here recurses, so any nesting depth is fine.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec
import numpy as np
import numpy.typing as npt

I64 = npt.NDArray[np.int64]

_QUOTE, _BACKSLASH = ord('"'), ord("\\")
_OPEN = (ord("{"), ord("["))
_CLOSE = (ord("}"), ord("]"))
_COMMA = ord(",")
_STRUCTURAL = np.zeros(256, dtype=bool)
_STRUCTURAL[[*_OPEN, *_CLOSE, _COMMA]] = True
_DELTA = np.zeros(256, dtype=np.int64)
_DELTA[list(_OPEN)] = 1
_DELTA[list(_CLOSE)] = -1


class Structure(msgspec.Struct):
    """The structural bytes of a buffer: offsets, the byte, and the depth after it (relative to the start)."""

    pos: I64
    byte: npt.NDArray[np.uint8]
    depth: I64  # depth after this byte; the buffer starts at depth 0
    ends_in_string: bool


def unescaped_quotes(data: npt.NDArray[np.uint8]) -> I64:
    """Offsets of the quotes that open or close a string (not preceded by an odd run of backslashes)."""
    quotes = np.flatnonzero(data == _QUOTE)
    if not len(quotes):
        return quotes.astype(np.int64)
    after_backslash = quotes[(quotes > 0)]
    candidates = after_backslash[data[after_backslash - 1] == _BACKSLASH]
    if not len(candidates):
        return quotes.astype(np.int64)
    backslash = (data == _BACKSLASH).astype(np.int8)
    edges = np.diff(backslash, prepend=np.int8(0), append=np.int8(0))
    run_start = np.flatnonzero(edges == 1)
    run_end = np.flatnonzero(edges == -1)  # exclusive
    run = np.searchsorted(run_end, candidates, side="left")
    length = candidates - run_start[run]
    escaped = candidates[(length % 2) == 1]
    return np.setdiff1d(quotes, escaped, assume_unique=True).astype(np.int64)


def structure(buf: bytes | bytearray | memoryview, *, in_string: bool = False) -> Structure:
    """Brackets and commas outside strings, with the nesting depth after each (the buffer starts at depth 0)."""
    data = np.frombuffer(buf, dtype=np.uint8)
    quotes = unescaped_quotes(data)
    candidates = np.flatnonzero(_STRUCTURAL[data]).astype(np.int64)
    before = np.searchsorted(quotes, candidates, side="left") + int(in_string)
    outside = candidates[(before % 2) == 0]
    byte = data[outside]
    depth = np.cumsum(_DELTA[byte])
    return Structure(outside, byte, depth, bool((len(quotes) + int(in_string)) % 2))


# Buffers are framed a piece at a time, so that memory follows the piece, not the buffer: every structural byte costs
# about 40 bytes of arrays, and a file of 100 MB of '[' once took 4 GB.
_PIECE_BYTES = 1 << 20


class _Piece(msgspec.Struct):
    start: int
    stop: int
    s: Structure  # offsets absolute, depth from the buffer's start
    quotes: I64  # absolute offsets of the unescaped quotes in the piece
    depth_before: int
    in_string_before: bool


def _pieces(buf: bytes | bytearray | memoryview) -> Iterator[_Piece]:
    """structure() of the buffer, one bounded piece after another, carrying the depth and the string state. A piece
    never ends on a backslash, so no escape is split."""
    view = memoryview(buf)
    at, depth, in_string = 0, 0, False
    while at < len(view):
        end = min(at + _PIECE_BYTES, len(view))
        while end < len(view) and view[end - 1] == _BACKSLASH:
            end += 1
        part = view[at:end]
        s = structure(part, in_string=in_string)
        quotes = unescaped_quotes(np.frombuffer(part, dtype=np.uint8)) + at
        s.pos += at
        s.depth += depth
        yield _Piece(at, end, s, quotes, depth, in_string)
        depth = int(s.depth[-1]) if len(s.depth) else depth
        in_string = s.ends_in_string
        at = end


class Elements(msgspec.Struct):
    """Top-level elements of a JSON list, from a buffer that starts inside the list between two elements."""

    starts: I64  # offset of each complete element's first structural byte or value text
    ends: I64  # offset just past each complete element
    list_end: int | None  # offset of the ']' that closes the list, when the buffer holds it
    complete_until: int  # offset just past the last complete element (0 if none)


def list_elements(buf: bytes | bytearray | memoryview) -> Elements:
    """Split the inside of a JSON list into its elements at the commas of depth 0.

    The buffer must start between two elements (after '[' or after a complete element). The last element is only
    complete when a comma or the closing ']' follows it.
    """
    found: list[I64] = []
    list_end: int | None = None
    for piece in _pieces(buf):
        s = piece.s
        closing = np.flatnonzero(s.depth < 0)
        limit = int(closing[0]) if len(closing) else len(s.pos)
        found.append(s.pos[:limit][(s.depth[:limit] == 0) & (s.byte[:limit] == _COMMA)])
        if len(closing):
            list_end = int(s.pos[closing[0]])
            break
    commas = np.concatenate(found) if found else np.zeros(0, np.int64)
    stops = commas if list_end is None else np.append(commas, list_end)
    starts = np.concatenate(([0], commas + 1))[: len(stops)]
    data = bytes(buf[: stops[-1]]) if len(stops) else b""
    keep = np.array([bool(data[a:b].strip()) for a, b in zip(starts, stops, strict=True)], dtype=bool)
    complete_until = int(stops[-1]) + (1 if list_end is None and len(stops) else 0) if len(stops) else 0
    return Elements(starts[keep], stops[keep], list_end, complete_until)


def key_at_top_level(buf: bytes | bytearray, key: bytes) -> int | None:
    """The offset of the '[' that opens `key`'s list in the top-level object, or None if not (yet) in buf.

    `buf` starts with the object's '{' (after any whitespace). A key of the same name inside a nested object, or
    text inside a string, never matches.
    """
    needle = f'"{key.decode()}"'.encode()
    for piece in _pieces(buf):
        at = piece.start
        while (found := buf.find(needle, at, piece.stop)) >= 0:
            at = found + 1
            index = int(np.searchsorted(piece.quotes, found, side="left"))
            is_quote = index < len(piece.quotes) and int(piece.quotes[index]) == found
            if (index + int(piece.in_string_before)) % 2 or not is_quote:  # inside a string, or an escaped quote
                continue
            opened = int(np.searchsorted(piece.s.pos, found, side="left"))
            depth = int(piece.s.depth[opened - 1]) if opened else piece.depth_before
            if depth != 1:
                continue
            rest = bytes(buf[found + len(needle) : found + len(needle) + 64]).lstrip()
            if rest[:1] == b":" and rest[1:].lstrip()[:1] == b"[":
                return buf.find(b"[", found + len(needle))
    return None


_NON_JSON_TOKENS = ((b"-Infinity", b'"-Infini"'), (b"Infinity", b'"Infini"'), (b"NaN", b'"N"'))


def has_non_json_numbers(buf: bytes | bytearray) -> bool:
    return b"NaN" in buf or b"Infinity" in buf


def repair_non_json_numbers(buf: bytes | bytearray) -> bytes:
    """NaN, Infinity and -Infinity outside strings become strings of the same length (offsets keep).

    Some exporters write these tokens, which JSON does not have. As strings they read as "not a number" wherever a
    number is needed, so the event holding one is dropped and counted, and the rest of the trace stays readable.
    """
    out = bytearray(buf)
    data = np.frombuffer(bytes(buf), dtype=np.uint8)
    quotes = unescaped_quotes(data)
    for token, replacement in _NON_JSON_TOKENS:
        at = 0
        while True:
            found = out.find(token, at)
            if found < 0:
                break
            at = found + len(token)
            if int(np.searchsorted(quotes, found, side="left")) % 2 == 0:
                out[found : found + len(token)] = replacement
    return bytes(out)
