"""How the user's program ended: exit code, and the exception when it crashed."""

from __future__ import annotations

import msgspec


class ProcessSection(msgspec.Struct):
    exit_code: int | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    signal: str | None = None  # SIGINT / SIGTERM when the run was interrupted
    target: str | None = None  # the script path, or "-m package.module"
    wall_s: float | None = None  # from the first line of the user's code to its end
    crash_where: str | None = None  # file:line of the innermost frame of the user's code in the traceback
    crash_module: str | None = None  # the innermost nn.Module whose forward was running, e.g. "Net.head (Linear)"
    # a DataLoader worker's crash: file:line of the user's code in the worker's own traceback (`__getitem__`)
    worker_where: str | None = None

    def measured_rungs(self) -> set[int]:
        return set()  # how the job ended bounds what the verdict can say; it answers no rung itself

    def unmeasured_rungs(self) -> dict[int, str]:
        return {}

    def self_check(self) -> list[str]:
        if self.exception_type is not None and self.exit_code == 0:
            return ["process: an exception was recorded but the exit code is 0"]
        return []
