"""The one error type that the CLI turns into a one-line message and exit code 2, and the signal that ends a command
after its clean-up."""

from __future__ import annotations


class InputError(Exception):
    """Bad input from the user: a missing file, a truncated trace, garbage text.

    The message is the whole user-facing line, so it must name what was wrong and, where it can, the fix.
    """

    exit_code = 2


class NotATrace(InputError):
    """A file that is not a profiler trace at all (other JSON, other text), rather than a broken one: in a folder of
    rank traces it is skipped with a note, where a truncated trace still stops the command."""


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived while a command ran: raised so that `finally` blocks remove temporary files and stop
    worker processes; the CLI then dies of the same signal (commands/common.py: signals_end_the_command)."""

    def __init__(self, signal_name: str) -> None:
        super().__init__(signal_name)
        self.signal_name = signal_name
