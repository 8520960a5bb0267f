"""Rungs 2 and 3: where the model's parameters and the data entering it actually were."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PlacementSection:
    # device -> number of parameter/buffer elements there, for the top-level model
    model_devices: dict[str, int] = field(default_factory=dict)
    input_devices: dict[str, int] = field(default_factory=dict)

    def self_check(self) -> list[str]:
        return []
