"""`gputriage report RUN.json`: re-render a saved run without re-running anything."""

from __future__ import annotations

import argparse
from pathlib import Path

from gputriage.commands.common import add_output_options, exit_code_for, output_options
from gputriage.diagnosis import diagnose
from gputriage.errors import InputError
from gputriage.report.document import load_document
from gputriage.report.output import emit


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="re-render a saved run (report.json or an --out folder)")
    p.add_argument("paths", nargs="+", type=Path, metavar="RUN", help="report.json, or a folder that holds one")
    add_output_options(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if len(args.paths) != 1:
        raise InputError("give one report.json or --out folder")
    path: Path = args.paths[0]
    if path.is_dir():
        path = path / "report.json"
    diag = diagnose(load_document(path))
    emit(diag, output_options(args))
    return exit_code_for(diag, args.fail_on)
