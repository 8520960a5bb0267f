"""Stream a Kineto (Chrome-trace JSON) file as batches of decoded events, in bounded memory.

The file is read in chunks. Each chunk is cut after the last complete event and the batch is decoded by msgspec
in one call, as a JSON list. A cut that lands inside a string or a nested object cannot decode (its brackets or
quotes do not balance), so a successful decode proves the cut was between two top-level events; a failed one moves
the cut one event back. Memory is one chunk plus the batch, whatever the file's size.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import msgspec

from gputriage.errors import InputError
from gputriage.tracing.events import Event

CHUNK_BYTES = 4 << 20
# One event, or the metadata before "traceEvents", larger than this is not a profiler trace we can read.
MAX_PIECE_BYTES = 256 << 20
_CUT_TRIES = 8  # decode attempts per chunk before reading more (each failed try moves the cut one event back)
_WS = b" \t\r\n"
_EVENT_GAP_RE = re.compile(rb"\}[ \t\r\n]*,[ \t\r\n]*\{")

_batch_decoder = msgspec.json.Decoder(list[Event], float_hook=str)
_any_decoder = msgspec.json.Decoder(float_hook=str)


@dataclass
class TraceHeader:
    """The trace's top-level keys other than traceEvents (deviceProperties, distributedInfo, ...)."""

    meta: dict[str, Any] = field(default_factory=dict)


def _decode(decoder: msgspec.json.Decoder[Any], payload: bytes) -> Any:
    """Decode, replacing invalid UTF-8 rather than refusing the whole trace (names from C++ can hold any bytes)."""
    try:
        return decoder.decode(payload)
    except msgspec.DecodeError as exc:
        if "UTF-8" not in str(exc):
            raise
        return decoder.decode(payload.decode("utf-8", "replace").encode())


def _decode_events(payload: bytes) -> list[Event]:
    try:
        events: list[Event] = _decode(_batch_decoder, payload)
        return events
    except msgspec.ValidationError:
        # A structurally valid batch with an odd event (args that is a list, ...): decode it loosely.
        return [_loose_event(item) for item in _decode(_any_decoder, payload)]


def _loose_event(item: Any) -> Event:
    if not isinstance(item, dict):
        return Event()
    try:
        return msgspec.convert(item, Event, strict=False)
    except msgspec.ValidationError:
        item = {k: v for k, v in item.items() if k != "args"}
        try:
            return msgspec.convert(item, Event, strict=False)
        except msgspec.ValidationError:
            return Event()


class _Source:
    """Raw bytes of a plain or gzip file, with every I/O or gzip failure turned into one InputError line."""

    def __init__(self, path: Path, start: int = 0, stop: int | None = None) -> None:
        self.path = path
        try:
            raw = path.open("rb")
        except OSError as exc:
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
        head = raw.read(16)
        _refuse_other_formats(path, head)
        self.gzip = head[:2] == b"\x1f\x8b"
        raw.seek(start)
        self._fh: IO[bytes] = (
            gzip.GzipFile(fileobj=raw, mode="rb") if self.gzip else raw  # type: ignore[assignment]
        )
        self._raw = raw
        self.consumed = start  # bytes of (uncompressed) content read so far, as an offset
        self.stop = stop  # read no further than this offset (a byte range of a plain file)
        self.eof = False

    def read(self, size: int) -> bytes:
        if self.stop is not None:
            size = min(size, self.stop - self.consumed)
        try:
            data = self._fh.read(size) if size > 0 else b""
        except (OSError, EOFError, zlib.error) as exc:
            raise InputError(f"{self.path} is a truncated or corrupt gzip file ({exc})") from exc
        if not data:
            self.eof = True
        self.consumed += len(data)
        return data

    def close(self) -> None:
        self._fh.close()
        self._raw.close()


