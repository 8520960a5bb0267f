"""How a stand-in tensor is told apart, below every module that needs to ask: the two attributes it keeps.

`tensor.py` defines the stand-in's class and stores these attributes; `checks.py` and the others only read them, so
none of them imports the class (which dispatches into the checks).
"""

from __future__ import annotations

from typing import Any

import torch

BACKING = "_gputriage_backing"  # the one attribute the stand-in keeps in the tensor's __dict__
INDEX = "_gputriage_index"


def is_stand_in(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and INDEX in value.__dict__


def backing_of(t: torch.Tensor) -> torch.Tensor:
    return t.__dict__[BACKING]  # type: ignore[no-any-return]


def index_of(t: torch.Tensor) -> int:
    return t.__dict__[INDEX]  # type: ignore[no-any-return]
