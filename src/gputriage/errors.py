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


def raise_signal_inside(exc: RuntimeError) -> None:
    """Raise the signal (Ctrl-C, SIGTERM) that a RuntimeError wraps, if it wraps one. Python 3.11 wraps whatever is
    raised in a `__set_name__` in "RuntimeError: Error calling __set_name__": a signal that arrives while a module
    defines a class with a cached_property or a dataclass field (the commands import their modules late) was a
    traceback and exit 1."""
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, (KeyboardInterrupt, Terminated)):
            raise cause from None
        cause = cause.__cause__
