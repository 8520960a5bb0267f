"""The console script's first module (and `python -m gputriage`'s): a Ctrl-C while the command's modules load ends
the command as a Ctrl-C does later, with exit code 130, not with a traceback.

Loading gputriage.cli and what it imports takes about 30 ms, before cli.entry() can take care of anything; this module
imports nothing more than gputriage.errors until then.
"""

from __future__ import annotations

import sys

from gputriage.errors import raise_signal_inside

INTERRUPTED_EXIT = 130  # what the shell shows for a process that Ctrl-C ended, and what cli.main returns for it


def main() -> None:
    try:
        try:
            from gputriage.cli import entry
        except RuntimeError as exc:
            raise_signal_inside(exc)  # a Ctrl-C inside a class definition comes wrapped (errors.py)
            raise
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED_EXIT)
    entry()
