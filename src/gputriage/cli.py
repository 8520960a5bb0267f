"""The command line: parse, build the config, run, render. `main()` returns the exit code."""

from __future__ import annotations

import argparse
import errno
import os
import sys
from collections.abc import Sequence
from importlib import import_module
from typing import NoReturn

from gputriage import blas, cyclegc, heap, outdir
from gputriage.errors import InputError, Terminated, raise_signal_inside
from gputriage.report.sanitize import inline_text
from gputriage.version import __version__

# Each module under gputriage.commands adds its sub-parser and sets `func`. Listed in the ladder's order of use.
COMMANDS = ("env", "run", "trace", "watch", "report", "compare", "demo")
JOB_COMMANDS = ("run", "demo")  # they run the user's script, whose output and exit are its own
# A reader that went away (`gputriage trace t.json | head -1`): the code a shell shows for a process ended by SIGPIPE,
# not 1, which --fail-on gives a finding.
BROKEN_PIPE_EXIT = 141
# The output could not be written: an error of the command's, as bad input is (1 is --fail-on's).
OUTPUT_ERROR_EXIT = 2
_OUTPUT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO})


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser; given argv naming a command, only that command's module is imported.

    `run` wraps the user's job, so every module it does not need is start-up time added to their job.
    """
    from gputriage.commands.common import OneLineParser

    parser = OneLineParser(
        prog="gputriage",
        description="Why is my GPU idle while PyTorch trains, and what exactly do I change?",
    )
    parser.add_argument("--version", action="version", version=f"gputriage {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    chosen = _command_in(argv or ())
    for name in (chosen,) if chosen in COMMANDS else COMMANDS:
        import_module(f"gputriage.commands.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        args = _parse(argv)  # imports the chosen command's modules: most of start-up
    except SystemExit as exc:  # --help, --version, or a bad flag (one line on stderr already): main returns codes
        return exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 2
    except KeyboardInterrupt:  # Ctrl-C while starting: an exit code, not an import traceback
        return 130
    if sys.stdout is None and args.command not in JOB_COMMANDS:  # `gputriage trace t.json >&-`: as `ls >&-` does
        print("gputriage: error: standard output is closed (send it to /dev/null to discard it)", file=sys.stderr)
        return OUTPUT_ERROR_EXIT
    return _execute(args)


def _execute(args: argparse.Namespace) -> int:
    """Run the parsed command; its errors, Ctrl-C and a reader that has gone become one line and an exit code."""
    try:
        from gputriage.commands.settings import check_environment

        check_environment()  # every GPUTRIAGE_* variable, before anything reads one
        outdir.guard_inputs(args.command not in JOB_COMMANDS)
        breaks = _pipe_breaks()
        try:
            code = _call(args)
        finally:
            outdir.guard_inputs(False)
        if args.command not in JOB_COMMANDS:
            sys.stdout.flush()  # a reader that has gone (`| head -1`) is met here, not at the interpreter's exit
            if _pipe_breaks() > breaks:
                raise BrokenPipeError
    except BrokenPipeError:
        if args.command in JOB_COMMANDS:
            raise  # the job's own output: it ends as it would under python
        from gputriage.report.output import silence_stdout

        silence_stdout()
        return BROKEN_PIPE_EXIT
    except OSError as exc:
        if args.command not in JOB_COMMANDS and exc.filename is not None and exc.errno not in _OUTPUT_ERRNOS:
            # a path of the user's that the file system refuses (a folder without read or search permission, met by
            # a stat or a listing): one line naming it, as for any bad input
            where = inline_text(os.fsdecode(exc.filename))
            print(f"gputriage: error: cannot access {where}: {exc.strerror or exc}", file=sys.stderr)
            return InputError.exit_code
        if args.command in JOB_COMMANDS or exc.errno not in _OUTPUT_ERRNOS:
            raise
        # stdout on a full disk (`> /dev/full`), over a quota, or on a failing device: one line, and a code that
        # --fail-on's 1 cannot be mistaken for
        print(f"gputriage: error: cannot write the output ({os.strerror(exc.errno or 0)})", file=sys.stderr)
        return OUTPUT_ERROR_EXIT
    except InputError as exc:
        # The message may quote a path or a value from a file: its control characters are shown, not sent.
        print(f"gputriage: error: {inline_text(str(exc))}", file=sys.stderr)
        return InputError.exit_code
    except KeyboardInterrupt as exc:
        if getattr(exc, "exit_as_python", False):
            raise  # `run`: the job's Ctrl-C ends this process the way Python ends it (see collectors/runner.py)
        return 130
    except Terminated as exc:  # clean-up done: die of the signal, as the parent expects (commands/common.py)
        from gputriage.collectors.runner import die_by_signal

        die_by_signal(exc.signal_name)
    return code


def entry() -> NoReturn:
    """The console script and `python -m gputriage`: main(), then the process's exit."""
    argv = sys.argv[1:]
    own = _command_in(argv) not in JOB_COMMANDS  # a job's process allocates and ends as Python makes it
    if own:
        heap.keep_freed_memory()
        blas.one_thread()
    code = main(argv)
    if own:
        cyclegc.skip_at_exit()
    sys.exit(code)


def _command_in(argv: Sequence[str]) -> str | None:
    return next((a for a in argv if not a.startswith("-")), None)


def _parse(argv: list[str]) -> argparse.Namespace:
    try:
        with cyclegc.paused():  # the command's modules: most of start-up; `run`'s job has not started yet
            return build_parser(argv).parse_args(argv)
    except RuntimeError as exc:
        raise_signal_inside(exc)
        raise


def _call(args: argparse.Namespace) -> int:
    try:
        code: int = args.func(args)
    except RuntimeError as exc:
        if args.command not in JOB_COMMANDS:  # a job's own error ends it as it would under python
            raise_signal_inside(exc)
        raise
    return code


def _pipe_breaks() -> int:
    output = sys.modules.get("gputriage.report.output")  # not imported: no console was made
    return int(output.pipe_breaks()) if output is not None else 0


if __name__ == "__main__":
    sys.exit(main())
