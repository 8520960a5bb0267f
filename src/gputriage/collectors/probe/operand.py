"""Whose tensor the host operand of a device-mismatch crash is.

The line that crashed is rarely the line to change: the CPU tensor may be a parameter of a layer that the script
built and never moved (kept in a plain list, so the model's .to() missed it), an attribute of a plain object (a noise
scheduler's tables), or a variable the script made on the CPU far from the model (a prompt for `generate`). At the
crash, the tensor is looked up by identity (or through the view it is: `self.weight.T`, `idx[:, -8:]`) among the
modules gputriage saw built, the objects and the variables of the user's frames in the traceback; the assignment that
made it is then found in the user's source. Nothing here runs before the crash, and nothing raises into the job.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import linecache
from collections.abc import Callable, Iterable, Iterator
from types import FrameType, TracebackType
from typing import Any

import msgspec
import torch
from torch import nn

from gputriage.collectors.probe.state import storage_address
from gputriage.collectors.usercode import is_user_file, short_path
from gputriage.data.torch_api import FACTORIES

MAX_FRAMES = 64  # user frames of a traceback looked at
MAX_MODULES = 2_000  # modules searched for the tensor's owner
MAX_OTHERS = 8  # the owner's other host tensors named


class Holder(msgspec.Struct):
    """What holds the tensor: `owner` (a module or a plain object) under `name`, or a frame's variable `name`."""

    kind: str  # parameter | buffer | attribute | variable
    name: str
    owner: Any = None
    frame: FrameType | None = None
    line: int = 0  # the frame's line at the crash


def _is_one_of(value: Any, tensors: list[torch.Tensor]) -> bool:
    return any(value is t for t in tensors)


def module_member(module: nn.Module, tensors: list[torch.Tensor]) -> tuple[str, str] | None:
    """(kind, name) when one of `tensors` is this module's own parameter, buffer or plain tensor attribute."""
    own = vars(module)
    for kind, members in (("parameter", own.get("_parameters") or {}), ("buffer", own.get("_buffers") or {})):
        for name, value in members.items():
            if _is_one_of(value, tensors):
                return kind, name
    for name, value in own.items():
        if isinstance(value, torch.Tensor) and _is_one_of(value, tensors):
            return "attribute", name
    return None


def user_frames(tb: TracebackType | None) -> list[tuple[FrameType, int]]:
    """(frame, line) of the user's code in a traceback, outermost first."""
    frames: list[tuple[FrameType, int]] = []
    while tb is not None and len(frames) < MAX_FRAMES:
        if is_user_file(tb.tb_frame.f_code.co_filename):
            frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    return frames


def find_holder(
    tensors: list[torch.Tensor], frames: list[tuple[FrameType, int]], modules: Iterable[nn.Module]
) -> Holder | None:
    """The module, the object or the variable that holds one of `tensors` (the operand, the tensor it is a view of:
    `self.weight.T`, `idx[:, -8:]`), looked for in the user's `frames` of the traceback (user_frames) and among
    `modules`; the most specific wins: an owner's member names the object to fix, a variable only the name the script
    used."""
    owners = [f.f_locals.get("self") for f, _ in reversed(frames)]
    searched: list[nn.Module] = [m for m in owners if isinstance(m, nn.Module)]
    for module in (*searched, *itertools.islice(modules, MAX_MODULES)):
        found = module_member(module, tensors)
        if found is not None:
            return Holder(found[0], found[1], module)
    for obj in owners:
        if obj is None or isinstance(obj, nn.Module):
            continue
        for name, value in _attributes(obj):
            if isinstance(value, torch.Tensor) and _is_one_of(value, tensors):
                return Holder("attribute", name, obj)
    return outermost_variable(tensors, frames)


def _attributes(obj: Any) -> list[tuple[str, Any]]:
    try:
        return list(vars(obj).items())
    except TypeError:
        return []  # no __dict__ (slots, builtins)


def outermost_variable(values: list[Any], frames: list[tuple[FrameType, int]]) -> Holder | None:
    """The outermost user frame where one of `values` is bound to a name the frame made (not a parameter, which its
    caller passed in): where the tensor (or the object) came from."""
    return _outermost(frames, lambda value: _is_one_of(value, values))


def variable_sharing_storage(address: int, frames: list[tuple[FrameType, int]]) -> Holder | None:
    """The outermost variable a frame made whose tensor lies in the storage at `address`: the operand was a temporary
    of it (`rewards.detach() - values`), which no name holds."""
    return _outermost(frames, lambda value: isinstance(value, torch.Tensor) and storage_address(value) == address)


def _outermost(frames: list[tuple[FrameType, int]], matches: Callable[[Any], bool]) -> Holder | None:
    for frame, line in frames:  # outermost first: the first frame that made it is where it came from
        code = frame.f_code
        parameters = set(code.co_varnames[: code.co_argcount + code.co_kwonlyargcount])
        for name, value in _frame_names(frame):
            if name not in parameters and name != "self" and matches(value):
                return Holder("variable", name, frame=frame, line=line)
    return None


def _frame_names(frame: FrameType) -> list[tuple[str, Any]]:
    try:
        return list(frame.f_locals.items())
    except Exception:
        return []


def assignment_line(frame: FrameType, name: str, line: int) -> int | None:
    """The line of the last assignment to `name` in the frame's function (or module body) before `line`; the first
    one in the scope when none comes before (a loop that rebinds it)."""
    tree = _tree(frame.f_code.co_filename)
    if tree is None:
        return None
    scope = _scope(tree, frame.f_code)
    if scope is None:
        return None
    lines = sorted(_assigned_lines(scope, name))
    # not the running line itself: `output, hidden = rnn(x, hidden)` reads hidden before it binds it again
    before = [n for n in lines if n < line]
    return before[-1] if before else (lines[0] if lines else None)


