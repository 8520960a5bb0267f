"""Who a PID on the GPU is: its command line, its parent, its rank. Read from /proc (Linux); a fake stands in for it.

NVML lists PIDs only. To say "python train.py (pid 4242) holds 12 GiB" and to tell the job's own processes (its
DataLoader workers, its torchrun ranks) from a neighbour's, gputriage reads /proc. Where /proc is missing or the PID
lives in another PID namespace (a container without `--pid=host`), the answers are None, never an error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

PROC = Path("/proc")
COMMAND_MAX_CHARS = 200  # long argv lists (hydra overrides) are cut, the script name stays


class ProcessTable(Protocol):
    def command(self, pid: int) -> str | None: ...

    def parent(self, pid: int) -> int | None: ...

    def rank(self, pid: int) -> int | None: ...


class ProcTable:
    """The host's /proc."""

    def command(self, pid: int) -> str | None:
        try:
            raw = (PROC / str(pid) / "cmdline").read_bytes()
        except OSError:
            return None
        text = raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
        return _shorten(text) or None

    def parent(self, pid: int) -> int | None:
        try:
            stat = (PROC / str(pid) / "stat").read_text()
        except OSError:
            return None
        # The command field may hold spaces and parentheses; the fields after the last ")" are fixed.
        fields = stat[stat.rfind(")") + 2 :].split()
        return int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None

    def rank(self, pid: int) -> int | None:
        try:
            environ = (PROC / str(pid) / "environ").read_bytes()
        except OSError:
            return None  # another user's process: environ is private
        for item in environ.split(b"\0"):
            if item.startswith(b"RANK="):
                value = item[5:]
                return int(value) if value.isdigit() else None
        return None


def table_for(lib: Any) -> ProcessTable:
    """The fake's invented processes when NVML is the fake, otherwise the host's /proc."""
    fake: ProcessTable | None = getattr(lib, "process_table", None)
    return fake if fake is not None else ProcTable()


def job_role(table: ProcessTable, pid: int, root_pid: int, *, with_ranks: bool) -> str | None:
    """The role of `pid` in the job rooted at `root_pid`, or None when it belongs to someone else.

    main: the root itself; worker: any process below it (DataLoader workers, their helpers); rank N: under torchrun,
    a sibling (a child of the same agent) that carries RANK=N in its environment. Walks parents upwards, so the cost
    is a few /proc reads per PID that NVML lists, not a scan of every process on the host.
    """
    if pid == root_pid:
        return "main"
    agent = table.parent(root_pid) if with_ranks else None
    ancestor = table.parent(pid)
    for _ in range(_MAX_DEPTH):
        if ancestor is None or ancestor <= 1:
            return None
        if ancestor == root_pid:
            return "worker"
        if agent is not None and agent > 1 and ancestor == agent:
            rank = table.rank(pid)
            return f"rank {rank}" if rank is not None else None
        ancestor = table.parent(ancestor)
    return None


_MAX_DEPTH = 64  # process trees are shallow; a cycle (a PID reused mid-walk) must not loop forever


def _shorten(text: str) -> str:
    return text if len(text) <= COMMAND_MAX_CHARS else text[: COMMAND_MAX_CHARS - 1] + "…"
