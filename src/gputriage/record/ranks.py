"""Distributed facts: which rank a record belongs to, and the merged per-rank view."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class RankInfo:
    rank: int
    world_size: int
    local_rank: int | None = None
    local_world_size: int | None = None
    node: str | None = None  # hostname
    backend: str | None = None  # the process group backend: nccl | gloo | ...


@dataclass
class RanksSection:
    """The merged view of several rank records (filled by the merge step, never by a collective)."""

    world_size: int = 0
    ranks: list[RankInfo] = field(default_factory=list)

    def self_check(self) -> list[str]:
        seen = [r.rank for r in self.ranks]
        if len(set(seen)) != len(seen):
            return [f"ranks: duplicate rank numbers {seen}"]
        return []