def attribute_line(cls: type, name: str) -> str | None:
    """file:line of the first `self.<name> = ...` in the class's own source."""
    filename = _class_file(cls)
    tree = _tree(filename) if filename else None
    if tree is None or filename is None:
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == cls.__name__:
            lines = [
                n.lineno
                for n in ast.walk(node)
                if isinstance(n, (ast.Assign, ast.AnnAssign)) and any(_is_self_attribute(t, name) for t in _targets(n))
            ]
            if lines:
                return f"{short_path(filename)}:{min(lines)}"
    return None


def _class_file(cls: type) -> str | None:
    for value in vars(cls).values():
        code = getattr(value, "__code__", None)
        if code is not None and is_user_file(code.co_filename):
            return str(code.co_filename)
    return None


def _is_self_attribute(node: ast.expr, name: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == name
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


@functools.lru_cache(maxsize=16)
def _tree(filename: str) -> ast.Module | None:
    text = "".join(linecache.getlines(filename))
    if not text:
        return None
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError):
        return None


def _scope(tree: ast.Module, code: Any) -> ast.AST | None:
    """The function the frame runs (matched by its first line, decorators included), or the module."""
    if code.co_name == "<module>":
        return tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == code.co_name:
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            if code.co_firstlineno in (first, node.lineno):
                return node
    return None


def _assigned_lines(scope: ast.AST, name: str) -> Iterator[int]:
    """Lines that bind `name` in this scope, not in the functions or classes nested in it."""
    body = list(ast.iter_child_nodes(scope))
    while body:
        node = body.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.For, ast.AsyncFor, ast.With, ast.AsyncWith)):
            if any(_binds(t, name) for t in _targets(node)):
                yield node.lineno
        elif isinstance(node, ast.NamedExpr) and _binds(node.target, name):
            yield node.lineno
        body.extend(ast.iter_child_nodes(node))


def _targets(node: ast.AST) -> list[ast.expr]:
    if isinstance(node, ast.Assign):
        return list(node.targets)
    if isinstance(node, (ast.AnnAssign, ast.For, ast.AsyncFor)):
        return [node.target]
    if isinstance(node, (ast.With, ast.AsyncWith)):
        return [item.optional_vars for item in node.items if item.optional_vars is not None]
    return []


def _binds(target: ast.expr, name: str) -> bool:
    if isinstance(target, ast.Name):
        return target.id == name
    if isinstance(target, (ast.Tuple, ast.List)):
        return any(_binds(t, name) for t in target.elts)
    if isinstance(target, ast.Starred):
        return _binds(target.value, name)
    return False


def frame_where(frame: FrameType, line: int) -> str:
    return f"{short_path(frame.f_code.co_filename)}:{line}"


def host_tensors(obj: Any, skip: str) -> list[str]:
    """Names of the object's other tensor attributes on the CPU (not 0-d scalars)."""
    names = []
    for name, value in _attributes(obj):
        if name != skip and isinstance(value, torch.Tensor) and value.device.type == "cpu" and value.dim() > 0:
            names.append(name)
            if len(names) >= MAX_OTHERS:
                break
    return names


def producer_line(frame: FrameType, line: int) -> str | None:
    """file:line of the tensor factory inside the user's function that the assignment at `line` calls (`hidden =
    rnn.initHidden()`, whose `return torch.zeros(1, self.hidden_size)` made the tensor), or None."""
    tree = _tree(frame.f_code.co_filename)
    node = _statement_at(tree, line) if tree is not None else None
    call = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if not isinstance(call, ast.Call):
        return None
    func = _resolved(call.func, frame)
    code = getattr(getattr(func, "__func__", func), "__code__", None)
    if code is None or not is_user_file(code.co_filename):
        return None
    callee = _tree(code.co_filename)
    scope = _scope(callee, code) if callee is not None else None
    if scope is None:
        return None
    for ret in ast.walk(scope):
        if isinstance(ret, ast.Return) and ret.value is not None and _factory_in(ret.value):
            return f"{short_path(code.co_filename)}:{ret.lineno}"
    return None


def _statement_at(tree: ast.Module, line: int) -> ast.stmt | None:
    found = [n for n in ast.walk(tree) if isinstance(n, ast.stmt) and n.lineno == line]
    return found[-1] if found else None


_MAX_ATTRIBUTE_DEPTH = 4


def _resolved(expr: ast.expr, frame: FrameType) -> Any:
    """The object a call's `name` or `name.attr.attr` names in the frame, by attribute lookups only (nothing is
    called), or None."""
    chain: list[str] = []
    while isinstance(expr, ast.Attribute) and len(chain) < _MAX_ATTRIBUTE_DEPTH:
        chain.append(expr.attr)
        expr = expr.value
    if not isinstance(expr, ast.Name):
        return None
    names = frame.f_locals
    value = names[expr.id] if expr.id in names else frame.f_globals.get(expr.id)
    for attr in reversed(chain):
        try:
            value = inspect.getattr_static(value, attr)
        except AttributeError:
            submodules = dict(_attributes(value)).get("_modules")  # an nn.Module's children are not attributes
            if not isinstance(submodules, dict) or attr not in submodules:
                return None
            value = submodules[attr]
    return value


def _factory_in(node: ast.expr) -> bool:
    for call in ast.walk(node):
        if isinstance(call, ast.Call):
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
            if name in FACTORIES and not any(k.arg == "device" for k in call.keywords):
                return True
    return False
