"""The one stand-in device of this process: its settings and counters, set by the preflight while it runs."""

from __future__ import annotations

import contextlib
import enum
import os
import threading
import time
from collections.abc import Callable, Iterator

import msgspec
import torch

from gputriage.collectors.identity import IdentityMap
from gputriage.collectors.preflight.rng import StandInRng


class Backing(enum.Enum):
    CPU = "cpu"  # the stand-in computes for real on the CPU
    META = "meta"  # shapes only; host reads get placeholders


class PlaceholderRead(msgspec.Struct):
    kind: str  # scalar (item/bool/float/int) | tolist | cpu
    where: str | None
    code: str | None
    count: int = 0


class StandInState(msgspec.Struct):
    backing: Backing = Backing.CPU
    device_count: int = 1
    current_index: int = 0
    backing_s: float = 0.0  # host time spent computing the stand-in's ops (a GPU would run them asynchronously)
    # the job's torch calls that the preflight's mode saw outside the stand-in's timed compute, and what the mode adds
    # to each one (measured at the start, mode_cost.py): host time a GPU run does not pay either
    mode_calls: int = 0
    mode_call_s: float = 0.0
    rng: StandInRng = msgspec.field(default_factory=StandInRng)
    # tensors that pin_memory() returned: is_pinned() says True for them, as for page-locked memory (keyed by
    # identity: a tensor's __eq__ is elementwise)
    pinned: IdentityMap[torch.Tensor, bool] = msgspec.field(default_factory=IdentityMap)
    placeholder_reads: dict[tuple[str, str | None], PlaceholderRead] = msgspec.field(default_factory=dict)
    lock: threading.Lock = msgspec.field(default_factory=threading.Lock)
    # called with the kind of each host sync that only the stand-in sees (torch.cuda.synchronize(), event waits)
    sync_listeners: list[Callable[[str], None]] = msgspec.field(default_factory=list)
    # what this run pickled from stand-in tensors (torch.save), by content: a checkpoint holds plain CPU tensors,
    # and torch.load puts these back on the stand-in, as a GPU run's load puts cuda tensors back on cuda
    saved: dict[tuple[int, bytes], int] = msgspec.field(default_factory=dict)
    owner_pid: int = msgspec.field(
        default_factory=os.getpid
    )  # the job's process; a DataLoader worker is forked from it
    used: bool = False  # the job touched the device: CUDA is initialised, and a forked child cannot use it
    _depth: int = 0
    _open_since_s: float = 0.0  # when the outermost timed call now running began

    @contextlib.contextmanager
    def timed(self) -> Iterator[None]:
        """Count the time of a torch call on stand-in tensors as the stand-in's (the outermost call only): its
        compute, and gputriage's checks and wrapping around it, which a GPU run does not pay."""
        if self._depth:
            yield
            return
        self._depth += 1
        start_s = self._open_since_s = time.perf_counter()
        try:
            yield
        finally:
            self.backing_s += time.perf_counter() - start_s
            self._depth -= 1

    def count_mode_call(self) -> None:
        """A torch call the mode saw; inside the stand-in's timed compute it is already in backing_s."""
        if not self._depth:
            self.mode_calls += 1

    def spent_s(self) -> float:
        """The host time the stand-in cost the job: its compute, and its mode's cost on every other torch call. A call
        still running counts up to now: `loss.backward()` is one timed call around the whole backward pass, and the
        phase clock reads this inside it, at the end of the backward phase."""
        open_s = time.perf_counter() - self._open_since_s if self._depth else 0.0
        return self.backing_s + open_s + self.mode_calls * self.mode_call_s

    def touch_device(self) -> None:
        """CUDA's rule for a forked child (a DataLoader worker that makes or moves a tensor onto the device in
        __getitem__): once the parent initialised CUDA, the child cannot, and CUDA says so."""
        if os.getpid() == self.owner_pid:
            self.used = True
        elif self.used:
            raise RuntimeError(FORKED_CUDA_ERROR)

    def remember_saved(self, storage: torch.UntypedStorage, index: int) -> None:
        if len(self.saved) < MAX_SAVED_STORAGES:
            self.saved[storage_key(storage)] = index

    def saved_index(self, storage: torch.UntypedStorage) -> int | None:
        """The stand-in index a loaded storage was saved from during this run; None for any other storage."""
        return self.saved.get(storage_key(storage)) if self.saved else None

    def backing_device(self) -> torch.device:
        return torch.device(self.backing.value)

    def reset(self, backing: Backing, device_count: int) -> None:
        self.backing = backing
        self.device_count = device_count
        self.current_index = 0
        self.backing_s = 0.0
        self.mode_calls = 0
        self.mode_call_s = 0.0
        self.rng = StandInRng()
        self.pinned = IdentityMap()
        self.placeholder_reads = {}
        self.sync_listeners = []
        self.saved = {}
        self.owner_pid = os.getpid()
        self.used = False


FORKED_CUDA_ERROR = (
    "Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the 'spawn' "
    "start method"
)
MAX_SAVED_STORAGES = 100_000  # at most ~30 MB of keys (256 bytes each), whatever the job saves
_KEY_EDGE_BYTES = 128


def storage_key(storage: torch.UntypedStorage) -> tuple[int, bytes]:
    """A storage's identity across a save and a load: its size and its first and last bytes (all of them when
    small). Another storage of the same size with the same edges would be taken for it: a cost of at most 256 bytes
    read per storage, against hashing a model's every weight."""
    size = storage.nbytes()
    if size == 0 or storage.device.type != "cpu":
        return (size, b"")
    view = torch.empty(0, dtype=torch.uint8).set_(storage).numpy()
    if size <= 2 * _KEY_EDGE_BYTES:
        return (size, view.tobytes())
    return (size, view[:_KEY_EDGE_BYTES].tobytes() + view[-_KEY_EDGE_BYTES:].tobytes())


STATE = StandInState()
