"""Typed decoding of a batch of Chrome-trace events: only the fields the analysis reads, grouped by family.

The fast path is one msgspec call per batch with a tagged union on `cat`: each known category decodes into a
struct that holds only what its family needs (a kernel: name, times, stream, correlation, bytes; a flow event:
nothing), so msgspec skips everything else in C and the struct's type already says the family. Times stay raw
JSON text (numbers.py turns a whole column into exact nanoseconds at once).

A category seen for the first time fails the tagged decode; that batch is decoded loosely, the new category is
learned, and later batches are fast again. A batch that does not decode even loosely (an event that is not an
object, an `args` that is a list, 100k-deep nesting, NaN tokens) is split into its events (framing.py) and each is
decoded on its own: a bad event is dropped and counted with its reason, never the whole trace.
"""

from __future__ import annotations

import itertools
import operator
import typing
from collections import Counter
from typing import Any

import msgspec
import numpy as np

from gputriage.tracing import framing, scan
from gputriage.tracing.distinct import distinct
from gputriage.tracing.families import ANNOTATION, CATEGORY_FAMILY, CPU_FAMILIES, CPU_OP, DEVICE, PYTHON, RUNTIME, SKIP

# Spellings seen in real traces (Kineto 2021-2026, AMD, MTIA), registered up front; others are learned.
_KNOWN_CATEGORIES = (
    *CATEGORY_FAMILY,
    "Runtime", "Operator", "Trace", "Kernel", "Memcpy", "Memset", "kernel", "gpu_memcpy", "gpu_memset",
    "cuda_sync", "cpu_instant_event", "overhead", "async_cpu_to_gpu", "async_gpu", "cuda_profiler_range",
    "mtia_ccp_events",
)  # fmt: skip
_MAX_CATEGORIES = 256  # learned tags; a file with more decodes loosely from then on
_MAX_CATEGORY_CHARS = 128
_EMPTY = msgspec.Raw(b"")
_PH, _CAT = operator.attrgetter("ph"), operator.attrgetter("cat")
_LOOSE_BATCHES = 16


def family_of(cat: Any) -> int | None:
    """The family of a category value; None for a category that is not a string (the event is dropped)."""
    if cat is None:
        return DEVICE
    if type(cat) is not str:
        return None
    return CATEGORY_FAMILY.get(cat.lower(), DEVICE)


class DeviceArgs(msgspec.Struct, gc=False):
    stream: Any = None
    correlation: Any = None
    nbytes: Any = msgspec.field(default=None, name="bytes")


class RuntimeArgs(msgspec.Struct, gc=False):
    correlation: Any = None


class StackArgs(msgspec.Struct, gc=False):
    call_stack: Any = msgspec.field(default=None, name="Call stack")


class AnyArgs(msgspec.Struct, gc=False):
    stream: Any = None
    correlation: Any = None
    nbytes: Any = msgspec.field(default=None, name="bytes")
    call_stack: Any = msgspec.field(default=None, name="Call stack")


class LooseEvent(msgspec.Struct, gc=False):
    """Any event, when the typed union does not fit: every field the analysis could read."""

    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = _EMPTY
    dur: msgspec.Raw = _EMPTY
    args: AnyArgs | None = None


class LooseNoArgs(msgspec.Struct, gc=False):
    """An event whose `args` is not an object: everything but args (read as None, from a key no trace has)."""

    args: None = msgspec.field(default=None, name="gputriage: args is not an object")
    ph: Any = None
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = _EMPTY
    dur: msgspec.Raw = _EMPTY


# The Chrome trace format's phases. A batch the category union cannot take (events without `cat`: MTIA's metadata)
# is decoded with a union on `ph` instead: timed events in full, every other phase as an empty struct.
_PHASES = ("B", "E", "i", "I", "s", "t", "f", "M", "C", "b", "n", "e", "P", "O", "N", "D", "R", "c", "(", ")")


