"""JSON numbers in microseconds -> exact integer nanoseconds, a whole column at once, range-checked.

Kineto writes times as microseconds with nanosecond decimals ("1712195495505543.217"). A float64 cannot hold an
epoch-based microsecond time to the nanosecond (its step there is 0.25 µs), and parsing 19 significant digits
into a float is also the slowest thing msgspec does. So the decoder keeps each time as its raw JSON text
(msgspec.Raw), and this module turns a batch of them into int64 nanoseconds with vectorised digit arithmetic.
Anything that is not a plain decimal (an exponent, a string, 5,000 digits, NaN) takes a per-value path that checks
the magnitude before building any big number, and reports it as not a number or out of range, never raising.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from gputriage.stdlib import decimal

I64 = npt.NDArray[np.int64]
Codes = npt.NDArray[np.int8]

OK, MISSING, NOT_A_NUMBER, OUT_OF_RANGE = 0, 1, 2, 3
I64_MAX = 2**63 - 1
_MAX_INT_DIGITS = 16  # µs with 16 integer digits is up to ~1e19 ns: checked against int64 below
_POW10 = np.array([10**k for k in range(20)], dtype=np.uint64)
_NEWLINE, _DOT, _MINUS = 10, ord("."), ord("-")
_MAX_TEXT = 64  # a longer number (5,000 digits) is out of range without being parsed


def us_to_ns(values: Sequence[Any]) -> tuple[I64, Codes]:
    """Parse a column of raw JSON values (msgspec.Raw or bytes; empty = missing) as µs; return ns and codes.

    Times below one nanosecond are truncated toward zero. A code other than OK leaves the value 0.
    """
    count = len(values)
    out = np.zeros(count, dtype=np.int64)
    codes = np.zeros(count, dtype=np.int8)
    if not count:
        return out, codes
    joined = b"\n".join(values) + b"\n"
    data = np.frombuffer(joined, dtype=np.uint8)
    ends = np.flatnonzero(data == _NEWLINE)
    if len(ends) != count:  # a raw value held a newline (a string): take the per-value path for every value
        _slow(values, np.arange(count), out, codes)
        return out, codes
    starts = np.empty(count, dtype=np.int64)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    fast = np.zeros(count, dtype=bool)
    for rows, layout in _layouts(data, starts, ends):
        _parse_layout(data, starts[rows], rows, layout, out, codes, fast)
    slow = np.flatnonzero(~fast)
    if len(slow):
        _slow(values, slow, out, codes)
    return out, codes


def _layouts(data: npt.NDArray[np.uint8], starts: I64, ends: I64) -> list[tuple[I64, tuple[int, int, bool]]]:
    """Rows grouped by text layout (length, dot offset, sign): Kineto writes a handful of layouts per column."""
    length = ends - starts
    dots = np.flatnonzero(data == _DOT)
    dot_off = length.copy()  # no dot: as if it followed the last digit
    owner = np.searchsorted(ends, dots, side="left")
    dot_off[owner] = dots - starts[owner]
    dot_count = np.bincount(owner, minlength=len(starts))
    negative = data[starts] == _MINUS
    plausible = (length > 0) & (length <= _MAX_TEXT) & (dot_count <= 1)
    key = np.where(plausible, (length * 128 + dot_off) * 2 + negative, 0)
    uniform = bool(key[0]) and bool((key == key[0]).all())  # epoch timestamps: one layout for the whole column
    values = [int(key[0])] if uniform else np.flatnonzero(np.bincount(key)).tolist()
    out = []
    for value in values:
        if value:
            rows = np.arange(len(key)) if uniform else np.flatnonzero(key == value)
            out.append((rows, (value // 256, (value // 2) % 128, bool(value % 2))))
    return out


def _parse_layout(  # noqa: PLR0917  # one layout's rows and where their values go
    data: npt.NDArray[np.uint8],
    starts: I64,
    rows: I64,
    layout: tuple[int, int, bool],
    out: I64,
    codes: Codes,
    fast: npt.NDArray[np.bool_],
) -> None:
    """Rows of one layout as a 2-D array of bytes: check every digit column, then one weighted sum per row."""
    length, dot, negative = layout
    first = int(negative)
    if not 1 <= dot - first <= _MAX_INT_DIGITS or dot == length - 1:
        return
    keep = min(length, dot + 4)  # decimals below 1 ns are truncated: never read
    if len(rows) == len(starts) and len(starts) * (length + 1) == len(data) and (rows[0] == 0):
        grid = data.reshape(len(starts), length + 1)  # every line has this layout: a view, no gather
    else:
        grid = data[starts[:, None] + np.arange(length + 1)[None, :]]
    digits = np.concatenate((grid[:, first:dot], grid[:, dot + 1 : keep]), axis=1) - np.uint8(48)
    ok = (digits < 10).all(axis=1) & _all_digits(grid[:, keep:length])
    exponent = np.concatenate((np.arange(dot - first - 1, -1, -1) + 3, 2 - np.arange(keep - dot - 1)))
    sums = digits.astype(np.uint64) @ _POW10[exponent]
    big = sums > np.uint64(I64_MAX)
    value = np.where(big, 0, sums).astype(np.int64)
    if negative:
        value = -value
    rows, value, big = rows[ok], value[ok], big[ok]
    out[rows] = value
    codes[rows] = np.where(big, OUT_OF_RANGE, OK)
    fast[rows] = True


def _all_digits(grid: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    return np.asarray(((grid - np.uint8(48)) < 10).all(axis=1), dtype=bool)


def _slow(values: Sequence[Any], rows: npt.NDArray[np.int64], out: I64, codes: Codes) -> None:
    for row in rows.tolist():
        ns, code = text_to_ns(bytes(values[row]))
        out[row] = ns
        codes[row] = code


def text_to_ns(raw: bytes) -> tuple[int, int]:
    """One raw JSON value -> (ns, code). Accepts a number, or a string holding a number ("12.5")."""
    text = raw.strip()
    if not text or text == b"null":
        return 0, MISSING
    if text[:1] == b'"' and text[-1:] == b'"':
        text = text[1:-1].strip()
    if len(text) > _MAX_TEXT:
        return 0, OUT_OF_RANGE if text.lstrip(b"-+").replace(b".", b"").isdigit() else NOT_A_NUMBER
    number = _decimal(text)
    if number is None:
        return 0, NOT_A_NUMBER
    # The magnitude is checked before any big integer is built (1e999999 would be a million digits).
    ns = int(number * 1000) if not number or number.adjusted() <= 18 else I64_MAX + 1
    return (ns, OK) if -I64_MAX <= ns <= I64_MAX else (0, OUT_OF_RANGE)


def _decimal(text: bytes) -> decimal.Decimal | None:
    try:
        number = decimal.Decimal(text.decode("ascii"))
    except (decimal.InvalidOperation, UnicodeDecodeError, ValueError):
        return None
    return number if number.is_finite() else None


def int_column(values: Sequence[Any], default: int = -1) -> I64:
    """Stream ids, correlation ids, byte counts: ints within int64, or ASCII digit strings ("7", "0x0"); else default.

    Fast when every value is a plain int inside int64; anything else (a list, a bool, 5,000 digits) takes the
    per-value path.
    """
    count = len(values)
    if not count:
        return np.zeros(0, dtype=np.int64)
    kinds = set(map(type, values))  # np.array would also take floats and bools, silently
    if kinds == {type(None)}:
        return np.full(count, default, dtype=np.int64)
    if kinds <= {int, type(None)}:
        filled = values if type(None) not in kinds else [default if v is None else v for v in values]
        try:
            return np.array(filled, dtype=np.int64)
        except OverflowError:
            pass
    return np.fromiter((one_int(v, default) for v in values), dtype=np.int64, count=count)


def one_int(value: Any, default: int = -1) -> int:
    kind = type(value)
    if kind is int:
        return int(value) if -(2**63) <= value <= I64_MAX else default
    if kind is str and 0 < len(value) <= 20:
        try:
            parsed = int(value, 0)
        except ValueError:
            return default
        return parsed if -(2**63) <= parsed <= I64_MAX else default
    return default


def small_count(value: Any, *, low: int = 0, high: int = 2**31 - 1) -> int | None:
    """A rank or world size from a header: an int, or a short string of ASCII digits, inside [low, high]."""
    if type(value) is int:
        return int(value) if low <= value <= high else None
    if type(value) is str:
        text = value.strip()
        if 0 < len(text) <= 10 and text.isascii() and text.isdigit():
            parsed = int(text)
            return parsed if low <= parsed <= high else None
    return None