def _refuse_other_formats(path: Path, head: bytes) -> None:
    name = path.name.lower()
    if head.startswith(b"SQLite format 3") or name.endswith((".nsys-rep", ".qdrep", ".sqlite")):
        raise InputError(
            f"{path} is an Nsight Systems report, not a PyTorch profiler trace; record one with "
            "torch.profiler.profile(on_trace_ready=torch.profiler.tensorboard_trace_handler('./traces'))"
        )
    if not head:
        raise InputError(f"{path} is empty, not a PyTorch profiler trace")


def read_trace(path: Path) -> tuple[TraceHeader, Iterator[list[Event]]]:
    """Open a trace and return its header and an iterator over batches of events.

    The header holds the keys written before "traceEvents" at once; keys written after it (Kineto puts
    `traceName`, `baseTimeNanoseconds` there) are added to it when the iterator finishes.

    Raises:
        InputError: the file is missing, not JSON, not a trace, truncated or corrupt.
    """
    source = _Source(path)
    try:
        header, rest, is_bare_list = _read_header(source)
    except BaseException:
        source.close()
        raise
    return header, _iter_batches(source, header, rest, is_bare_list)


@dataclass
class EventsStart:
    """Where the traceEvents list begins in a plain (not gzip) file: what splitting it into ranges needs."""

    header: TraceHeader
    offset: int  # just past the '['
    bare: bool
    size: int
    gzip: bool


def events_start(path: Path) -> EventsStart:
    """Read the header only, and say where the events begin."""
    source = _Source(path)
    try:
        header, rest, bare = _read_header(source)
        offset = source.consumed - len(rest)
        size = path.stat().st_size
        return EventsStart(header, offset, bare, size, source.gzip)
    finally:
        source.close()


def first_event_at(path: Path, pos: int) -> int | None:
    """The offset of the first top-level event that starts at or after `pos` in a plain file (None: none left).

    A candidate is a '{' after '},'; it is proved an event start when the bytes from it decode as complete events
    (a '{' inside a string or a nested object cannot: its quotes or brackets would not balance).
    """
    window = 1 << 20
    while True:
        source = _Source(path, pos, pos + window)
        try:
            data = source.read(window)
        finally:
            source.close()
        at = 0
        while True:
            found = _EVENT_GAP_RE.search(data, at)
            if found is None:
                break
            candidate = found.end() - 1
            if _cut_and_decode(bytearray(data[candidate:])) is not None:
                return pos + candidate
            at = candidate + 1
        if len(data) < window:  # reached the end of the file
            return None
        if window >= MAX_PIECE_BYTES:
            raise InputError(f"{path} is corrupt: no complete trace event in {window >> 20} MiB")
        window *= 4


def read_range(path: Path, start: int, stop: int | None, bare: bool) -> tuple[TraceHeader, Iterator[list[Event]]]:
    """The events whose text starts in [start, stop) of a plain file; `stop=None` reads to the end.

    `start` and `stop` must be event starts (see first_event_at). The returned header collects the keys after the
    list when the range runs to the end.
    """
    source = _Source(path, start, stop)
    header = TraceHeader()
    return header, _iter_batches(source, header, bytearray(), bare, last=stop is None)


def _read_header(source: _Source) -> tuple[TraceHeader, bytearray, bool]:
    """Read up to the start of the traceEvents list; return the header, the bytes after '[', and the list form."""
    buf = bytearray()
    while True:
        buf += source.read(CHUNK_BYTES)
        start = buf.lstrip(_WS)[:1]
        if start == b"[":  # the Chrome-trace "array form": a bare list of events
            offset = len(buf) - len(buf.lstrip(_WS))
            return TraceHeader(), buf[offset + 1 :], True
        if start and start != b"{":
            raise InputError(
                f"{source.path} is not JSON (it starts with {bytes(start)!r}), not a PyTorch profiler trace"
            )
        found = _find_events_key(buf)
        if found is not None:
            key_at, list_at = found
            return TraceHeader(_header_meta(source.path, bytes(buf[:key_at]))), buf[list_at + 1 :], False
        if source.eof or len(buf) > MAX_PIECE_BYTES:
            raise InputError(f"{source.path} is not a PyTorch profiler trace (no traceEvents list found)")


