"""Finding the line of the user's code on the current stack, cheaply enough for hooks."""

from __future__ import annotations

import os
import sys
import sysconfig
from pathlib import Path
from types import FrameType, TracebackType

import torch

import gputriage

_LIBRARY_DIRS = tuple(
    str(Path(p).resolve()) + os.sep
    for p in {
        str(Path(torch.__file__).parent),
        str(Path(gputriage.__file__).parent),
        sysconfig.get_paths()["stdlib"],
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
    }
)
_FRAMEWORK_DIRS = tuple(
    str(Path(p).resolve()) + os.sep for p in {str(Path(torch.__file__).parent), str(Path(gputriage.__file__).parent)}
)
# The bundled demo job lives inside the package but plays the user's code.
_DEMO_DIR = str((Path(gputriage.__file__).parent / "demo").resolve()) + os.sep
# filename -> is it the user's code; filenames repeat endlessly, the answer never changes
_USER_FILE: dict[str, bool] = {}
_FRAMEWORK_FILE: dict[str, bool] = {}


def is_user_file(filename: str) -> bool:
    """The user's code: not torch, not gputriage, not the standard library, not an installed package."""
    known = _USER_FILE.get(filename)
    if known is None:
        resolved = str(Path(filename).resolve()) if not filename.startswith("<") else filename
        known = resolved.startswith(_DEMO_DIR) or (
            not resolved.startswith(_LIBRARY_DIRS) and not filename.startswith("<frozen")
        )
        _USER_FILE[filename] = known
    return known


def is_framework_file(filename: str) -> bool:
    known = _FRAMEWORK_FILE.get(filename)
    if known is None:
        resolved = str(Path(filename).resolve()) if not filename.startswith("<") else filename
        known = resolved.startswith(_FRAMEWORK_DIRS) or filename.startswith("<frozen")
        _FRAMEWORK_FILE[filename] = known
    return known


def user_frame(start: FrameType | None = None) -> FrameType | None:
    """The innermost frame of the user's code; failing that, of any library that is not torch or gputriage.

    A training loop inside Lightning has no user frame at the sync inside `self.log`; the Lightning line is then the
    most useful answer.
    """
    frame: FrameType | None = start if start is not None else sys._getframe(1)
    fallback = None
    while frame is not None:
        filename = frame.f_code.co_filename
        if is_user_file(filename):
            return frame
        if fallback is None and not is_framework_file(filename):
            fallback = frame
        frame = frame.f_back
    return fallback


def frame_where(frame: FrameType | None) -> str | None:
    if frame is None:
        return None
    return f"{short_path(frame.f_code.co_filename)}:{frame.f_lineno}"


def where_now() -> str | None:
    """file:line of the user's code that is running right now."""
    return frame_where(user_frame(sys._getframe(1)))


def short_path(filename: str) -> str:
    """Relative to the working directory when below it, as people read it in their editor."""
    try:
        return str(Path(filename).resolve().relative_to(Path.cwd()))
    except ValueError:
        return filename


def traceback_user_where(tb: TracebackType | None) -> str | None:
    """file:line of the innermost frame of the user's code in a traceback."""
    found = None
    while tb is not None:
        if is_user_file(tb.tb_frame.f_code.co_filename):
            found = f"{short_path(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found
