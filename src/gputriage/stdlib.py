"""The standard library modules gputriage uses that torch does not load, taken from the standard library itself.

`gputriage run` imports most of its code while the user's script runs, with the script's folder first on `sys.path`:
a project's own `statistics.py` was what the probes got for `import statistics` (trial 10: "an observer failed
(AttributeError: module 'statistics' has no attribute 'median')"). These modules are loaded here with only the
interpreter's own folders on the path, and taken out of `sys.modules` again where they were not there before (they
alone: what they imported stays), so the script's own `import statistics` finds its file as under plain python.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

_NAMES = ("statistics", "decimal", "html", "shlex", "sysconfig")


def _interpreter_path() -> list[str]:
    """sys.path without the project's folders (the script's, the current one): the standard library and
    site-packages, which lie under the interpreter's prefixes."""
    prefixes = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix}
    roots = tuple(str(Path(p).resolve()) for p in prefixes)
    return [p for p in sys.path if p and str(Path(p).resolve()).startswith(roots)]


def _load() -> dict[str, ModuleType]:
    taken = {name: sys.modules.pop(name) for name in _NAMES if name in sys.modules}
    saved = sys.path[:]
    sys.path[:] = _interpreter_path()
    try:
        return {name: importlib.import_module(name) for name in _NAMES}
    finally:
        sys.path[:] = saved
        # these names as python left them, so that the script's own import finds its file; only these: another of
        # gputriage's threads may be importing a module meanwhile (the machine probe), and a module taken out of
        # sys.modules before its import has finished fails it with KeyError
        for name in _NAMES:
            del sys.modules[name]
        sys.modules.update(taken)


if TYPE_CHECKING:
    import decimal
    import html
    import shlex
    import statistics
    import sysconfig
else:
    _modules = _load()
    statistics = _modules["statistics"]
    decimal = _modules["decimal"]
    html = _modules["html"]
    shlex = _modules["shlex"]
    sysconfig = _modules["sysconfig"]

__all__ = ["decimal", "html", "shlex", "statistics", "sysconfig"]