class TimedEvent(msgspec.Struct, tag_field="ph", tag="X", gc=False):
    cat: Any = None
    name: Any = None
    pid: Any = None
    tid: Any = None
    ts: msgspec.Raw = _EMPTY
    dur: msgspec.Raw = _EMPTY
    args: AnyArgs | None = None

    @property
    def ph(self) -> str:
        return "X"


_UNTIMED = tuple(msgspec.defstruct(f"Phase{i}", [], tag_field="ph", tag=ph, gc=False) for i, ph in enumerate(_PHASES))
_BY_PHASE = msgspec.json.Decoder(list[typing.Union[(TimedEvent, *_UNTIMED)]])  # type: ignore[valid-type]

_TIMED: list[tuple[str, Any, Any]] = [("ts", msgspec.Raw, _EMPTY), ("dur", msgspec.Raw, _EMPTY)]
_THREAD: list[tuple[str, Any, Any]] = [("pid", Any, None), ("tid", Any, None)]


def _tagged_struct(index: int, tag: str, family: int, *, with_stack: bool) -> type:
    fields: list[tuple[str, Any, Any]] = []
    if family != SKIP:
        fields = [("ph", Any, None), ("name", Any, None)]
    if family == DEVICE:  # pid: the device the event ran on (Kineto writes the device index there)
        fields += [("pid", Any, None), *_TIMED, ("args", DeviceArgs | None, None)]
    elif family == RUNTIME:
        fields += [*_THREAD, *_TIMED, ("args", RuntimeArgs | None, None)]
    elif family in CPU_FAMILIES:
        fields += [*_THREAD, *_TIMED]
        if with_stack:
            fields.append(("args", StackArgs | None, None))
    return msgspec.defstruct(f"Cat{index}", fields, tag_field="cat", tag=tag, gc=False)


class Families(msgspec.Struct):
    """One batch's timed events of each family that the analysis keeps (still raw columns)."""

    device: list[Any] = msgspec.field(default_factory=list)
    runtime: list[Any] = msgspec.field(default_factory=list)
    cpu: dict[int, list[Any]] = msgspec.field(default_factory=lambda: {CPU_OP: [], ANNOTATION: [], PYTHON: []})
    events: int = 0
    dropped: Counter[str] = msgspec.field(default_factory=Counter)
    stacks: bool = False  # the CPU events may carry a "Call stack" (older traces)
    scanned: scan.Scanned | None = None  # the batch as columns, from the compiled fast path (then the lists are empty)


