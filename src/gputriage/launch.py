"""The console script's first module (and `python -m gputriage`'s): a Ctrl-C while the command's modules load ends
the command as a Ctrl-C does later, with exit code 130, not with a traceback.

Loading gputriage.cli and what it imports takes about 30 ms, before cli.entry() can take care of anything; this module
imports nothing more than gputriage.errors until then.
"""

from __future__ import annotations

import os
import sys

from gputriage.errors import raise_signal_inside

INTERRUPTED_EXIT = 130  # what the shell shows for a process that Ctrl-C ended, and what cli.main returns for it


# The modules Python loaded before gputriage's first import: a script gets these under plain python too. Every other
# module in sys.modules when the job starts is gputriage's, and the job must not get it where its own folder holds a
# file of that name (collectors/runner.py).
STARTUP_MODULES = frozenset(sys.modules)


def main() -> None:
    _no_working_directory_first()
    try:
        try:
            from gputriage.cli import entry
        except RuntimeError as exc:
            raise_signal_inside(exc)  # a Ctrl-C inside a class definition comes wrapped (errors.py)
            raise
    except KeyboardInterrupt:
        sys.exit(INTERRUPTED_EXIT)
    entry()


def _no_working_directory_first() -> None:
    """`python -m gputriage` puts the working directory first on sys.path: a `msgspec.py` there would be what
    gputriage imports (a trial: gputriage died before the job ran). gputriage's own folder takes that place; the job's
    first entry is set as Python sets it when the job starts."""
    # os.path, not pathlib: this module imports nothing that Python has not loaded already (see the docstring)
    if sys.path and sys.path[0] in ("", os.getcwd()):  # noqa: PTH109
        sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # noqa: PTH100, PTH120
