"""What is the user's code, and which line of it is running: the one answer every collector uses.

The user's code is what is not torch, not gputriage, not the standard library and not an installed package (the
bundled demo job plays the user's code). Cheap enough for hooks: each file name is judged once.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path
from types import FrameType, TracebackType

from gputriage.stdlib import sysconfig


def _torch_dir() -> str | None:
    """torch's package folder, found without importing torch (this module is imported before the user's code)."""
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(next(iter(spec.submodule_search_locations)))


_OWN_DIR = str(Path(__file__).resolve().parent.parent)  # the gputriage package
_OWN_PREFIX = _OWN_DIR + os.sep
_FRAMEWORK_DIRS = tuple(str(Path(p).resolve()) + os.sep for p in {_torch_dir(), _OWN_DIR} if p is not None)
_LIBRARY_DIRS = _FRAMEWORK_DIRS + tuple(
    str(Path(p).resolve()) + os.sep
    for p in {
        sysconfig.get_paths()["stdlib"],
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
        # console-script launchers (`gputriage`, `torchrun`, `accelerate`): a frame of theirs sits at the bottom of
        # every stack of a job started through them, and is never the user's line
        sysconfig.get_paths()["scripts"],
    }
)
# The bundled demo job lives inside the package but plays the user's code.
_DEMO_DIR = str(Path(_OWN_DIR) / "demo") + os.sep
# filename -> is it the user's code; filenames repeat endlessly, the answer never changes
_USER_FILE: dict[str, bool] = {}
_FRAMEWORK_FILE: dict[str, bool] = {}
_OWN_FILE: dict[str, bool] = {}


def is_own_file(filename: str) -> bool:
    """gputriage's own code (not the bundled demo job, which plays the user's): frames that must never show in the
    user's tracebacks or be named as the user's line."""
    known = _OWN_FILE.get(filename)
    if known is None:
        resolved = str(Path(filename).resolve()) if not filename.startswith("<") else filename
        known = resolved.startswith(_OWN_PREFIX) and not resolved.startswith(_DEMO_DIR)
        _OWN_FILE[filename] = known
    return known


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


def is_library_file(filename: str) -> bool:
    return not is_user_file(filename)


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
    """file:line of the user's code that is running right now (failing that, of a library that is not torch)."""
    return frame_where(user_frame(sys._getframe(1)))


def user_where() -> str | None:
    """file:line of the innermost frame of the user's own code now; None when there is none on the stack."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if is_user_file(frame.f_code.co_filename):
            return frame_where(frame)
        frame = frame.f_back
    return None


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


_FRAME_LINE = re.compile(r'^  File "(?P<file>[^"\n]+)", line (?P<line>\d+), in ', re.MULTILINE)


def worker_user_where(message: str | None) -> str | None:
    """file:line of the innermost frame of the user's code in the "Original Traceback" that a DataLoader worker's
    exception carries as text into the training process (its frames are not the main process's traceback)."""
    if not message or "Original Traceback" not in message:
        return None
    found = None
    for frame in _FRAME_LINE.finditer(message.split("Original Traceback", 1)[1]):
        if is_user_file(frame["file"]):
            found = f"{short_path(frame['file'])}:{frame['line']}"
    return found
