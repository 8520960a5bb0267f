"""Jupyter / IPython: `%load_ext gputriage`, then `%%triage` around a cell shows the report inline.

    %load_ext gputriage

    %%triage --expect-device cuda --steps 50
    trainer.fit(model, loader)

The cell's value is the `Session` (so `_.findings` works in the next cell); Jupyter shows it as the self-contained
HTML report, a terminal IPython as the text report. A `gputriage.session()` shows itself the same way.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, magics_class

from gputriage.api import Session
from gputriage.collectors.session import DEFAULT_STEPS
from gputriage.errors import InputError
from gputriage.report.output import write_files
from gputriage.stdlib import shlex


class _MagicParser(argparse.ArgumentParser):
    """argparse that reports a bad option line as IPython's one-line UsageError instead of exiting the kernel."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}")


def _parser() -> argparse.ArgumentParser:
    parser = _MagicParser(prog="%%triage", add_help=False)
    parser.add_argument("--expect-device", metavar="DEV", help="the device the cell is meant to use")
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, metavar="N", help="observe N steps")
    parser.add_argument("--out", type=Path, metavar="DIR", help="also write report.json, report.html, ... there")
    return parser


@magics_class
class TriageMagics(Magics):
    """The `%%triage` cell magic."""

    @cell_magic
    def triage(self, line: str, cell: str) -> Session:
        """Run the cell under gputriage and show its report: `%%triage [--expect-device DEV] [--steps N] [--out D]`."""
        args = _parser().parse_args(shlex.split(line))
        if args.steps < 1:
            raise UsageError(f"--steps must be at least 1 (got {args.steps})")
        shell = self.shell
        assert shell is not None  # set by register_magics
        try:
            session = Session(args.expect_device, args.steps).start()
        except InputError as exc:  # an unknown --expect-device
            raise UsageError(str(exc)) from None
        outer = shell.displayhook.exec_result  # the inner run_cell clears it: put it back, so Out[n] and `_` work
        try:
            # the cell runs as typed: its output and traceback show as usual (IPython leaves run_cell untyped)
            result = shell.run_cell(cell)  # type: ignore[no-untyped-call]
        except BaseException as exc:  # KeyboardInterrupt between statements: the report still comes
            session.stop(exc)
            raise
        finally:
            shell.displayhook.exec_result = outer
        session.stop(result.error_before_exec or result.error_in_exec)
        if args.out is not None:
            try:
                write_files(session.diagnosis, args.out)
            except InputError as exc:  # the report is still shown; say in one line why no file was written
                print(f"gputriage: error: {exc}", file=sys.stderr)
        return session


def load_ipython_extension(ipython: Any) -> None:
    """`%load_ext gputriage` (reached through the top-level package)."""
    ipython.register_magics(TriageMagics)
