"""Stream a Kineto (Chrome-trace JSON) file as decoded batches of events, in bounded memory.

The file is read in chunks. Each chunk is cut after the last complete event and the batch is decoded by msgspec
in one call, as a JSON list. Batches start at a known event boundary, so a cut that lands inside a string or a
nested object cannot decode (its quotes or brackets do not balance): a successful decode proves the cut, and a
failed one moves it one event back. When a few tries fail (a 6 MiB name full of braces), framing.py finds the last
complete event exactly. Memory is one chunk plus its batch, whatever the file's size.

The header (the keys before "traceEvents") and the tail (the keys after the list) are decoded into the few typed
fields the analysis reads; either one can be unreadable without losing the events (it becomes a note).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from gputriage.errors import InputError, NotATrace
from gputriage.tracing import framing
from gputriage.tracing.decode import EventDecoder, Families
from gputriage.tracing.limits import MAX_FIELD_CHARS, MAX_PIECE_BYTES, TraceLimits
from gputriage.tracing.numbers import small_count
from gputriage.tracing.source import Source

CHUNK_BYTES = 4 << 20
MAX_TAIL_BYTES = 16 << 20  # of the keys after traceEvents, kept to read (see _read_bounded_tail)
_CUT_TRIES = 8  # decode attempts per chunk before the exact framing (each failed try moves the cut one event back)
_WS = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"
# An event boundary: the end of one object and the start of the next, whose first key is quoted. Text inside a
# string can hold `}, {` but never `{"` (its quote would end the string), so a range split never starts in a name.
# The bytes read at first to find and prove an event start: decoding them is the proof, and the caller plans every
# byte range this way before any worker starts (18 cuts on 16 cores). 64 KiB holds a few hundred events; a window
# with no provable start grows fourfold, up to MAX_PIECE_BYTES.
_FIRST_EVENT_WINDOW_BYTES = 1 << 16
_EVENT_GAP_RE = re.compile(rb'\}[ \t\r\n]*,[ \t\r\n]*\{[ \t\r\n]*"')


class _Device(msgspec.Struct):
    name: Any = None


class _Distributed(msgspec.Struct):
    rank: Any = None
    world_size: Any = None
    backend: Any = None


_ABSENT = msgspec.Raw(b"")


class _HeaderDoc(msgspec.Struct):
    deviceProperties: msgspec.Raw = _ABSENT  # the trace's own key
    distributedInfo: msgspec.Raw = _ABSENT


class TraceHeader(msgspec.Struct):
    """What the analysis reads from the trace's top-level keys (before or after the events), validated."""

    device: str | None = None
    rank: int | None = None
    world_size: int | None = None
    backend: str | None = None
    notes: list[str] = msgspec.field(default_factory=list)

    def fill_from(self, other: TraceHeader) -> None:
        """Keys found after the events fill what the keys before them left empty."""
        self.device = self.device if self.device is not None else other.device
        self.rank = self.rank if self.rank is not None else other.rank
        self.world_size = self.world_size if self.world_size is not None else other.world_size
        self.backend = self.backend if self.backend is not None else other.backend
        self.notes.extend(n for n in other.notes if n not in self.notes)


def parse_header_object(text: bytes | bytearray | memoryview, unreadable: str) -> TraceHeader:
    """Decode a JSON object of top-level keys into a TraceHeader; if it cannot be read, the note `unreadable`."""
    header = TraceHeader()
    doc = _decode_doc(text)
    if doc is None:
        header.notes.append(unreadable)
        return header
    if _present(doc.deviceProperties):
        devices = _decode_raw(doc.deviceProperties, list[_Device])
        names = [d.name for d in devices or [] if type(d.name) is str and d.name]
        if names:
            header.device = names[0][:MAX_FIELD_CHARS]
        elif devices is None:
            header.notes.append("deviceProperties is not a list of devices; ignored")
    if _present(doc.distributedInfo):
        _read_distributed(doc.distributedInfo, header)
    return header


def _present(raw: msgspec.Raw) -> bool:
    return bytes(raw).strip() not in (b"", b"null")