class EventDecoder:
    """Decodes batches (a JSON list of events, as bytes); keeps what it learned about categories across batches."""

    def __init__(self) -> None:
        self._tags: dict[str, int] = {}
        self._family_of_type: dict[type, int] = {}
        self._types: dict[bool, list[type]] = {False: [], True: []}  # by "with call stacks"
        self._decoders: dict[bool, msgspec.json.Decoder[Any]] = {}
        self._loose = msgspec.json.Decoder(list[LooseEvent])
        self._one = msgspec.json.Decoder(LooseEvent)
        self._one_no_args = msgspec.json.Decoder(LooseNoArgs)
        self._skip_typed = 0  # batches to decode loosely without trying the typed union first
        for cat in _KNOWN_CATEGORIES:
            self._learn(cat)

    def _learn(self, cat: str) -> None:
        if cat in self._tags or len(self._tags) >= _MAX_CATEGORIES or len(cat) > _MAX_CATEGORY_CHARS:
            return
        self._tags[cat] = family = CATEGORY_FAMILY.get(cat.lower(), DEVICE)
        index = len(self._tags)
        plain = _tagged_struct(index, cat, family, with_stack=False)
        stacked = _tagged_struct(index, cat, family, with_stack=True) if family in CPU_FAMILIES else plain
        self._family_of_type[plain] = self._family_of_type[stacked] = family
        self._types[False].append(plain)
        self._types[True].append(stacked)
        self._decoders.clear()

    def _decoder(self, with_stack: bool) -> msgspec.json.Decoder[Any]:
        found = self._decoders.get(with_stack)
        if found is None:
            # A union built at run time (the categories seen so far); `X | Y` cannot take a tuple.
            union = typing.Union[tuple(self._types[with_stack])]  # type: ignore[valid-type]  # noqa: UP007
            found = self._decoders[with_stack] = msgspec.json.Decoder(list[union])  # type: ignore[valid-type]
        return found

    @staticmethod
    def scan(payload: bytes | memoryview) -> Families | None:
        """The batch as read by the compiled scanner (scan.py), or None where it declines. It keeps nothing of the
        payload, so the payload may be a view of a buffer that changes afterwards."""
        scanned = scan.scan(payload)
        return Families(events=scanned.events, scanned=scanned) if scanned is not None else None

    def decode(self, payload: bytes, *, scanned: bool = False) -> Families:
        """Decode one batch, a JSON list of events (bytes: the decoded times keep references into it).

        Raises msgspec.DecodeError only when the payload is not a complete JSON list. Names from C++ can hold any
        bytes: invalid UTF-8 is replaced rather than refusing the batch. NaN and Infinity, which JSON does not
        have, become strings (framing.repair_non_json_numbers).

        The compiled scanner takes the batch first (unless `scanned`: it already declined it); it declines anything
        but the plain form, and then this decides.
        """
        fast = None if scanned else self.scan(payload)
        if fast is not None:
            return fast
        try:
            return self._decode(payload, b'"Call stack"' in payload)
        except msgspec.DecodeError as exc:
            if "UTF-8" in str(exc):
                return self.decode(payload.decode("utf-8", "replace").encode())
            if not framing.has_non_json_numbers(payload):
                raise
        repaired = framing.repair_non_json_numbers(payload)
        return self._decode(repaired, b'"Call stack"' in repaired)

    def _decode(self, payload: bytes, with_stack: bool) -> Families:
        if self._skip_typed:
            self._skip_typed -= 1
        else:
            try:
                events = self._decoder(with_stack).decode(payload)
            except msgspec.ValidationError:
                pass
            except RecursionError:
                return self._one_by_one(payload)
            else:
                out = self._group_typed(events)
                out.stacks = with_stack
                return out
        try:
            by_phase = _BY_PHASE.decode(payload)
        except (msgspec.ValidationError, RecursionError):
            pass
        else:
            # The timed events, picked by a C-level scan (a metadata block holds hundreds of thousands of others).
            timed = list(
                itertools.compress(by_phase, map(operator.is_, map(type, by_phase), itertools.repeat(TimedEvent)))
            )
            return self._loosely(timed, len(by_phase), with_stack)
        try:
            loose = self._loose.decode(payload)
        except (msgspec.ValidationError, RecursionError):
            return self._one_by_one(payload)
        return self._loosely(loose, len(loose), with_stack)

    def _loosely(self, loose: list[Any], events: int, with_stack: bool) -> Families:
        """Group loosely decoded events, and learn their categories for the typed union of later batches."""
        learned = len(self._tags)
        for cat in {e.cat for e in loose if type(e.cat) is str}:
            self._learn(cat)
        if len(self._tags) == learned:
            # Nothing new to learn: this file has events the typed union cannot take (no `cat` on MTIA's
            # metadata events, say). Decode loosely for a while rather than twice per batch.
            self._skip_typed = _LOOSE_BATCHES
        out = _group_loose(loose)
        out.events = events
        out.stacks = with_stack
        return out

    def _group_typed(self, events: list[Any]) -> Families:
        """Split a batch by family in file order: one C-level pass for the types, then numpy."""
        out = Families(events=len(events))
        codes = np.fromiter(map(self._family_of_type.__getitem__, map(type, events)), np.int8, len(events))
        groups: dict[int, list[Any]] = {}
        for fam in distinct(codes).tolist():
            if fam != SKIP:
                rows = np.flatnonzero(codes == fam).tolist()
                groups[fam] = [events[rows[0]]] if len(rows) == 1 else list(operator.itemgetter(*rows)(events))
        _fill(out, groups)
        return out

    def _one_by_one(self, payload: bytes) -> Families:
        """Each event of a batch decoded on its own; what cannot be read is dropped and counted."""
        inner = payload.strip()
        if inner[:1] != b"[" or inner[-1:] != b"]":
            raise msgspec.DecodeError("not a JSON list")
        body = inner[1:-1]
        elements = framing.list_elements(body + b"]")
        if elements.list_end != len(body):
            raise msgspec.DecodeError("the events do not close")
        loose: list[Any] = []
        dropped: Counter[str] = Counter()
        for start, stop in zip(elements.starts.tolist(), elements.ends.tolist(), strict=True):
            event = self._decode_one(body[start:stop], dropped)
            if event is not None:
                loose.append(event)
        for cat in {e.cat for e in loose if type(e.cat) is str}:
            self._learn(cat)
        out = _group_loose(loose)
        out.stacks = b'"Call stack"' in payload
        out.events = len(elements.starts)
        out.dropped.update(dropped)
        return out

    def _decode_one(self, text: bytes, dropped: Counter[str]) -> Any:
        for decoder in (self._one, self._one_no_args):
            try:
                return decoder.decode(text)
            except msgspec.ValidationError as exc:
                if "Expected `object`" in str(exc) and "args" not in str(exc):
                    dropped["not an object"] += 1
                    return None
            except RecursionError:
                dropped["nested too deeply"] += 1
                return None
            except msgspec.DecodeError:
                dropped["not valid JSON"] += 1
                return None
        dropped["unreadable fields"] += 1
        return None


