"""Replace attributes of torch (never of the user's objects) for a while, and put the originals back.

One helper for every collector that patches: the probes and the distributed observer.

Two rules keep a patch invisible to the user's job:
- A wrapper is named after the attribute it occupies (`__module__`, `__qualname__`), so pickle, which saves a function
  by looking up `module.qualname` and checking it finds the same object, saves it by reference and loads the real
  attribute back. (`functools.wraps` alone copies the *original's* name, and then neither the original nor the wrapper
  resolves to itself while the patch is on: that is the `Can't pickle <function DataLoader.__init__>: it's not the same
  object` error.) The originals are held only here, and nothing of the user's refers to this object.
- A wrapper that outlives its patch (the user's code took a reference to it while the patch was on: `from
  torch.distributed import all_reduce`) calls the original and nothing else.
- An exception that passes through a wrapper leaves without the wrapper's frames in its traceback (`hide_own_frames`),
  so a traceback the user's own code prints is the one Python would print. A wrapper of a builtin that TorchScript
  knows (`same_builtin=True`) is known to TorchScript as that builtin while it is installed.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

from gputriage.collectors.usercode import is_own_file

_MISSING = object()


class Patches:
    """A set of attribute replacements, restored together, last first."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, Any]] = []
        self._builtins: list[tuple[Any, Any]] = []  # (original, wrapper) known to TorchScript as one builtin
        self.active = False

    def set(self, owner: Any, name: str, value: Any) -> None:
        """Install `value` as `owner.name` as it is (a wrapper that checks `self.active` itself, or a plain value)."""
        # Look in the owner's own __dict__: an inherited method is restored by deleting the override.
        self._saved.append((owner, name, owner.__dict__.get(name, _MISSING), value))
        if callable(value) and isinstance(value, types.FunctionType):
            _name_after(value, owner, name)
        setattr(owner, name, value)
        self.active = True

    def wrap(self, owner: Any, name: str, make: Callable[..., Any], *, same_builtin: bool = False) -> None:
        """Replace `owner.name` by a wrapper calling `make(original, *args, **kwargs)` while these patches are active,
        and the original once they are restored: if another library wrapped ours meanwhile, or the user's code kept a
        reference to it, ours stays in that chain but does nothing."""
        original = getattr(owner, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self.active:
                return original(*args, **kwargs)
            try:
                return make(original, *args, **kwargs)
            except BaseException as exc:
                hide_own_frames(exc)
                raise  # a bare raise adds no frame of ours back

        installed = _own_code(wrapper)
        self.set(owner, name, installed)
        if same_builtin:
            self._builtins.append((original, installed))
            _alias_builtin(original, installed)

    def restore(self) -> None:
        self.active = False
        restored = bool(self._builtins or self._saved)
        while self._builtins:
            _unalias_builtin(*self._builtins.pop())
        while self._saved:
            owner, name, old, ours = self._saved.pop()
            if owner.__dict__.get(name, _MISSING) is not ours:
                continue  # wrapped again by someone else since: taking ours out would drop theirs
            if old is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, old)
        if restored:
            _forget_compiler_tables()

    def __bool__(self) -> bool:
        return bool(self._saved)


def _forget_compiler_tables() -> None:
    """torch.compile resolves torch's functions by name into a table, once, at its first compile: one made while a
    wrapper of ours stood in for `torch.binary_cross_entropy_with_logits` knows the wrapper, not the function put back,
    and a later `fullgraph=True` compile of a direct call to it failed. The table is rebuilt from the names again."""
    rules = sys.modules.get("torch._dynamo.trace_rules")
    clear = getattr(rules, "clear_lru_cache", None)
    if callable(clear):
        with contextlib.suppress(Exception):  # a torch without this cache: nothing to forget
            clear()


# torch's frames that a dispatch mode adds between it and the op it passes on (torch/_ops.py's OpOverload.__call__),
# and around its handler once Dynamo is loaded (torch._disable_dynamo's wrapper: _compile.py, eval_frame.py)
DISPATCH_FILES = (
    "torch/_compile.py",
    "torch/_dynamo/eval_frame.py",
    "torch/_ops.py",
    "torch/utils/_python_dispatch.py",
)


def hide_own_frames(exc: BaseException, *, passed_on: bool = False) -> None:
    """Drop gputriage's frames from the head of the traceback of `exc`, which is passing through one of them; with
    `passed_on` (a dispatch mode's handler), also torch's frames of the op it passed on, which plain code has not."""
    tb = exc.__traceback__
    while tb is not None and (
        is_own_file(tb.tb_frame.f_code.co_filename) or (passed_on and is_dispatch_file(tb.tb_frame.f_code.co_filename))
    ):
        tb = tb.tb_next
    exc.__traceback__ = tb


