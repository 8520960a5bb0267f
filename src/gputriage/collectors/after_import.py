"""Call a function once a module has been imported, by whoever imports it first, without importing it ourselves.

`gputriage run` starts its torch probes when the job's own `import torch` has run, not before the script's first
line: torch read the environment when it loaded (OMP_NUM_THREADS, MKL_NUM_THREADS and the like), so a script that
sets them at its top, before `import torch`, had them ignored. The dispatch modes are wrapped for Dynamo when the job
loads Dynamo (probe/modes.py). This module imports nothing of torch.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.util
import sys
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType


class AfterImport(importlib.abc.MetaPathFinder):
    """Calls `then` once the module `name` has been executed: found by the finders after this one, its loader is
    wrapped for the one import, and the module keeps its own loader."""

    def __init__(self, name: str, then: Callable[[], None]) -> None:
        self.name = name
        self.then = then
        self._finding = False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname != self.name or self._finding:
            return None
        self._finding = True
        try:
            spec = importlib.util.find_spec(fullname)  # the finders after this one (this one declines meanwhile)
        finally:
            self._finding = False
        if spec is None or spec.loader is None:
            return spec
        # The finder stays until the module is executed: a library that asks whether torch is installed
        # (`importlib.util.find_spec("torch")`, as transformers does on import) gets a spec it never loads, and the
        # job's own `import torch` must still find this finder (trial 10: the preflight never started)
        spec.loader = ThenLoader(spec.loader, self.then, self)
        return spec


class ThenLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader, then: Callable[[], None], finder: AfterImport) -> None:
        self.loader = loader
        self.then = then
        self.finder = finder

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        forget(self.finder)
        module.__loader__ = self.loader  # the module is left as its own loader made it
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        with contextlib.suppress(Exception):  # never into the job's import
            self.then()


def after_import(name: str, then: Callable[[], None]) -> AfterImport | None:
    """Call `then()` (its errors suppressed: never into the job's import) once `name` has been executed. The finder
    is returned, to be taken out with `forget()` when the import never came; None when one is already waiting."""
    if any(isinstance(f, AfterImport) and f.name == name and f.then == then for f in sys.meta_path):
        return None
    finder = AfterImport(name, then)
    sys.meta_path.insert(0, finder)
    return finder


def forget(finder: AfterImport | None) -> None:
    """Take out a finder whose import never came (the job ended without it)."""
    if finder is not None:
        with contextlib.suppress(ValueError):  # it took itself out when the import came
            sys.meta_path.remove(finder)
