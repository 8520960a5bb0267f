"""The Kineto event shape we decode, and the exact time arithmetic.

Kineto writes timestamps in microseconds with nanosecond decimals ("1712195495505543.2"). A float64 cannot hold
an epoch-based microsecond time to the nanosecond (its step there is 0.25 µs), so the decoder hands every JSON float
over as its text and we convert it to integer nanoseconds ourselves.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation
from typing import Any

import msgspec

# int64 nanoseconds hold about 292 years; anything outside is not a timestamp we can use.
_NS_LIMIT = 2**63 - 1


class Args(msgspec.Struct):
    """The few `args` keys the analysis reads; every other key is skipped by the decoder without being built."""

    stream: Any = None
    correlation: Any = None
    external_id: Any = msgspec.field(default=None, name="External id")
    external_id_old: Any = msgspec.field(default=None, name="external id")
    nbytes: Any = msgspec.field(default=None, name="bytes")
    call_stack: Any = msgspec.field(default=None, name="Call stack")


class Event(msgspec.Struct):
    """One Chrome-trace event. Fields are `Any` so one odd event never fails its whole batch."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: Any = None
    dur: Any = None
    args: Args | None = None


def to_ns(value: Any) -> int | None:
    """Microseconds (an int, or a float's JSON text) -> integer nanoseconds, truncating below 1 ns.

    Returns None for anything that is not a finite number inside the int64 nanosecond range (huge integers,
    strings, booleans), so the caller drops that event instead of failing.
    """
    kind = type(value)
    if kind is int:
        ns = value * 1000
    elif kind is str:
        ns = _text_to_ns(value)
        if ns is None:
            return None
    else:
        return None
    if -_NS_LIMIT <= ns <= _NS_LIMIT:
        return int(ns)
    return None


_SCALE = (1000, 100, 10, 1)


def _text_to_ns(text: str) -> int | None:
    # Fast path for plain decimals ("1712195495505543.217", "-0.5"): drop the dot, scale by the missing digits.
    dot = text.find(".")
    try:
        if dot < 0:
            return int(text) * 1000
        decimals = len(text) - dot - 1
        if decimals <= 3:
            return int(text[:dot] + text[dot + 1 :]) * _SCALE[decimals]
        return int(text[:dot] + text[dot + 1 : dot + 4])  # below 1 ns: truncated
    except ValueError:
        pass
    try:  # exponent notation ("1.5e3") or other rare spellings
        return int(Decimal(text) * 1000)
    except (InvalidOperation, ValueError, OverflowError):
        return None
