"""Where a finished diagnosis goes: the terminal, `--json` on stdout, and the files of `--out DIR`."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from rich.console import Console

from gputriage.diagnosis import Diagnosis
from gputriage.errors import InputError
from gputriage.report import terminal
from gputriage.report.document import build_document, encode_document


@dataclass
class OutputOptions:
    json: bool = False  # print the JSON document to stdout instead of the terminal report
    out_dir: Path | None = None  # write report.json (and the other report files) there
    terminal_stream: TextIO | None = None  # None: stdout; `run` passes stderr (stdout is the script's)
    width: int | None = None


def emit(diag: Diagnosis, opts: OutputOptions) -> None:
    if opts.out_dir is not None:
        write_files(diag, opts.out_dir)
    if opts.json:
        sys.stdout.buffer.write(encode_document(build_document(diag)))
        sys.stdout.flush()
        return
    stream = opts.terminal_stream if opts.terminal_stream is not None else sys.stdout
    terminal.render(diag, make_console(stream, opts.width))


def make_console(stream: TextIO, width: int | None = None) -> Console:
    return Console(file=stream, width=width, soft_wrap=False, highlight=False)


def write_files(diag: Diagnosis, out_dir: Path) -> list[Path]:
    """Write every report file into out_dir and return their paths."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "report.json"
        path.write_bytes(encode_document(build_document(diag)))
    except OSError as exc:
        raise InputError(f"cannot write the report into {out_dir}: {exc.strerror or exc}") from exc
    return [path]
