"""`gputriage env`: rung 1 for this machine, or for a pasted collect_env / nvidia-smi text (`--from FILE|-`)."""

from __future__ import annotations

import argparse
import codecs
import os
import stat
import sys
from pathlib import Path

from gputriage import outdir
from gputriage.collectors.env_probe import probe_environment
from gputriage.collectors.env_text import parse_environment_text
from gputriage.commands.common import add_output_options, device_name, exit_code_for, output_options
from gputriage.diagnosis import Diagnosis, diagnose
from gputriage.errors import InputError
from gputriage.record import Run
from gputriage.record.environment import Environment
from gputriage.report.output import emit
from gputriage.stdlib import shlex

_MAX_TEXT_BYTES = 16 * 1024 * 1024  # a pasted report is kilobytes; anything this large is the wrong file


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "env",
        help="rung 1: can this torch build reach the GPU? (this machine, or a pasted report)",
        description="Diagnose rung 1 of the ladder: the torch build, the driver, the GPUs, the env vars.",
    )
    p.add_argument(
        "--from",
        dest="from_path",
        metavar="FILE",
        help="diagnose a pasted collect_env / nvidia-smi / session text instead of this machine ('-' reads stdin)",
    )
    p.add_argument(
        "--expect-device",
        type=device_name,
        metavar="DEV",
        help="the device the job is meant to use (cuda, cuda:1, mps, xpu, meta, cpu); "
        "default: the first available accelerator",
    )
    add_output_options(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    expect = args.expect_device  # checked by argparse (device_name)
    env = _from_text(args.from_path) if args.from_path else probe_environment(expect)
    run = Run(command="env", argv=list(sys.argv[1:]), expect_device=expect, environment=env)
    diag = diagnose(run)
    emit(diag, output_options(args))
    return exit_code_for(diag, args.fail_on)


def diagnose_text(text: str, expect_device: str | None = None) -> Diagnosis:
    """Rung 1 for a pasted report, as `env --from` computes it (no output)."""
    env = parse_environment_text(text)
    return diagnose(Run(command="env", argv=["env", "--from"], expect_device=expect_device, environment=env))


def _from_text(source: str) -> Environment:
    name = "stdin" if source == "-" else source
    raw = _read_bytes(source)
    if len(raw) > _MAX_TEXT_BYTES:
        raise InputError(
            f"{name} is over {_MAX_TEXT_BYTES} bytes, too large for a pasted report; give the collect_env text"
        )
    shown = "-" if source == "-" else shlex.quote(source)
    if outdir.starts_as_a_trace(raw[:256]):  # `env --from trace.json` read nothing and said "inconclusive"
        raise InputError(f"{name} is a profiler trace, not a pasted report: run `gputriage trace {shown}`")
    if raw[:2] == b"\x1f\x8b":
        raise InputError(
            f"{name} is gzip-compressed: a saved profiler trace is read by `gputriage trace {shown}`; a compressed "
            "report, gunzip it first"
        )
    text = decode_report(raw)
    if "\x00" in text:
        raise InputError(f"{name} looks binary, not text: give a collect_env / nvidia-smi text file")
    try:
        return parse_environment_text(text)
    except InputError as exc:
        raise InputError(f"{name}: {exc}") from exc


_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),  # before UTF-16 LE: its BOM starts with UTF-16 LE's
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)


def decode_report(raw: bytes) -> str:
    """A pasted report's text. Windows PowerShell 5 writes `collect_env > env.txt` as UTF-16 with a byte-order mark,
    and some editors save without one: both are read as what they are, not refused as binary. Anything else is UTF-8,
    an undecodable byte replaced."""
    for bom, codec in _BOMS:
        if raw.startswith(bom):
            return raw[len(bom) :].decode(codec, errors="replace")
    sample = raw[:4096]
    if len(sample) >= 16:
        if _ascii_as_utf16(sample[0::2], sample[1::2]):  # "a\0b\0": little-endian
            return raw.decode("utf-16-le", errors="replace")
        if _ascii_as_utf16(sample[1::2], sample[0::2]):
            return raw.decode("utf-16-be", errors="replace")
    return raw.decode("utf-8", errors="replace")


_TEXT_BYTES = frozenset(b"\t\n\r" + bytes(range(0x20, 0x7F)))


def _ascii_as_utf16(low: bytes, high: bytes) -> bool:
    """Mostly ASCII text written as UTF-16: the high bytes almost all zero, the low ones almost all printable."""
    printable = sum(1 for b in low if b in _TEXT_BYTES)
    return high.count(0) > 0.9 * len(high) and printable > 0.9 * len(low)


def _read_bytes(source: str) -> bytes:
    """At most _MAX_TEXT_BYTES + 1 bytes; a FIFO, device or socket is refused before anything could block on it."""
    if source == "-":
        return sys.stdin.buffer.read(_MAX_TEXT_BYTES + 1)
    path = Path(source)
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0))
    except OSError as exc:  # a socket cannot be opened at all (ENXIO): name what it is rather than the errno
        raise InputError(_not_regular(path) or f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise InputError(
                f"{path} is {_kind(info.st_mode)}, not a regular file: give the pasted report as a text file"
            )
        outdir.note_input(path, info)
        if info.st_size > _MAX_TEXT_BYTES:
            raise InputError(
                f"{path} is {info.st_size} bytes, too large for a pasted report; give the collect_env text"
            )
        with os.fdopen(fd, "rb", closefd=True) as handle:
            fd = -1
            return handle.read(_MAX_TEXT_BYTES + 1)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    finally:
        if fd >= 0:
            os.close(fd)


def _not_regular(path: Path) -> str | None:
    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode):
        return None
    return f"{path} is {_kind(mode)}, not a regular file: give the pasted report as a text file"


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"