def _read_distributed(raw: msgspec.Raw, header: TraceHeader) -> None:
    info = _decode_raw(raw, _Distributed)
    if info is None:
        an_object = bytes(raw).lstrip().startswith(b"{")
        # an object whose rank is 1e400 fails to decode as a whole: say what is wrong, not what is not
        what = "holds a value out of range or of the wrong type" if an_object else "is not an object"
        header.notes.append(f"distributedInfo {what}; ignored")
        return
    header.rank = small_count(info.rank)
    header.world_size = small_count(info.world_size, low=1)
    for label, value, parsed in (("rank", info.rank, header.rank), ("world_size", info.world_size, header.world_size)):
        if value is not None and parsed is None:
            header.notes.append(f"distributedInfo.{label} is out of range or not a number; ignored")
    if type(info.backend) is str and info.backend:
        header.backend = info.backend[:MAX_FIELD_CHARS]
    if header.rank is not None and header.world_size is not None and header.rank >= header.world_size:
        header.notes.append(f"distributedInfo.rank {header.rank} is not below its world_size {header.world_size}")


def _decode_doc(text: bytes | bytearray | memoryview) -> _HeaderDoc | None:
    """The header's keys; the text is decoded where it lies, and copied only to repair it (bytes that are not UTF-8,
    NaN or Infinity tokens): a header of tens of MiB is not copied on the way."""
    try:
        return msgspec.json.decode(text, type=_HeaderDoc)
    except msgspec.ValidationError:
        return None
    except (msgspec.DecodeError, RecursionError):
        pass
    fixed = _LONE_SURROGATE.sub(rb"\\ufffd", bytes(text).decode("utf-8", "replace").encode())
    for repair in (False, True):
        if repair and not framing.has_non_json_numbers(fixed):
            return None
        try:
            return msgspec.json.decode(framing.repair_non_json_numbers(fixed) if repair else fixed, type=_HeaderDoc)
        except (msgspec.DecodeError, RecursionError):
            continue
        except msgspec.ValidationError:
            return None
    return None


# A `\uD800`-`\uDFFF` escape that is not half of a pair: Python's json reads it, msgspec refuses the whole document,
# and the header was dropped for one device name (trial 10); it reads as U+FFFD, as an undecodable byte does.
_LONE_SURROGATE = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}(?!\\u[dD][c-fC-F][0-9a-fA-F]{2})"
    rb"|(?<!\\u[dD][89abAB][0-9a-fA-F]{2})\\u[dD][c-fC-F][0-9a-fA-F]{2}"
)


def _decode_raw(raw: msgspec.Raw, kind: Any) -> Any:
    try:
        return msgspec.json.decode(raw, type=kind)
    except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
        return None


class Reading(msgspec.Struct):
    """One open trace: its header now, its batches as an iterator (the tail is added to the header at the end)."""

    header: TraceHeader
    batches: Iterator[Families]


def read_trace(path: Path, limits: TraceLimits, decoder: EventDecoder | None = None) -> Reading:
    """Open a trace and return its header and an iterator over decoded batches.

    Raises:
        InputError: the file is missing, not JSON, not a trace, truncated or corrupt (also from the iterator).
    """
    source = Source(path, limits)
    try:
        header, rest, bare = _read_header(source)
    except BaseException:
        source.close()
        raise
    return Reading(header, _iter_batches(source, decoder or EventDecoder(), header, rest, bare))


class EventsStart(msgspec.Struct):
    """Where the traceEvents list begins in a plain (not gzip) file: what splitting it into ranges needs."""

    header: TraceHeader
    offset: int  # just past the '['
    bare: bool
    size: int
    gzip: bool


def events_start(path: Path, limits: TraceLimits) -> EventsStart:
    """Read the header only, and say where the events begin."""
    source = Source(path, limits)
    try:
        header, rest, bare = _read_header(source)
        # rest starts with the separator that replaced the '[': the events begin one byte after it
        return EventsStart(header, source.consumed - len(rest) + 1, bare, source.size, source.gzip)
    finally:
        source.close()


