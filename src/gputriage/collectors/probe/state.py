"""State shared by the probes of one observed process."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field

from gputriage.collectors.probe.clock import PhaseClock


@dataclass
class ProbeState:
    expected_device: str  # device type: cuda | mps | xpu | meta | cpu
    clock: PhaseClock = field(default_factory=PhaseClock)
    owner_pid: int = field(default_factory=os.getpid)
    owner_thread: int = field(default_factory=threading.get_ident)  # the thread that runs the training loop
    in_loader: int = 0  # > 0 while DataLoader.__next__ runs (its modules are transforms, not the model)
    in_loss: int = 0  # > 0 inside a loss module's call while placement watches (its F.* call is the same loss)
    in_sync_call: int = 0  # > 0 inside a Python-level sync wrapper, so the dispatch census does not count it twice
    step: int = 0  # index of the step that is running now

    @property
    def in_child(self) -> bool:
        """True in a forked DataLoader worker: the probes there must do nothing."""
        return os.getpid() != self.owner_pid
