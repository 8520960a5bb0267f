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
from decimal import Decimal, InvalidOperation
from typing import Any

import numpy as np
import numpy.typing as npt

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
    dot_at = _dot_positions(data, ends)
    fast = _fast_lines(data, starts, ends, dot_at)
    _fast_values(data, starts, ends, dot_at, fast, out, codes)
    slow = np.flatnonzero(~fast)
    if len(slow):
        _slow(values, slow, out, codes)
    return out, codes


def _fast_lines(data: npt.NDArray[np.uint8], starts: I64, ends: I64, dot_at: I64) -> npt.NDArray[np.bool_]:
    """Lines that are [-]digits[.digits] with at most 16 integer digits and nothing else."""
    digit = (data >= 48) & (data <= 57)
    dot = data == _DOT
    lead_minus = np.zeros(len(data), dtype=bool)
    lead_minus[starts] = data[starts] == _MINUS
    other = ~(digit | dot | lead_minus) & (data != _NEWLINE)
    cum_other = np.concatenate(([0], np.cumsum(other)))
    cum_dot = np.concatenate(([0], np.cumsum(dot)))
    bad = cum_other[ends] - cum_other[starts]
    dots = cum_dot[ends] - cum_dot[starts]
    first = starts + lead_minus[starts]
    int_digits = dot_at - first
    fast: npt.NDArray[np.bool_] = (
        (bad == 0) & (dots <= 1) & (int_digits >= 1) & (int_digits <= _MAX_INT_DIGITS) & (dot_at != ends - 1)
    )
    return fast


def _dot_positions(data: npt.NDArray[np.uint8], ends: I64) -> I64:
    """Per line, the offset of its (last) dot, or its end when it has none; a line with two dots is not fast."""
    where = np.flatnonzero(data == _DOT)
    dot_at = ends.copy()
    dot_at[np.searchsorted(ends, where, side="left")] = where
    return dot_at


def _fast_values(  # noqa: PLR0917  # the parsed line layout, passed along rather than recomputed
    data: npt.NDArray[np.uint8],
    starts: I64,
    ends: I64,
    dot_at: I64,
    fast: npt.NDArray[np.bool_],
    out: I64,
    codes: Codes,
) -> None:
    if not fast.any():
        return
    digit_pos = np.flatnonzero((data >= 48) & (data <= 57))
    line_of = np.searchsorted(ends, digit_pos, side="left")
    keep = fast[line_of]
    digit_pos, line_of = digit_pos[keep], line_of[keep]
    dot = dot_at[line_of]
    exponent = np.where(digit_pos < dot, dot - 1 - digit_pos + 3, 3 - (digit_pos - dot))
    use = exponent >= 0
    digit_pos, line_of, exponent = digit_pos[use], line_of[use], exponent[use]
    weights = (data[digit_pos].astype(np.uint64) - np.uint64(48)) * _POW10[exponent]
    first = np.flatnonzero(np.diff(line_of, prepend=-1))
    sums = np.add.reduceat(weights, first) if len(first) else np.zeros(0, dtype=np.uint64)
    present = line_of[first]
    big = sums > np.uint64(I64_MAX)
    value = np.where(big, 0, sums).astype(np.int64)
    negative = data[starts[present]] == _MINUS
    value[negative] = -value[negative]
    out[present] = value
    codes[present[big]] = OUT_OF_RANGE
    out[present[big]] = 0


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


def _decimal(text: bytes) -> Decimal | None:
    try:
        number = Decimal(text.decode("ascii"))
    except (InvalidOperation, UnicodeDecodeError, ValueError):
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
    if set(map(type, values)) == {int}:  # np.fromiter would also take floats and bools, silently
        try:
            return np.fromiter(values, dtype=np.int64, count=count)
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
