"""The one error type that the CLI turns into a one-line message and exit code 2."""

from __future__ import annotations


class InputError(Exception):
    """Bad input from the user: a missing file, a truncated trace, garbage text.

    The message is the whole user-facing line, so it must name what was wrong and, where it can, the fix.
    """

    exit_code = 2
