"""`gputriage trace PATH...`: explain PyTorch profiler (Kineto) traces; a folder of per-rank traces is compared."""

from __future__ import annotations

import argparse
from pathlib import Path

from gputriage.commands.common import add_output_options, exit_code_for, output_options
from gputriage.diagnosis import diagnose
from gputriage.record import Run
from gputriage.report.output import emit
from gputriage.tracing.multirank import analyse_paths


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "trace",
        help="analyse PyTorch profiler (Kineto) traces: a file, or a folder with one file per rank",
    )
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="a .json/.json.gz trace, or a folder of them")
    p.add_argument(
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="processes: one per rank file, or per byte range of one large .json file (default: one per CPU core)",
    )
    add_output_options(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    section = analyse_paths(list(args.paths), jobs=args.jobs)
    run = Run(command="trace", argv=["trace", *map(str, args.paths)], trace=section)
    diag = diagnose(run)
    emit(diag, output_options(args))
    return exit_code_for(diag, args.fail_on)