def _find_events_key(buf: bytearray) -> tuple[int, int] | None:
    pos = 0
    while True:
        key_at = buf.find(b'"traceEvents"', pos)
        if key_at < 0:
            return None
        rest = bytes(buf[key_at + 13 : key_at + 13 + 64]).lstrip(_WS)
        if rest[:1] == b":" and rest[1:].lstrip(_WS)[:1] == b"[":
            list_at = buf.find(b"[", key_at + 13)
            return key_at, list_at
        pos = key_at + 1


def _header_meta(path: Path, prefix: bytes) -> dict[str, Any]:
    body = prefix.rstrip(_WS).rstrip(b",")
    try:
        meta = _decode(_any_decoder, body + b"}")
    except msgspec.DecodeError as exc:
        raise InputError(f"{path} is not a valid PyTorch profiler trace: its header is not JSON ({exc})") from exc
    return meta if isinstance(meta, dict) else {}


def _iter_batches(
    source: _Source, header: TraceHeader, buf: bytearray, bare: bool, *, last: bool = True
) -> Iterator[list[Event]]:
    try:
        want = CHUNK_BYTES
        while True:
            if not source.eof and len(buf) < want:
                buf += source.read(want - len(buf))
                continue
            if source.eof and not last:  # the end of a range: complete events, then the separator
                body = bytes(buf).strip(_WS + b",")
                if body:
                    yield _decode_events(b"[" + body + b"]")
                return
            if source.eof:
                batch, tail = _final_batch(source.path, buf, bare)
                if batch:
                    yield batch
                header.meta.update(tail)
                return
            cut = _cut_and_decode(buf)
            if cut is None:  # no complete event decoded in this window: read a bigger one
                if len(buf) > MAX_PIECE_BYTES:
                    raise InputError(f"{source.path} is corrupt: no complete trace event in {len(buf) >> 20} MiB")
                want = len(buf) * 2
                continue
            end, batch = cut
            del buf[:end]
            want = CHUNK_BYTES
            if batch:
                yield batch
    finally:
        source.close()


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


def _cut_and_decode(buf: bytearray) -> tuple[int, list[Event]] | None:
    head = bytes(buf[:4096])  # the separator before the next event; never copy the whole buffer for it
    lead = len(head) - len(head.lstrip(_WS + b","))
    for tries, end in enumerate(_cut_candidates(buf, _CUT_TRIES)):
        if tries >= _CUT_TRIES or end <= lead:
            return None
        try:
            return end, _decode_events(b"[" + bytes(buf[lead:end]) + b"]")
        except msgspec.DecodeError:
            continue
    return None


def _final_batch(path: Path, buf: bytearray, bare: bool) -> tuple[list[Event], dict[str, Any]]:
    """At end of file: the last events, the ']' that closes the list, then (object form) the trailing keys.

    All events but the last are cut off as usual; the list's end is then searched forwards from the last event, so
    brackets inside the trailing keys (Kineto's INFO log lines hold many) are never candidates.
    """
    events: list[Event] = []
    cut = _cut_and_decode(buf)
    if cut is not None:
        end, events = cut
        del buf[:end]
    rest = bytes(buf).lstrip(_WS + b",")
    pos = -1
    for _ in range(_CUT_TRIES * 8):
        pos = rest.find(b"]", pos + 1)
        if pos < 0:
            break
        meta = _tail_meta(rest[pos + 1 :].strip(_WS), bare)
        if meta is None:
            continue
        try:
            return events + _decode_events(b"[" + rest[: pos + 1]), meta
        except msgspec.DecodeError:
            continue
    raise InputError(
        f"{path} is truncated or corrupt: its traceEvents list does not close "
        "(was the file copied while the profiler was still writing it?)"
    )


def _tail_meta(tail: bytes, bare: bool) -> dict[str, Any] | None:
    if bare:
        return {} if not tail else None
    if tail == b"}":
        return {}
    if not tail.startswith(b","):
        return None
    try:
        meta = _decode(_any_decoder, b"{" + tail[1:])
    except msgspec.DecodeError:
        return None
    return meta if isinstance(meta, dict) else None
