"""The command line: parse, build the config, run, render. `main()` returns the exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from importlib import import_module

from gputriage import __version__
from gputriage.errors import InputError

# Each module under gputriage.commands adds its sub-parser and sets `func`.
COMMANDS = ("env", "report", "watch", "run", "demo", "trace")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gputriage",
        description="Why is my GPU idle while PyTorch trains, and what exactly do I change?",
    )
    parser.add_argument("--version", action="version", version=f"gputriage {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in COMMANDS:
        import_module(f"gputriage.commands.{name}").add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except InputError as exc:
        print(f"gputriage: error: {exc}", file=sys.stderr)
        return InputError.exit_code
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