def is_dispatch_file(filename: str) -> bool:
    return filename.replace("\\", "/").endswith(DISPATCH_FILES)


def _builtin_table() -> dict[int, str] | None:
    """TorchScript's map from builtin functions (by id) to their ops, if it has been built in this process."""
    module = sys.modules.get("torch.jit._builtins")
    table = getattr(module, "_builtin_table", None)
    return table if isinstance(table, dict) else None


def _alias_builtin(original: Any, wrapper: Any) -> None:
    table = _builtin_table()
    if table is not None and id(original) in table:
        table[id(wrapper)] = table[id(original)]


def _unalias_builtin(original: Any, wrapper: Any) -> None:
    # Built while our wrapper was installed, the table knows the op by our wrapper: give it back to the original.
    table = _builtin_table()
    if table is not None and id(wrapper) in table:
        table.setdefault(id(original), table.pop(id(wrapper)))


def _name_after(function: types.FunctionType, owner: Any, name: str) -> None:
    """Give `function` the import path of the attribute it is about to occupy (see the module docstring)."""
    if isinstance(owner, types.ModuleType):
        function.__module__, function.__qualname__ = owner.__name__, name
        return
    module = getattr(owner, "__module__", None)
    owner_qualname = getattr(owner, "__qualname__", None)
    if isinstance(module, str) and isinstance(owner_qualname, str):
        function.__module__, function.__qualname__ = module, f"{owner_qualname}.{name}"


# Removers of probes that may still be installed when the interpreter shuts down (a `gputriage.session()` never
# stopped, a notebook kernel exiting mid-window). Weak: a finished probe is not kept alive for this.
_AT_EXIT: list[weakref.WeakMethod[Callable[[], None]]] = []
_REGISTERED: list[bool] = []


def remove_at_exit(remover: Callable[[], None]) -> None:
    """Call the bound method `remover` when the main thread ends, before the user's own atexit handlers run (they may
    save or copy a model: nothing of ours may be installed by then). Idempotent removers only."""
    if not _REGISTERED:
        register = getattr(threading, "_register_atexit", None)  # runs before atexit's handlers and thread joins
        try:
            (register or atexit.register)(_remove_all)
        except RuntimeError:  # the interpreter is already shutting down
            return
        _REGISTERED.append(True)
    _AT_EXIT[:] = [ref for ref in _AT_EXIT if ref() is not None]
    _AT_EXIT.append(weakref.WeakMethod(remover))


def _remove_all() -> None:
    while _AT_EXIT:
        remover = _AT_EXIT.pop()()
        if remover is not None:
            with contextlib.suppress(Exception):
                remover()


# Our handles live under negative ids: torch numbers every hook handle from one counter, and the user's code sees
# those numbers (`model._forward_hooks` keys), so taking one would change what the job prints.
_OWN_IDS = itertools.count(1)


def quiet_hook(register: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`register(*args, **kwargs)` for one of torch's process-wide hooks, without advancing torch's handle counter.

    The hook keeps its place in its dict (it is the last one in it now); the handle removes it as usual.
    """
    from torch.utils.hooks import RemovableHandle

    before = RemovableHandle.next_id
    handle = register(*args, **kwargs)
    hooks = handle.hooks_dict_ref()
    if hooks is None or RemovableHandle.next_id != before + 1 or handle.id not in hooks or handle.extra_dict_ref:
        return handle
    own_id = -next(_OWN_IDS)
    hook = hooks.pop(handle.id)
    hooks[own_id] = hook
    handle.id = own_id
    RemovableHandle.next_id = before
    return handle


def _own_code(wrapper: Any) -> types.FunctionType:
    """The wrapper with a code object of its own. Every wrapper is the same closure, so all shared one code object,
    and Dynamo, which tells nn.Module's own methods by their code (`_nn_module_method_ids`), took the wrapper of
    `nn.Module.__setattr__` for the wrapper of `nn.Module.to`: a forward that sets an attribute (`self.calls = ...`)
    could not be compiled with `fullgraph=True`, and broke the graph without it."""
    own = types.FunctionType(
        wrapper.__code__.replace(), wrapper.__globals__, wrapper.__name__, wrapper.__defaults__, wrapper.__closure__
    )
    own.__kwdefaults__ = wrapper.__kwdefaults__
    functools.update_wrapper(own, wrapper)  # the original's name, doc and __wrapped__, as functools.wraps gave it
    own.__dict__.update(wrapper.__dict__)
    return own
