"""Options and steps shared by several commands."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from gputriage.findings import Severity

if TYPE_CHECKING:  # `run` imports this module before the user's job starts: the report's modules come later
    from gputriage.diagnosis import Diagnosis
    from gputriage.report.output import OutputOptions


def add_output_options(parser: argparse.ArgumentParser, *, json_flag: bool = True) -> None:
    if json_flag:
        parser.add_argument("--json", action="store_true", help="print the machine-readable report to stdout")
    parser.add_argument("--out", type=Path, metavar="DIR", help="write report.json and the other report files here")
    add_fail_on(parser)


def add_fail_on(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--fail-on",
        choices=["critical", "warning"],
        help="exit 1 when a finding of this severity or worse exists (for CI)",
    )


def output_options(args: argparse.Namespace) -> OutputOptions:
    from gputriage.report.output import OutputOptions

    return OutputOptions(json=getattr(args, "json", False), out_dir=args.out)


def exit_code_for(diag: Diagnosis, fail_on: str | None) -> int:
    if fail_on is None:
        return 0
    return 1 if diag.worst_at_least(Severity(fail_on)) else 0
