"""Where a finished diagnosis goes: the terminal, `--json` on stdout, and the files of `--out DIR`."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import msgspec

from gputriage import outdir
from gputriage.diagnosis import Diagnosis
from gputriage.errors import InputError
from gputriage.report.document import build_document, encode_document

if TYPE_CHECKING:
    from rich.console import Console

# The views (rich for the terminal, Jinja2 for HTML) are imported where they render: `trace --json` and a job's
# start-up need neither, and together they cost about 50 ms of imports.


class OutputOptions(msgspec.Struct):
    json: bool = False  # print the JSON document to stdout instead of the terminal report
    out_dir: Path | None = None  # write report.json (and the other report files) there
    terminal_stream: TextIO | None = None  # None: stdout; `run` passes stderr (stdout is the script's)
    width: int | None = None
    verbose: bool = False  # -v: the whole report on the terminal; by default the short one (the files hold it all)
    details_in: Path | None = None  # where the report files already are (`report DIR`): the short report points there


def emit(diag: Diagnosis, opts: OutputOptions) -> None:
    """Write the --out files, then show the report; a report that cannot be written is still shown, and the write's
    InputError (one line: what was not written) is raised after it."""
    unwritten: InputError | None = None
    if opts.out_dir is not None:
        try:
            write_files(diag, opts.out_dir)
        except InputError as exc:
            unwritten = exc
    if opts.json:
        sys.stdout.buffer.write(encode_document(build_document(diag)))
        sys.stdout.flush()
    else:
        from gputriage.report import terminal

        stream = opts.terminal_stream if opts.terminal_stream is not None else sys.stdout
        terminal.render(
            diag, make_console(stream, opts.width), verbose=opts.verbose, out_dir=opts.out_dir or opts.details_in
        )
    if unwritten is not None:
        raise unwritten


# Set when a console's reader went away (`gputriage trace t.json | head -1`): the CLI then exits as a process ended by
# SIGPIPE does, and a report printed inside a user's job (run's fallback, the API, a Lightning callback) just stops.
_PIPE_BROKE: list[bool] = []


def pipe_breaks() -> int:
    """How many times a console's reader has gone, in this process: a caller compares it before and after its work."""
    return len(_PIPE_BROKE)


def make_console(stream: TextIO, width: int | None = None, plain: bool | None = None) -> Console:
    """The console of every terminal view; `plain` (default: `plain_output(stream)`) leaves colours and boxes out."""
    if plain is None:
        plain = plain_output(stream)
    return _quiet_console_class()(
        file=stream,
        width=width,
        soft_wrap=False,
        highlight=False,
        color_system=None if plain else "auto",
        emoji=False,
    )


@cache
def _quiet_console_class() -> type[Console]:
    from rich.console import Console

    class QuietOnBrokenPipe(Console):
        def on_broken_pipe(self) -> None:
            # rich's own points stdout at /dev/null and raises SystemExit(1): inside a user's job that would end the
            # job with our exit code, and from the CLI it reads as a --fail-on hit. The reader has gone: stop writing.
            self.quiet = True
            _PIPE_BROKE.append(True)

    return QuietOnBrokenPipe


def plain_output(stream: TextIO, environ: Mapping[str, str] | None = None) -> bool:
    """Plain text (no colours, no boxes) for a pipe or a file, a CI log (CI set), NO_COLOR (no-color.org) and
    TERM=dumb; colours and boxes only on a terminal that can show them."""
    env = os.environ if environ is None else environ
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return True
    if env.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        return True
    try:
        return not stream.isatty()
    except (AttributeError, ValueError, OSError):  # a closed stream, or a file-like object without isatty
        return True


def report_files(diag: Diagnosis) -> dict[str, bytes]:
    """Every file of `--out DIR`, by name. report.json comes first: the others are views of it."""
    from gputriage.report.html import render_html
    from gputriage.report.markdown import render_markdown
    from gputriage.report.timeline import build_timeline, encode_timeline

    return {
        outdir.REPORT_JSON: encode_document(build_document(diag)),
        outdir.REPORT_HTML: render_html(diag).encode("utf-8"),
        outdir.REPORT_MD: render_markdown(diag).encode("utf-8"),
        outdir.TIMELINE_JSON: encode_timeline(build_timeline(diag)),
    }


def write_files(diag: Diagnosis, out_dir: Path) -> list[Path]:
    """Write every report file into out_dir and return their paths: all of them, or (disk full, read-only folder, a
    planted symlink) none, the previous report staying whole."""
    return outdir.atomic_write_all(out_dir, report_files(diag))


def write_file(path: Path, content: bytes) -> Path:
    """One report file, written atomically: a failed write leaves the previous one intact."""
    return outdir.atomic_write(path, content, make_folder=False)


def silence_stdout() -> None:
    """Point stdout at /dev/null, so that Python's flush at exit does not report the broken pipe again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
