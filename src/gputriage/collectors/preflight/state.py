"""The one stand-in device of this process: its settings and counters, set by the preflight while it runs."""

from __future__ import annotations

import contextlib
import enum
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import torch

from gputriage.collectors.identity import IdentityMap
from gputriage.collectors.preflight.rng import StandInRng


class Backing(enum.Enum):
    CPU = "cpu"  # the stand-in computes for real on the CPU
    META = "meta"  # shapes only; host reads get placeholders


@dataclass
class PlaceholderRead:
    kind: str  # scalar (item/bool/float/int) | tolist | cpu
    where: str | None
    code: str | None
    count: int = 0


@dataclass
class StandInState:
    backing: Backing = Backing.CPU
    device_count: int = 1
    current_index: int = 0
    backing_s: float = 0.0  # host time spent computing the stand-in's ops (a GPU would run them asynchronously)
    rng: StandInRng = field(default_factory=StandInRng)
    # tensors that pin_memory() returned: is_pinned() says True for them, as for page-locked memory (keyed by
    # identity: a tensor's __eq__ is elementwise)
    pinned: IdentityMap[torch.Tensor, bool] = field(default_factory=IdentityMap)
    placeholder_reads: dict[tuple[str, str | None], PlaceholderRead] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    # called with the kind of each host sync that only the stand-in sees (torch.cuda.synchronize(), event waits)
    sync_listeners: list[Callable[[str], None]] = field(default_factory=list)
    _depth: int = 0

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        """Count the time of a torch call on stand-in tensors as the stand-in's (the outermost call only): its
        compute, and gputriage's checks and wrapping around it, which a GPU run does not pay."""
        if self._depth:
            yield
            return
        self._depth += 1
        start_s = time.perf_counter()
        try:
            yield
        finally:
            self.backing_s += time.perf_counter() - start_s
            self._depth -= 1

    def backing_device(self) -> torch.device:
        return torch.device(self.backing.value)

    def reset(self, backing: Backing, device_count: int) -> None:
        self.backing = backing
        self.device_count = device_count
        self.current_index = 0
        self.backing_s = 0.0
        self.rng = StandInRng()
        self.pinned = IdentityMap()
        self.placeholder_reads = {}
        self.sync_listeners = []


STATE = StandInState()