def first_event_at(path: Path, pos: int, limits: TraceLimits, stop: int | None = None) -> int | None:
    """The offset of the first top-level event that starts at or after `pos` in a plain file (None: none found).

    A candidate is a '{"' after '},'; it is proved an event start when the bytes from it decode as complete events
    (a '{' inside a nested object cannot: its brackets would not balance). No candidate before `stop`, or within
    MAX_PIECE_BYTES, gives None: the caller then simply does not split there.
    """
    window = _FIRST_EVENT_WINDOW_BYTES
    decoder = EventDecoder()
    while True:
        source = Source(path, limits, pos, pos + window)
        try:
            data = source.read(window)
        finally:
            source.close()
        at = 0
        while True:
            found = _EVENT_GAP_RE.search(data, at)
            if found is None or (stop is not None and pos + found.start() >= stop):
                break
            candidate = data.index(b"{", found.start())
            if _cut_and_decode(bytearray(data[candidate:]), decoder) is not None:
                return pos + candidate
            at = candidate + 1
        if len(data) < window or window >= MAX_PIECE_BYTES or (stop is not None and pos + window >= stop):
            return None
        window *= 4


def read_range(path: Path, start: int, stop: int | None, bare: bool, limits: TraceLimits) -> Reading:
    """The events whose text starts in [start, stop) of a plain file; `stop=None` reads to the end.

    `start` and `stop` must be event starts (see first_event_at). The header collects the keys after the list
    when the range runs to the end.
    """
    source = Source(path, limits, start, stop)
    header = TraceHeader()
    return Reading(header, _iter_batches(source, EventDecoder(), header, bytearray(), bare, last=stop is None))


def _read_header(source: Source) -> tuple[TraceHeader, bytearray, bool]:
    """Read up to the start of the traceEvents list; return the header, the bytes after '[' (with one separator byte
    in front, as _iter_batches wants them), and the list form.

    The buffer is edited in place and never copied whole: a header key of tens of MiB (a stackFrames table before the
    events) costs its own bytes once, not seven times over (the seventh trial's 394 MB for a 50 MB key)."""
    buf = bytearray()
    want = 1 << 16
    while True:
        buf += source.read(want)
        if buf.startswith(_BOM):
            del buf[:3]
        blank = _LEADING_WS.match(buf)
        if blank is not None and blank.end():
            del buf[: blank.end()]
        start = bytes(buf[:1])
        if start == b"[":  # the Chrome-trace "array form": a bare list of events
            buf[0:1] = b" "
            return TraceHeader(), buf, True
        if buf.startswith(b"\x1f\x8b"):
            raise NotATrace(f"{source.path} is gzip inside gzip: unpack it once (gunzip) and give the .json.gz")
        if start and start != b"{":
            raise NotATrace(
                f"{source.path} is not a PyTorch profiler trace: it starts with {start!r}, where a trace's JSON "
                "starts with '{' or '['"
            )
        list_at = framing.key_at_top_level(buf, b"traceEvents") if start else None
        if list_at is not None:
            header = _header_before(buf, buf.rfind(b'"traceEvents"', 0, list_at))
            del buf[:list_at]
            buf[0:1] = b" "  # the '[' becomes the separator before the first event
            return header, buf, False
        if source.eof:
            raise NotATrace(f"{source.path} is not a PyTorch profiler trace (no traceEvents list found)")
        if len(buf) > MAX_PIECE_BYTES:
            raise NotATrace(
                f"{source.path}: the keys before traceEvents hold more than {MAX_PIECE_BYTES >> 20} MiB (a table or "
                "a string that large); a profiler trace gputriage can read keeps them under that"
            )
        want = max(1, min(max(want, len(buf)), MAX_PIECE_BYTES + 1 - len(buf)))  # the buffer stays within the limit


_LEADING_WS = re.compile(rb"[ \t\r\n]+")


def _header_before(buf: bytearray, key_at: int) -> TraceHeader:
    """The header object of the keys before traceEvents (at `key_at`), decoded where it lies: the separator before
    the key is overwritten with the object's closing brace for the decode, and put back."""
    unreadable = "the trace's header (its keys before traceEvents) is not readable JSON; it was ignored"
    end = key_at
    while end > 1 and buf[end - 1] in b" \t\r\n":
        end -= 1
    if end <= 1:  # traceEvents is the first key
        return parse_header_object(b"{}", unreadable)
    if buf[end - 1] == ord(","):
        end -= 1
    saved = buf[end]
    buf[end] = ord("}")
    try:
        with memoryview(buf) as view:
            return parse_header_object(view[: end + 1], unreadable)
    finally:
        buf[end] = saved


