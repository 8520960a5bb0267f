"""The compiled fast path of pass one: a batch of events straight into columns, with no Python object per event.

`_scan.c` reads a batch's bytes once and returns, for each timed event, its category and name (as indexes into the
batch's distinct strings), exact ns times, pid, tid and the three args the analysis reads. This module turns that
into the rows the collector keeps, in the same order and with the same families as the Python path (decode.py), so
that both paths give the same rows, ids and counts (tests/trace/test_scan_equivalence.py checks it).

The scanner accepts only batches whose every field has the plain form Kineto writes; for any other batch it returns
None and decode.py decodes it, which decides what is dropped and why. Without a C compiler at install time the
module is absent, and every batch takes the Python path: slower, never different. GPUTRIAGE_PURE_PYTHON=1 turns the
fast path off (to compare the two, or to rule it out).
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from gputriage import envnames
from gputriage.tracing.families import ANNOTATION, CATEGORY_FAMILY, CPU_OP, DEVICE, PYTHON, RUNTIME, SKIP
from gputriage.tracing.numbers import one_int

I64 = npt.NDArray[np.int64]
Flags = npt.NDArray[np.uint16]
# What each id field of a row holds (_scan.c): two bits per field.
ABSENT, INT, TEXT, OTHER = 0, 1, 2, 3
_PID, _TID, _STREAM, _CORR, _BYTES, _STACK = 0, 2, 4, 6, 8, 10  # the fields' shifts

# The Python path's order of families within a batch (collect.Collector._feed_groups): device events first, then
# runtime calls, then the CPU families in decode.Families.cpu's order. Row order decides which name gets which id.
_GROUP_RANK = np.zeros(max(CATEGORY_FAMILY.values()) + 2, dtype=np.int8)
for _rank, _family in enumerate((DEVICE, RUNTIME, CPU_OP, ANNOTATION, PYTHON, SKIP)):
    _GROUP_RANK[_family] = _rank


def _load() -> ModuleType | None:
    if os.environ.get(envnames.PURE_PYTHON, "") == "1":
        return None
    try:
        return importlib.import_module("gputriage.tracing._scan")  # compiled at install, when it can be
    except ImportError:
        return None


NATIVE = _load()


class Scanned(msgspec.Struct):
    """One batch's kept timed events as columns, in the Python path's row order."""

    events: int  # every event of the batch, kept or not
    unread: int  # device-family timed events without a stream, dropped here (collect.Collected.unread_events)
    kinds: npt.NDArray[np.int8]  # the family of each row
    names: list[str]  # the distinct names of the rows, in order of first appearance
    name_index: npt.NDArray[np.int64]  # each row's name, an index into `names`
    ts: I64  # exact ns
    dur: I64
    pid: list[Any] | I64  # as the Python path reads them: ints, or (odd traces) strings or None per row
    tid: list[Any] | I64
    stream: I64  # device rows' args, as numbers.int_column reads them; -1 where absent
    corr: I64
    nbytes: I64
    stack: I64 | None  # each row's "Call stack" (older traces), an index into `texts`; -1: none. None: no row has one
    texts: list[str]  # the batch's distinct id and call-stack strings


def scan(payload: bytes | memoryview) -> Scanned | None:
    """The batch as columns, or None when the Python path must decode it (or the fast path is not installed)."""
    if NATIVE is None:
        return None
    raw = NATIVE.scan(payload)
    if raw is None:
        return None
    events, _, cat, name, ts, dur, pid, tid, stream, corr, nbytes, stack, flags, cats, names, ids = raw
    families, texts, id_texts = _families(cats), _texts(names), _texts(ids)
    if families is None or texts is None or id_texts is None:  # not UTF-8: the Python path replaces such text
        return None
    row_flags = np.frombuffer(flags, dtype=np.uint16)
    kinds = families[np.frombuffer(cat, dtype=np.int32)]  # index -1 (no category) is the table's last entry: DEVICE
    device = kinds == DEVICE
    streamless = device & (_kind(row_flags, _STREAM) == ABSENT)
    keep = (kinds != SKIP) & ~streamless  # a device event has a stream
    threaded = keep & ~device
    if (_kind(row_flags[threaded], _PID) == OTHER).any() or (_kind(row_flags[threaded], _TID) == OTHER).any():
        return None  # a float or a list as a thread: the Python path's keys for it are its own
    rows = np.flatnonzero(keep)
    order = rows[np.argsort(_GROUP_RANK[kinds[rows]], kind="stable")]
    used_names, name_index = by_first_appearance(np.frombuffer(name, dtype=np.int32)[order])  # -1: no name
    kept_flags = row_flags[order]
    id_numbers = _id_numbers(kept_flags, id_texts)
    return Scanned(
        events=events,
        unread=int(streamless.sum()),
        kinds=kinds[order],
        names=[texts[i] for i in used_names],
        name_index=name_index,
        ts=np.frombuffer(ts, dtype=np.int64)[order],
        dur=np.frombuffer(dur, dtype=np.int64)[order],
        pid=_thread_ids(np.frombuffer(pid, dtype=np.int64)[order], _kind(kept_flags, _PID), id_texts),
        tid=_thread_ids(np.frombuffer(tid, dtype=np.int64)[order], _kind(kept_flags, _TID), id_texts),
        stream=_int_ids(np.frombuffer(stream, dtype=np.int64)[order], _kind(kept_flags, _STREAM), id_numbers),
        corr=_int_ids(np.frombuffer(corr, dtype=np.int64)[order], _kind(kept_flags, _CORR), id_numbers),
        nbytes=_int_ids(np.frombuffer(nbytes, dtype=np.int64)[order], _kind(kept_flags, _BYTES), id_numbers),
        stack=_stacks(np.frombuffer(stack, dtype=np.int64)[order], _kind(kept_flags, _STACK)),
        texts=id_texts,
    )


def _kind(flags: Flags, shift: int) -> Flags:
    return np.asarray((flags >> shift) & 3, dtype=np.uint16)


def by_first_appearance(values: npt.NDArray[np.integer[Any]]) -> tuple[list[int], npt.NDArray[np.int64]]:
    """The distinct values in order of first appearance, and each value's position in that list: the order in which
    the Python path, going through the rows, meets names and call stacks (and so numbers them)."""
    distinct, first = np.unique(values, return_index=True)
    appearance = np.argsort(first, kind="stable")
    position = np.empty(len(distinct), dtype=np.int64)
    position[appearance] = np.arange(len(distinct))
    ordered: list[int] = distinct[appearance].tolist()
    return ordered, position[np.searchsorted(distinct, values)]


def _id_numbers(flags: Flags, texts: list[str]) -> I64 | None:
    """Each id text as numbers.int_column reads a string (-1 when it is no number), parsed once for the three
    columns; None when no stream, correlation or byte count is a string."""
    if not any((_kind(flags, shift) == TEXT).any() for shift in (_STREAM, _CORR, _BYTES)):
        return None
    return np.array([one_int(t) for t in texts[:-1]] + [-1], dtype=np.int64)


def _int_ids(values: I64, kinds: Flags, numbers: I64 | None) -> I64:
    """Stream, correlation and byte counts as numbers.int_column reads them: an absent one is -1, a string is
    read by the same function (`numbers`, by text index)."""
    out = np.where(kinds == INT, values, -1)
    text = np.flatnonzero(kinds == TEXT)
    if len(text) and numbers is not None:
        out[text] = numbers[values[text]]
    return out


def _stacks(values: I64, kinds: Flags) -> I64 | None:
    """Call stacks that are strings, as indexes into the texts; any other value names no line (-1), as in the Python
    path, where a stack that is not a string is skipped."""
    text = kinds == TEXT
    return np.where(text, values, -1) if text.any() else None


def _thread_ids(values: I64, kinds: Flags, texts: list[str]) -> list[Any] | I64:
    """pids and tids: an int64 column when all are integers (the usual case), else the values the Python path
    keys threads by (an int, a string, or None)."""
    if (kinds == INT).all():
        return values
    return [
        int(v) if k == INT else texts[v] if k == TEXT else None
        for v, k in zip(values.tolist(), kinds.tolist(), strict=True)
    ]


def _families(cats: list[bytes]) -> npt.NDArray[np.int8] | None:
    texts = _texts(cats)
    if texts is None:
        return None
    out = np.full(len(texts), DEVICE, dtype=np.int8)  # the extra last entry (""): an event without a category
    for i, text in enumerate(texts[:-1]):
        out[i] = CATEGORY_FAMILY.get(text.lower(), DEVICE)
    return out


def _texts(raw: list[bytes]) -> list[str] | None:
    """The batch's distinct strings, plus "" for an absent one (index -1). A string with an escape comes with its
    quotes, and is decoded as the JSON literal it is, by msgspec, as the Python path reads it; None when one is not
    UTF-8 (the Python path replaces such text)."""
    try:
        return [_STRING.decode(b) if b[:1] == b'"' else b.decode("utf-8") for b in raw] + [""]
    except (UnicodeDecodeError, msgspec.DecodeError):
        return None


_STRING = msgspec.json.Decoder(str)
