"""Host reads of tensors that hold no values (a meta backing, or `--expect-device meta`): placeholders.

`.item()`, `bool()`, `float()`, `.tolist()` and `.cpu()` of a meta tensor raise in torch. A script written for a GPU
reads its loss every few steps, and libraries read masks in `if` statements, so the run would end at step 0. The
placeholder is deterministic and of the right shape and dtype: 1 for numbers, False for booleans (so that a NaN check
`if torch.isnan(loss).any(): raise` passes, and a ratio never divides by zero). Each read is recorded with its line:
control flow that depends on it may differ from a real run, and the report says where.
"""

from __future__ import annotations

import linecache
import sys
from typing import Any

import torch

from gputriage.collectors.preflight.state import STATE, PlaceholderRead
from gputriage.collectors.probe.modes import OwnDispatchMode
from gputriage.collectors.usercode import frame_where, user_frame

aten = torch.ops.aten
MAX_SITES = 64


def placeholder_scalar(dtype: torch.dtype) -> bool | int | float | complex:
    if dtype == torch.bool:
        return False
    if dtype.is_complex:
        return complex(1.0)
    if dtype.is_floating_point:
        return 1.0
    return 1


def placeholder_tensor(like: torch.Tensor, device: str | torch.device = "cpu") -> torch.Tensor:
    record_read("cpu")
    value = placeholder_scalar(like.dtype)
    return torch.full(tuple(like.shape), value, dtype=like.dtype, device=device)


def record_read(kind: str) -> None:
    """Remember the user's line that read a placeholder (the first MAX_SITES distinct lines)."""
    frame = user_frame(sys._getframe(1))
    where = frame_where(frame)
    key = (kind, where)
    with STATE.lock:
        entry = STATE.placeholder_reads.get(key)
        if entry is None:
            if len(STATE.placeholder_reads) >= MAX_SITES:
                return
            code = None
            if frame is not None:
                code = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip() or None
            entry = STATE.placeholder_reads[key] = PlaceholderRead(kind=kind, where=where, code=code)
        entry.count += 1


class MetaHostReads(OwnDispatchMode):
    """For scripts written for `meta` (`--expect-device meta`): host reads of meta tensors return placeholders.
    Compiled code runs without it (`ignore_compile_internals`), as under the op census: torch.compile refuses to
    compile with fullgraph=True under a user's dispatch mode, and without it ran the step eagerly."""

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple[Any, ...] = (), kwargs: dict[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func is aten._local_scalar_dense.default and _is_meta(args[0]):
            record_read("scalar")
            return placeholder_scalar(args[0].dtype)
        if func is aten._to_copy.default and _is_meta(args[0]):
            target = kwargs.get("device")
            if target is not None and torch.device(target).type != "meta":
                out = placeholder_tensor(args[0], target)
                dtype = kwargs.get("dtype")
                return out if dtype is None else out.to(dtype)
        if func is aten.copy_.default and _is_meta(args[1]) and not _is_meta(args[0]):
            record_read("cpu")
            return args[0].fill_(placeholder_scalar(args[1].dtype))
        return func(*args, **kwargs)


def _is_meta(value: Any) -> bool:
    return isinstance(value, torch.Tensor) and value.device.type == "meta"


def placeholder_sites() -> list[PlaceholderRead]:
    return sorted(STATE.placeholder_reads.values(), key=lambda r: -r.count)