def _iter_batches(
    source: Source, decoder: EventDecoder, header: TraceHeader, rest: bytearray, bare: bool, *, last: bool = True
) -> Iterator[Families]:
    # The buffer always starts with one separator byte before the next event (a space here, then the comma after
    # the previous batch), so a batch becomes a JSON list with a single copy: '[' is written over that byte and ']'
    # over the comma after the batch's last event before the bytes between are copied out.
    buf = rest if rest[:1] == b" " else bytearray(b" ") + rest
    try:
        want = CHUNK_BYTES
        while True:
            if not source.eof and len(buf) < want:
                buf += source.read(want - len(buf))
                continue
            if source.eof and not last:  # the end of a range: complete events, then the separator
                body = bytes(buf).strip(_WS + b",")
                if body:
                    yield _decode_or_corrupt(source.path, decoder, b"[" + body + b"]")
                return
            if source.eof:
                yield from _final_batches(source.path, decoder, header, buf, bare)
                return
            cut = _cut_and_decode(buf, decoder)
            closed = False
            if cut is None:
                cut, closed = _exact_cut(buf, decoder)
            if cut is None and last and closed:
                # the events end in this window: what follows is the trace's trailing keys, read up to a bound
                _read_bounded_tail(source, buf, header)
                yield from _final_batches(source.path, decoder, header, buf, bare)
                return
            if cut is None:  # no complete event in this window: read a bigger one
                if len(buf) > MAX_PIECE_BYTES:
                    raise InputError(
                        f"{source.path}: no complete trace event in {len(buf) >> 20} MiB: one event (a name, an "
                        f"argument) over the {MAX_PIECE_BYTES >> 20} MiB that one event may hold, or a corrupt file"
                    )
                want = min(len(buf) * 2, MAX_PIECE_BYTES + 1)  # the buffer stays within the limit
                continue
            end, batch = cut
            del buf[:end]
            want = CHUNK_BYTES
            yield batch
    finally:
        source.close()


def _read_bounded_tail(source: Source, buf: bytearray, header: TraceHeader) -> None:
    """The rest of the file after the events, kept up to MAX_TAIL_BYTES: the keys a trace writes there (traceName,
    baseTimeNanoseconds, distributedInfo) are small; a stack-frame table or a blob of hundreds of MiB is skipped,
    with a note, so memory stays bounded whatever the file carries besides its events."""
    skipped = 0
    while not source.eof and len(buf) < MAX_TAIL_BYTES:
        buf += source.read(min(CHUNK_BYTES, MAX_TAIL_BYTES - len(buf)))
    if not source.eof:
        skipped = source.skip_rest()
    if skipped:
        header.notes.append(f"{skipped >> 20} MiB after traceEvents were not read (only the events are analysed)")


def _decode_or_corrupt(path: Path, decoder: EventDecoder, payload: bytes) -> Families:
    try:
        return decoder.decode(payload)
    except msgspec.DecodeError as exc:
        raise InputError(f"{path} is truncated or corrupt ({exc})") from exc


def _cut_candidates(buf: bytearray, limit: int) -> Iterator[int]:
    """Offsets just past a '}' that is followed by ',' and '{': the likely ends of a top-level event."""
    pos = len(buf)
    seen = 0
    while seen < limit * 8:
        pos = buf.rfind(b"}", 0, pos)
        if pos < 0:
            return
        seen += 1
        after = bytes(buf[pos + 1 : pos + 65]).lstrip(_WS)
        if after[:1] == b"," and after[1:].lstrip(_WS)[:1] == b"{":
            yield pos + 1


def _lead(buf: bytearray) -> int:
    head = bytes(buf[:4096])  # the separator before the next event; never copy the whole buffer for it
    return len(head) - len(head.lstrip(_WS + b","))


def _decode_in_place(buf: bytearray, lead: int, end: int, decoder: EventDecoder) -> Families:
    """Decode the events in buf[lead:end] as a list, the brackets written over the separators around them.

    The compiled scanner reads the buffer where it is; only a batch it declines is copied out, for the Python path
    (whose decoded values keep references into their bytes).
    """
    before, after = buf[lead - 1], buf[end]
    buf[lead - 1], buf[end] = ord("["), ord("]")
    try:
        with memoryview(buf) as whole, whole[lead - 1 : end + 1] as view:
            fast = decoder.scan(view)
        if fast is not None:
            return fast
        payload = bytes(memoryview(buf)[lead - 1 : end + 1])
    finally:
        buf[lead - 1], buf[end] = before, after
    return decoder.decode(payload, scanned=True)


