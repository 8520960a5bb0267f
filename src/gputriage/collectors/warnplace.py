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

import sys
import warnings
from types import FrameType
from typing import Any

from gputriage.collectors.patching import Patches
from gputriage.collectors.usercode import is_own_file


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
        if not is_own_file(msg.filename):
            return original(msg)
        # 0: this frame, 1: the patch's wrapper, 2: the innermost frame when the warning was issued
        ours, place = place_without_ours(sys._getframe(2), msg.filename, msg.lineno)
        if ours is None or place is None:
            return original(msg)
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
    from `start`, the innermost frame when the warning was issued."""
    own_below = 0
    frame = start
    while frame is not None:
        own = is_own_file(frame.f_code.co_filename)
        own_below += own
        if own and frame.f_code.co_filename == filename and frame.f_lineno == lineno:
            break
        frame = frame.f_back
    ours = frame
    while frame is not None and own_below > 0:
        frame = frame.f_back
        if frame is not None and not is_own_file(frame.f_code.co_filename):
            own_below -= 1
    return ours, frame