def _group_loose(events: list[Any]) -> Families:
    """Split loosely decoded events by family; only timed ("X") events are looked at one by one."""
    out = Families(events=len(events))
    phases = list(map(_PH, events))
    _count_odd_phases(out, [e for e, ph in zip(events, phases, strict=True) if type(ph) is not str and _kept(e.cat)])
    timed = (
        events if phases.count("X") == len(phases) else [e for e, ph in zip(events, phases, strict=True) if ph == "X"]
    )
    groups: dict[int, list[Any]] = {}
    cache: dict[str, int] = {}
    for e, cat in zip(timed, map(_CAT, timed), strict=True):
        if type(cat) is str:
            fam = cache.get(cat)
            if fam is None:
                fam = cache[cat] = CATEGORY_FAMILY.get(cat.lower(), DEVICE)
        else:
            fam = family_of(cat)
            if fam is None:
                out.dropped["cat is not a string"] += 1
                continue
        if fam != SKIP:
            groups.setdefault(fam, []).append(e)
    _fill(out, groups)
    return out


def _kept(cat: Any) -> bool:
    """Whether an event of this category is one the analysis keeps: a category of a family it reads (an event with
    no category string is no kernel or op to miss)."""
    return type(cat) is str and CATEGORY_FAMILY.get(cat.lower(), DEVICE) != SKIP


def _count_odd_phases(out: Families, odd: list[Any]) -> None:
    """An event whose `ph` is no string (null, a number, a list) is malformed: it is dropped, and counted, where a
    string phase other than "X" (flows, instants, counters) is the format's own and is not."""
    if odd:
        out.dropped["ph is not a string"] += len(odd)


def _fill(out: Families, groups: dict[int, list[Any]]) -> None:
    for fam, members in groups.items():
        phases = list(map(_PH, members))
        if phases.count("X") != len(phases):
            _count_odd_phases(out, [ph for ph in phases if type(ph) is not str])
        timed = (
            members
            if phases.count("X") == len(phases)
            else [e for e, ph in zip(members, phases, strict=True) if ph == "X"]
        )
        if fam == DEVICE:
            out.device = timed
        elif fam == RUNTIME:
            out.runtime = timed
        else:
            out.cpu[fam] = timed