def _cut_and_decode(buf: bytearray, decoder: EventDecoder) -> tuple[int, Families] | None:
    """Cut after the last complete event and decode up to there; None when no cut proves right."""
    lead = _lead(buf)
    if lead == 0:
        buf[:0] = b" "  # the separator byte _decode_in_place writes over (only before the very first batch)
        lead = 1
    for tries, end in enumerate(_cut_candidates(buf, _CUT_TRIES)):
        if tries >= _CUT_TRIES or end <= lead:
            return None
        if end >= len(buf):
            continue
        try:
            return end, _decode_in_place(buf, lead, end, decoder)
        except msgspec.DecodeError:
            continue
    return None


def _exact_cut(buf: bytearray, decoder: EventDecoder) -> tuple[tuple[int, Families] | None, bool]:
    """The last complete event found by exact framing (the cheap guesses all failed), and whether the list of events
    closes in this window (then there is no cut: what follows the list is the trace's trailing keys)."""
    lead = _lead(buf)
    elements = framing.list_elements(memoryview(buf)[lead:])
    if elements.list_end is not None:
        return None, True
    if not len(elements.ends):
        return None, False
    end = lead + int(elements.ends[-1])
    try:
        return (end, decoder.decode(b"[" + bytes(buf[lead:end]) + b"]")), False
    except msgspec.DecodeError:
        return None, False


def _final_batches(
    path: Path, decoder: EventDecoder, header: TraceHeader, buf: bytearray, bare: bool
) -> Iterator[Families]:
    """At the end of the file: the last events, the ']' that closes the list, then (object form) the trailing keys."""
    lead = _lead(buf)
    elements = framing.list_elements(memoryview(buf)[lead:])
    if elements.list_end is None:
        raise InputError(
            f"{path} is truncated or corrupt: its traceEvents list does not close "
            "(was the file copied while the profiler was still writing it?)"
        )
    end = lead + elements.list_end
    body = bytes(buf[lead:end]).rstrip(_WS)
    if body:
        yield _decode_or_corrupt(path, decoder, b"[" + body + b"]")
    tail = bytes(buf[end + 1 :]).strip(_WS)
    _read_tail(path, tail, bare, header)


_TRAILING = re.compile(r"trailing characters \(byte ([0-9]+)\)")


def _second_document(tail: bytes) -> bool:
    """What follows the traceEvents list closes the trace's object, then opens another JSON value."""
    if tail.startswith(b"}"):
        rest = tail[1:]
    elif tail.startswith(b","):
        whole = b"{" + tail[1:]
        try:
            msgspec.json.decode(whole)
            return False
        except RecursionError:
            return False  # nested deeper than any trace's keys: the header's own reading says so
        except msgspec.DecodeError as exc:
            trailing = _TRAILING.search(str(exc))
            if trailing is None:
                return False
            rest = whole[int(trailing.group(1)) - 1 :]  # msgspec counts the bytes from 1
    else:
        return False
    return rest.lstrip(_WS).startswith((b"{", b"["))


def _read_tail(path: Path, tail: bytes, bare: bool, header: TraceHeader) -> None:
    if not bare and _second_document(tail):
        # `cat a.json b.json`, or two gzip members: a second trace, which no reader takes whole (Python's json
        # refuses it, this reader would keep the first): say so rather than drop half of the input
        raise InputError(
            f"{path} holds a second JSON document after the first (two traces concatenated?): which one is meant "
            "is not clear; give each file on its own"
        )
    second = re.search(rb'"traceEvents"\s*:', tail) and tail.startswith(b",")
    if not bare and second and framing.key_at_top_level(b"{" + tail[1:], b"traceEvents") is not None:
        # JSON leaves duplicate keys to the reader (Python's json takes the last, this reader the first): say so
        raise InputError(f"{path} holds two traceEvents lists (a duplicated key): which one is meant is not clear")
    if bare:
        if tail:
            header.notes.append("text after the list of events was ignored")
        return
    if tail == b"}":
        return
    if not tail.startswith(b",") or not tail.endswith(b"}"):
        header.notes.append("the keys after traceEvents are not readable JSON; they were ignored")
        return
    unreadable = "the trace's keys after traceEvents are not readable JSON; they were ignored"
    header.fill_from(parse_header_object(b"{" + tail[1:], unreadable))
