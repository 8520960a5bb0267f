"""The bytes of one trace file: plain or gzip, a byte range of it, never a file that can block, within the limits.

A FIFO, a device or a socket could block a read forever (or never end), so the file is opened non-blocking and
refused unless fstat says it is a regular file. A .json.gz is inflated as it is read; its inflated size and its
compression ratio are checked as they grow, so a decompression bomb is refused after a few MiB of work.
"""

from __future__ import annotations

import gzip
import io
import os
import stat
import zlib
from pathlib import Path
from typing import IO

from gputriage.errors import InputError, NotATrace
from gputriage.outdir import note_input
from gputriage.tracing.limits import GIB, TraceLimits

_SPECIAL = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def open_regular(path: Path) -> tuple[io.FileIO, int]:
    """Open a regular file for reading without ever blocking; return it and its size.

    Raises:
        NotATrace: the path is missing, unreadable, or not a regular file (in a folder of rank traces, it is skipped
            with a note).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise NotATrace(f"cannot read {path}: {exc.strerror or exc}") from exc
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        kind = next((label for test, label in _SPECIAL if test(info.st_mode)), "not a regular file")
        raise NotATrace(f"{path} is {kind}, not a trace file")
    note_input(path, info)
    return io.FileIO(fd, "rb", closefd=True), info.st_size


# A gzip header's optional name and comment end with a NUL. Tools write a file name there (at most PATH_MAX, 4096
# bytes); Python's gzip reads them a byte per call, so a 20 MB comment cost 4 s before any limit applied.
_GZIP_FIELD_MAX_BYTES = 64 * 1024
_GZIP_HEADER_MAX_BYTES = 10 + 2 + 0xFFFF + 2 * _GZIP_FIELD_MAX_BYTES
_FEXTRA, _FNAME, _FCOMMENT = 4, 8, 16


def _check_gzip_header(path: Path, head: bytes) -> None:
    """Refuse a gzip header whose name or comment runs past _GZIP_FIELD_MAX_BYTES (one line, no slow read)."""
    if len(head) < 10:
        return  # too short to be whole: gzip itself says it is truncated
    flags, pos = head[3], 10
    if flags & _FEXTRA:
        pos += 2 + int.from_bytes(head[pos : pos + 2], "little")
    for flag, what in ((_FNAME, "file name"), (_FCOMMENT, "comment")):
        if flags & flag:
            end = head.find(b"\0", pos, pos + _GZIP_FIELD_MAX_BYTES)
            if end < 0:
                raise InputError(
                    f"{path}: its gzip header's {what} is longer than {_GZIP_FIELD_MAX_BYTES // 1024} KiB: "
                    "not a profiler's trace"
                )
            pos = end + 1


CHUNK_BYTES_TO_SKIP = 1 << 20


class Source:
    """Raw (inflated) bytes of a plain or gzip file, with every I/O or gzip failure turned into one InputError."""

    def __init__(self, path: Path, limits: TraceLimits, start: int = 0, stop: int | None = None) -> None:
        self.path = path
        self.limits = limits
        raw, self.size = open_regular(path)
        try:
            head = raw.read(_HEAD_BYTES)
            _refuse_other_formats(path, head)
            self.gzip = head[:2] == b"\x1f\x8b"
            if self.gzip:
                raw.seek(0)
                _check_gzip_header(path, raw.read(_GZIP_HEADER_MAX_BYTES))
            if not self.gzip and self.size > limits.max_bytes:
                raise InputError(_too_big(path, limits))
            raw.seek(start)
        except OSError as exc:  # a read error of the input (EIO from /proc/self/mem), not of the output
            raw.close()
            raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
        except BaseException:
            raw.close()
            raise
        # gzip reads a header's name and comment one byte per call: unbuffered, a 20 MB comment took 40 s of syscalls
        self._raw: IO[bytes] = io.BufferedReader(raw, 1 << 20) if self.gzip else raw
        self._fh: IO[bytes] = gzip.GzipFile(fileobj=self._raw, mode="rb") if self.gzip else raw  # type: ignore[assignment]
        self.consumed = start  # bytes of (inflated) content read so far, as an offset
        self.stop = stop  # read no further than this offset (a byte range of a plain file)
        self.eof = False

    def read(self, size: int) -> bytes:
        if self.stop is not None:
            size = min(size, self.stop - self.consumed)
        try:
            data = self._fh.read(size) if size > 0 else b""
        except (OSError, EOFError, zlib.error) as exc:
            if not self.gzip and isinstance(exc, OSError):
                raise InputError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
            raise InputError(f"{self.path} is a truncated or corrupt gzip file ({exc})") from exc
        if not data:
            self.eof = True
        self.consumed += len(data)
        if self.gzip:
            self._check_inflation()
        return data

    def _check_inflation(self) -> None:
        limits = self.limits
        if self.consumed > limits.max_bytes:
            raise InputError(_too_big(self.path, limits))
        if self.consumed > limits.gzip_ratio_after_bytes:
            packed = max(self._raw.tell(), 1)
            if self.consumed / packed > limits.max_gzip_ratio:
                ratio = limits.max_gzip_ratio
                inflated, packed_mib = self.consumed / 2**20, packed / 2**20
                so_far = (
                    f"{self.path} inflates more than {ratio:g}:1 ({inflated:.0f} MiB from {packed_mib:.2f} MiB so far)"
                )
                if ratio < 30:  # a limit set below what real traces reach: the file is no bomb, say what was set
                    raise InputError(
                        f"{so_far}, more than --max-gzip-ratio {ratio:g} allows (profiler traces inflate 10-30:1)"
                    )
                raise InputError(
                    f"{so_far}, far beyond a profiler trace's 10-30:1: refused as a decompression bomb (raise "
                    "--max-gzip-ratio to read it anyway)"
                )

    def skip_rest(self) -> int:
        """Pass over what is left (the bytes past what the analysis keeps); returns how many. A plain file moves its
        position to the end unread: 5 GiB after the events took 25 s to read only to be dropped. A gzip stream has to
        be inflated to be passed, within the same limits as reading it."""
        if self.gzip:
            skipped = 0
            while not self.eof:
                skipped += len(self.read(CHUNK_BYTES_TO_SKIP))
            return skipped
        end = self.size if self.stop is None else min(self.stop, self.size)
        skipped = max(end - self.consumed, 0)
        self.consumed += skipped
        self.eof = True
        return skipped

    def close(self) -> None:
        self._fh.close()
        self._raw.close()


def _too_big(path: Path, limits: TraceLimits) -> str:
    return (
        f"{path} holds more than {limits.max_bytes / GIB:.3g} GiB of JSON, the limit for one trace "
        "(raise it with --max-gib)"
    )


# Archives and compressors other than gzip, by their magic bytes: named, not "it starts with b'P'".
_ARCHIVES = (
    (b"PK\x03\x04", "a zip archive"),
    (b"\xfd7zXZ\x00", "xz-compressed"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed"),
    (b"BZh", "bzip2-compressed"),
    (b"\x04\x22\x4d\x18", "lz4-compressed"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
)


# A tar archive says so at byte 257 of its first header ("ustar"), not at its start (a file name).
_TAR_MAGIC_AT = 257
_HEAD_BYTES = 512  # what is read first, to name a file that is not a trace


_WIDE_BOMS = (
    (b"\xff\xfe\x00\x00", "UTF-32"),
    (b"\x00\x00\xfe\xff", "UTF-32"),
    (b"\xff\xfe", "UTF-16"),
    (b"\xfe\xff", "UTF-16"),
)


def _wide_without_bom(head: bytes) -> str | None:
    """UTF-16 or UTF-32 JSON without a byte-order mark: its first characters (ASCII, a brace or a bracket, white
    space) come with NUL bytes between them, which UTF-8 JSON never holds."""
    start = head[:8]
    if len(start) < 4 or b"\x00" not in start:
        return None
    if start[1:4] == b"\x00\x00\x00" or start[:3] == b"\x00\x00\x00":
        return "UTF-32"
    if start[1::2] == b"\x00" * len(start[1::2]) or start[0::2] == b"\x00" * len(start[0::2]):
        return "UTF-16"
    return None


def _refuse_other_formats(path: Path, head: bytes) -> None:
    name = path.name.lower()
    if head.startswith(b"SQLite format 3") or name.endswith((".nsys-rep", ".qdrep", ".sqlite")):
        raise InputError(
            f"{path} is an Nsight Systems report, not a PyTorch profiler trace; record one with "
            "torch.profiler.profile(on_trace_ready=torch.profiler.tensorboard_trace_handler('./traces'))"
        )
    if not head:
        # nothing at all, like a FIFO's or a dangling link's: in a folder of rank traces it is skipped with a note,
        # where it stopped the command (trial 10)
        raise NotATrace(f"{path} is empty, not a PyTorch profiler trace")
    encoding = next((name for bom, name in _WIDE_BOMS if head.startswith(bom)), None) or _wide_without_bom(head)
    if encoding is not None:  # checked longest first: UTF-32's little-endian mark starts with UTF-16's
        raise InputError(f"{path} is {encoding} text: a trace is UTF-8 JSON; save it again as UTF-8")
    packed = next((what for magic, what in _ARCHIVES if head.startswith(magic)), None)
    if packed is None and head[_TAR_MAGIC_AT : _TAR_MAGIC_AT + 5] == b"ustar":
        packed = "a tar archive"
    if packed is not None:  # in a folder of rank traces, skipped with a note, as any file that is not a trace
        raise NotATrace(
            f"{path} is {packed}, not a PyTorch profiler trace: unpack it and give the trace's .json inside "
            "(gzip, .json.gz, is read as it is)"
        )
