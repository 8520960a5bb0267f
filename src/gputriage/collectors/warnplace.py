"""Warnings keep the place Python would give them without gputriage.

A warning names a frame: the innermost Python frame for torch's C++ warnings, `stacklevel` frames up for Python's.
While gputriage's wrappers and modes sit between the user's code and torch, that frame can be one of ours, and then
the warning would show gputriage's file and line instead of the user's, and be counted as already shown for the
wrong place (Python shows a warning once per place by default). While the probes are in, a warning Python placed on
one of our frames is placed again, on the first frame above our wrapper: the frame that would have been there without
it. It is re-issued there with that place's registry and module, so the user's filters and "once" apply as usual.

Which frame: Python walked `stacklevel` frames out from where the warning was issued and stopped on ours; without our
frames it would have walked as many frames as it counted of ours further out, our frames not counted.
"""

from __future__ import annotations

import os
import sys
import warnings
from types import FrameType
from typing import Any

from gputriage.collectors.patching import Patches
from gputriage.collectors.usercode import is_own_file

# torch's dispatch of a torch function to a mode or a tensor subclass: its frames exist only while gputriage's are in.
_OVERRIDES = f"torch{os.sep}overrides.py"
# `python -m gputriage` runs through runpy: its frames sit above the script's own top, where a plain run has none.
_RUNPY = ("<frozen runpy>", f"{os.sep}runpy.py")


class WarningPlaces:
    """Installed for as long as any probe is; `warnings._showwarnmsg` is what Python calls to show a warning."""

    def __init__(self) -> None:
        self._patches = Patches()

    def start(self) -> None:
        if not self._patches:
            self._patches.wrap(warnings, "_showwarnmsg", self._show)

    def stop(self) -> None:
        self._patches.restore()

    def _show(self, original: Any, msg: warnings.WarningMessage) -> Any:
        if not is_own_file(msg.filename) and not msg.filename.endswith((_OVERRIDES, *_RUNPY)):
            return original(msg)
        # 0: this frame, 1: the patch's wrapper, 2: the innermost frame when the warning was issued
        ours, place = place_without_ours(sys._getframe(2), msg.filename, msg.lineno)
        if ours is None:
            return original(msg)
        if place is None:  # Python walked past the script's own top: without gputriage the stack ran out there
            return warnings.warn_explicit(
                msg.message,
                msg.category,
                "sys",
                1,
                module="sys",
                registry=sys.__dict__.setdefault("__warningregistry__", {}),
                source=msg.source,
            )
        # our place was marked as shown: forget it, or the same warning from another user line would be dropped
        registry = ours.f_globals.get("__warningregistry__")
        if isinstance(registry, dict):
            registry.clear()
        return warnings.warn_explicit(
            msg.message,
            msg.category,
            place.f_code.co_filename,
            place.f_lineno,
            registry=place.f_globals.setdefault("__warningregistry__", {}),
            module_globals=place.f_globals,
            source=msg.source,
        )


def place_without_ours(
    start: FrameType | None, filename: str, lineno: int
) -> tuple[FrameType | None, FrameType | None]:
    """(our frame at filename:lineno, the frame Python would have named without gputriage's frames), searching out
    from `start`, the innermost frame when the warning was issued.

    Python walked out some frames from `start` and stopped on ours; without gputriage, the stack is this one less the
    frames that exist only because of it, and Python would have walked as many of those frames."""
    frames: list[FrameType] = []
    frame = start
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    named = next((i for i, f in enumerate(frames) if _is_at(f, filename, lineno)), None)
    if named is None:
        return None, None
    dropped = _ours_only(frames)
    walk = sum(1 for i in range(named + 1) if i in dropped)  # frames Python counted that a plain run lacks
    i = named
    while walk > 0:
        i += 1
        if i >= len(frames):
            return frames[named], None
        walk -= i not in dropped
    return frames[named], frames[i]


def _is_at(frame: FrameType, filename: str, lineno: int) -> bool:
    return (
        frame.f_code.co_filename == filename
        and frame.f_lineno == lineno
        and (_ours_or_dispatch(frame) or frame.f_code.co_filename.endswith(_RUNPY))
    )


def _ours_only(frames: list[FrameType]) -> set[int]:
    """The frames (by index, innermost first) that only gputriage's modes and stand-in put there: ours; torch's
    `handle_torch_function`, which a torch function calls only when a mode or a tensor subclass is active; and the
    torch function's first entry just outside it (it calls itself again through the mode, and only that entry runs)."""
    dropped: set[int] = set()
    for i, frame in enumerate(frames):
        if is_own_file(frame.f_code.co_filename):
            dropped.add(i)
        elif _is_dispatch(frame):
            dropped.update((i, i + 1))
    # everything older than the script's own top (the outermost frame running __main__'s module code) is gputriage's
    # start-up: runpy, the CLI, the runner; a plain run's stack ends at the script
    main_globals = getattr(sys.modules.get("__main__"), "__dict__", None)
    top = max(
        (i for i, f in enumerate(frames) if f.f_globals is main_globals and f.f_code.co_name == "<module>"),
        default=None,
    )
    if top is not None:
        dropped.update(range(top + 1, len(frames)))
    return dropped


def _ours_or_dispatch(frame: FrameType) -> bool:
    return is_own_file(frame.f_code.co_filename) or _is_dispatch(frame)


def _is_dispatch(frame: FrameType) -> bool:
    code = frame.f_code
    return code.co_name == "handle_torch_function" and code.co_filename.endswith(_OVERRIDES)
