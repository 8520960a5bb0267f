"""How the user's program ended: exit code, and the exception when it crashed."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class ProcessSection:
    exit_code: int | None = None
    exception_type: str | None = None
    exception_message: str | None = None
    signal: str | None = None  # SIGINT / SIGTERM when the run was interrupted

    def self_check(self) -> list[str]:
        return []
