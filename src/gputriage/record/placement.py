"""Rungs 2 and 3: where the model's parameters and the data entering it actually were."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class ModelInfo:
    """The top-level model, as seen by the first forward pre-hook."""

    name: str  # class name, e.g. "ResNet"
    parameter_count: int = 0
    # device -> number of parameter and buffer elements there
    devices: dict[str, int] = field(default_factory=dict)
    where: str | None = None  # file:line where the model was built or moved


@dataclass
class PlacementSection:
    models: list[ModelInfo] = field(default_factory=list)

    def self_check(self) -> list[str]:
        return []
