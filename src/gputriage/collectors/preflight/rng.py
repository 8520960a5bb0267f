"""The stand-in device's own random stream.

On a GPU, `torch.randn(..., device="cuda")` and dropout draw from the CUDA generator and leave the CPU generator
alone, so the DataLoader's shuffle order does not depend on what the model does. The stand-in keeps that: its random
ops run with the CPU generator swapped to a state of their own, seeded by `torch.cuda.manual_seed(_all)` (which
`torch.manual_seed` calls).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

# torch.cuda's default seed before anyone seeds it: like CUDA's, a fixed value.
DEFAULT_SEED = 67280421310721


class StandInRng:
    def __init__(self) -> None:
        self._state: torch.Tensor | None = None
        self._seed = DEFAULT_SEED

    def manual_seed(self, seed: int) -> None:
        self._seed = int(seed)
        self._state = None

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> torch.Tensor:
        if self._state is None:
            self._state = _state_for_seed(self._seed)
        return self._state.clone()

    def set_state(self, state: torch.Tensor) -> None:
        self._state = state.clone().to("cpu", torch.uint8)

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Run a random op on the stand-in's stream; the CPU stream is left exactly where it was."""
        default = torch.default_generator
        saved = default.get_state()
        default.set_state(self.get_state() if self._state is None else self._state)
        try:
            yield
        finally:
            self._state = default.get_state()
            default.set_state(saved)


def _state_for_seed(seed: int) -> torch.Tensor:
    generator = torch.Generator()
    generator.manual_seed(seed)
    return generator.get_state()
