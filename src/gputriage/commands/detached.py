"""A helper process that is not the job's child: started through a process that exits at once (a double fork).

The job must not see gputriage's report worker among its children: a script that reaps every child
(`while True: os.wait()` until ChildProcessError, as process managers do) waited for it forever, and the worker waits
for the job's end. As a grandchild, the worker is adopted by init (or the nearest subreaper) and the job's `os.wait()`
raises ChildProcessError as under python. The object answers as much of subprocess.Popen as the worker's handle uses.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import time
from typing import IO

_POLL_S = 0.01


def fd_identity(fd: int) -> tuple[int, int] | None:
    """(device, inode) of what the descriptor is open on; None when it is closed."""
    try:
        found = os.fstat(fd)
    except (OSError, ValueError):
        return None
    return found.st_dev, found.st_ino


class DetachedProcess:
    def __init__(self, pid: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.pid = pid
        self.stdin: IO[bytes] | None = stdin
        self.stdout: IO[bytes] | None = stdout
        self._gone = False
        self._pipes = (fd_identity(stdin.fileno()), fd_identity(stdout.fileno()))

    def intact(self) -> bool:
        """Both pipes are still ours: a job that closed every inherited descriptor (os.closerange(3, ...)) may have
        opened its own files on their numbers since, and what is meant for the worker must never go there."""
        if self.stdin is None or self.stdout is None or self.stdin.closed or self.stdout.closed:
            return False
        now = (fd_identity(self.stdin.fileno()), fd_identity(self.stdout.fileno()))
        return None not in now and now == self._pipes

    def poll(self) -> int | None:
        """0 once the process is gone (its exit status belongs to its adopter), else None."""
        if not self._gone:
            try:
                os.kill(self.pid, 0)
            except ProcessLookupError:
                self._gone = True
            except PermissionError:
                pass  # alive, or its pid taken by someone else's process: not ours to tell
        return 0 if self._gone else None

    def wait(self, timeout: float | None = None) -> int:
        """Until the process has ended: its stdout reaches its end when it exits (its adopter reaps it, maybe much
        later: waiting for the pid to go cost a second and more at every job's end)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._gone:
            left_s = None if deadline is None else deadline - time.monotonic()
            if left_s is not None and left_s <= 0:
                import subprocess

                raise subprocess.TimeoutExpired("gputriage report worker", timeout or 0.0)
            if self._at_end_of_output(left_s):
                self._gone = True
        return 0

    def _at_end_of_output(self, timeout_s: float | None) -> bool:
        out = self.stdout
        if out is None or out.closed:
            if self.poll() is not None:
                return True
            time.sleep(_POLL_S)
            return False
        try:
            ready, _, _ = select.select([out], [], [], min(timeout_s, 0.5) if timeout_s is not None else 0.5)
        except InterruptedError:
            return False
        if not ready:
            return False
        try:
            return os.read(out.fileno(), 1 << 16) == b""  # what is left unread is no reply anyone waits for
        except OSError:
            return True

    def kill(self) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self.pid, signal.SIGKILL)


def spawn_detached(argv: list[str], env: dict[str, str], stderr_fd: int) -> DetachedProcess:
    """Start `argv` as a grandchild with pipes on its stdin and stdout and `stderr_fd` as its stderr.

    Raises:
        OSError: a pipe or a fork failed.
    """
    child_in, to_child = os.pipe()  # its stdin, and our end to write to it
    from_child, child_out = os.pipe()  # our end to read, and its stdout
    pid_read, pid_write = os.pipe()
    middle = os.fork()
    if middle == 0:  # the middle process: fork the worker, say its pid, and leave (nothing else runs here)
        try:
            worker = os.fork()
            if worker == 0:
                os.dup2(child_in, 0)
                os.dup2(child_out, 1)
                os.dup2(stderr_fd, 2)
                os.execve(argv[0], argv, env)  # every other descriptor is non-inheritable (PEP 446): closed here
            os.write(pid_write, str(worker).encode())
        finally:
            os._exit(0)
    os.waitpid(middle, 0)
    for fd in (child_in, child_out, pid_write):
        os.close(fd)
    with os.fdopen(pid_read, "rb") as said:
        pid = int(said.read() or b"0")
    if pid <= 0:
        os.close(to_child)
        os.close(from_child)
        raise OSError("the report worker did not start")
    return DetachedProcess(pid, os.fdopen(to_child, "wb"), os.fdopen(from_child, "rb"))
