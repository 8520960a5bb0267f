"""Rung 4: where the computation ran (op census) and where the step blocked on the device (host syncs)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ComputeSection:
    # device type -> ops counted in the probe window
    ops_per_device: dict[str, int] = field(default_factory=dict)

    def self_check(self) -> list[str]:
        return []
