"""Copy the pieces of the user's source that the record points at into the record (record/source.py).

When the job has ended, every `where` the collectors wrote (model and tensor sites, the crash line, CPU ops, sampled
lines, the DataLoader) is looked up in its file: the whole enclosing function is kept (a window of lines around it
when the function is long, or when the line is at module level), and so are the file's device assignments
(`device = torch.device(...)`). The rules then write fixes with the user's own variable names from these snippets,
and `gputriage report report.json` gives the same fixes on a machine without the user's files.

Only the user's files are read (the `where` lines already are the user's code), each at most once, at most
MAX_FILE_BYTES each; nothing here raises into the job.
"""

from __future__ import annotations

import ast
import contextlib
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from gputriage.record import Run
from gputriage.record.source import (
    DEVICE_STRING,
    MAX_DEVICE_LINES,
    MAX_SNIPPET_LINES,
    MAX_SNIPPETS,
    WINDOW_LINES,
    SourceSection,
    SourceSnippet,
    in_place_move,
    split_where,
)

MAX_FILE_BYTES = 2_000_000
_SKIPPED_SECTIONS = ("source", "environment", "gpu", "trace", "ranks")  # no user lines, or not ours to resolve


class SourceCapture:
    """Observer: at finish, snippets of the user's code around the record's `where` lines."""

    def __init__(self) -> None:
        self._start_dir = Path.cwd()

    def start(self, run: Run) -> None:
        with contextlib.suppress(OSError):
            self._start_dir = Path.cwd()  # the script may chdir; `where` paths are relative to where it started

    def finish(self, run: Run) -> None:
        uses = [t.where for t in run.placement.tensors if t.where] if run.placement is not None else []
        section = capture(list(record_wheres(run)), [self._start_dir, Path.cwd()], uses)
        run.source = section if section.snippets else None


def record_wheres(run: Run) -> Iterator[str]:
    """Every `where`-like string of the record's sections, in record order, once each."""
    doc = msgspec.to_builtins(run)
    seen: set[str] = set()
    for name, value in doc.items():
        if name in _SKIPPED_SECTIONS:
            continue
        for where in _walk(value):
            if where not in seen:
                seen.add(where)
                yield where


def _walk(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, str) and (key == "where" or key.endswith("_where")) and split_where(item):
                yield item
            else:
                yield from _walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item)


def capture(wheres: list[str], roots: list[Path], uses: list[str] | None = None) -> SourceSection:
    """The snippets around `wheres`; then, for each tensor's call in `uses` (`output = model(data)`), the functions
    elsewhere in its file that make the same call with the same name (`test()`'s loop beside `train()`'s): a fix
    that moves the batch in one loop and not in the other leaves the script crashing there on a GPU."""
    section = SourceSection()
    files: dict[str, _File | None] = {}
    described: set[str] = set()  # files whose device lines are in the section
    for where in [*wheres, *_same_calls(uses or [], files, roots)]:
        if len(section.snippets) >= MAX_SNIPPETS:
            break
        parsed = split_where(where)
        if parsed is None or section.around(where) is not None:
            continue
        path, line = parsed
        if path not in files:
            files[path] = _File.read(path, roots)
        source = files[path]
        if source is not None and path not in described:
            described.add(path)
            section.snippets.extend(source.device_snippets(path))
        if source is not None:
            snippet = source.snippet(path, line)
            if snippet is not None:
                section.snippets.append(snippet)
    del section.snippets[MAX_SNIPPETS:]
    return section


MAX_MOVE_LINES = 8  # module-level in-place moves kept per file
MAX_COMPARE_LINES = 4  # comparisons of a torch.device with a string kept per file
MAX_SAME_CALLS = 4  # other statements kept per tensor's call: a file's evaluation loops, not every helper


def _same_calls(uses: list[str], files: dict[str, _File | None], roots: list[Path]) -> Iterator[str]:
    for where in dict.fromkeys(uses):
        parsed = split_where(where)
        if parsed is None:
            continue
        path, line = parsed
        if path not in files:
            files[path] = _File.read(path, roots)
        source = files[path]
        if source is not None:
            yield from (f"{path}:{other}" for other in source.same_calls(line, MAX_SAME_CALLS))


# Python's own line ends (universal newlines): a CRLF file's lines carry no '\r', as its line numbers count them.
_PYTHON_LINE_END = re.compile(r"\r\n?|\n")


class _File:
    def __init__(self, lines: list[str], tree: ast.Module | None) -> None:
        self.lines = lines
        self.tree = tree

    @classmethod
    def read(cls, path: str, roots: list[Path]) -> _File | None:
        for candidate in [Path(path)] if Path(path).is_absolute() else [root / path for root in roots]:
            with contextlib.suppress(OSError, SyntaxError, ValueError, UnicodeDecodeError):
                if not candidate.is_file() or candidate.stat().st_size > MAX_FILE_BYTES:
                    continue
                raw = candidate.read_bytes()
                encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
                source = raw.decode(encoding)
                tree = None
                with contextlib.suppress(SyntaxError, ValueError):
                    tree = ast.parse(source)
                return cls(_PYTHON_LINE_END.split(source), tree)
        return None

    def text(self, first: int, last: int) -> str:
        return "\n".join(self.lines[first - 1 : last])

    def snippet(self, path: str, line: int) -> SourceSnippet | None:
        if not 1 <= line <= len(self.lines):
            return None
        found = _enclosing(self.tree, line) if self.tree is not None else None
        owner = found[2] if found is not None else None
        module = is_module_class(self.tree, owner) if self.tree is not None and owner is not None else None
        if found is not None:
            node, qualname, _ = found
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            last = node.end_lineno or node.lineno
            if last - first < MAX_SNIPPET_LINES:
                return SourceSnippet(path, first, self.text(first, last), "function", qualname, module)
        first = max(1, line - WINDOW_LINES)
        last = min(len(self.lines), line + WINDOW_LINES)
        return SourceSnippet(path, first, self.text(first, last), "window", found[1] if found else None, module)

    def same_calls(self, line: int, limit: int) -> list[int]:
        """The first lines of the statements in other functions of the file that call what the statement at `line`
        calls with the same name in the same place (`model(data)`, `criterion(output, target)`)."""
        if self.tree is None:
            return []
        simple = [n for n in ast.walk(self.tree) if isinstance(n, ast.stmt) and not hasattr(n, "body")]
        here = max(
            (n for n in simple if n.lineno <= line <= (n.end_lineno or n.lineno)), key=lambda n: n.lineno, default=None
        )
        keys = _call_keys(here) if here is not None else set()
        if here is None or not keys:
            return []
        home = _enclosing(self.tree, here.lineno)
        out = []
        for node in sorted(simple, key=lambda n: n.lineno):
            if node is here or not _call_keys(node) & keys:
                continue
            there = _enclosing(self.tree, node.lineno)
            if (there and there[0]) is not (home and home[0]):
                out.append(node.lineno)
                if len(out) >= limit:  # each match walks the file for its function: stop at what is kept
                    break
        return out

    def device_snippets(self, path: str) -> list[SourceSnippet]:
        """The statements that assign a device: `device = ...`, `self.device = ...`, `args.device` is left out."""
        if self.tree is None:
            return []
        out = []
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and any(_names_device(t) for t in _targets(node)):
                last = node.end_lineno or node.lineno
                out.append(SourceSnippet(path, node.lineno, self.text(node.lineno, last), "device", None))
        out.sort(key=lambda s: s.first_line)
        devices = out[:MAX_DEVICE_LINES] + self._cuda_switches(path) + self._device_choices(path)[:MAX_DEVICE_LINES]
        return devices + self._moves(path) + self._string_compares(path)

    def _string_compares(self, path: str) -> list[SourceSnippet]:
        """The lines that compare a `torch.device` with a string (`if device == "cuda":`): a torch.device never
        equals a str, so the test is always False (PyTorch's speech tutorial set its GPU loader options so)."""
        assert self.tree is not None
        devices = {
            ast.unparse(t)
            for node in ast.walk(self.tree)
            if isinstance(node, ast.Assign) and _makes_torch_device(node.value)
            for t in node.targets
            if isinstance(t, (ast.Name, ast.Attribute))
        }
        out: list[SourceSnippet] = []
        for node in ast.walk(self.tree) if devices else ():
            if isinstance(node, ast.Compare) and _compares_to_a_device_string(node, devices):
                out.append(SourceSnippet(path, node.lineno, self.text(node.lineno, node.lineno), "device-compare"))
                if len(out) >= MAX_COMPARE_LINES:
                    break
        return sorted(out, key=lambda s: s.first_line)

    def _moves(self, path: str) -> list[SourceSnippet]:
        """The module-level statements that move a name to the device in place (`labels = labels.cuda()`, `x =
        x.to(device)`): where a tensor the loop uses was left behind, its move goes beside its siblings'."""
        assert self.tree is not None
        out: list[SourceSnippet] = []
        pending: list[ast.stmt] = list(self.tree.body)
        while pending and len(out) < MAX_MOVE_LINES:
            node = pending.pop(0)
            if isinstance(node, (ast.If, ast.With, ast.Try)):
                pending[:0] = [*node.body, *getattr(node, "orelse", [])]
            elif in_place_move(node) is not None:
                last = node.end_lineno or node.lineno
                out.append(SourceSnippet(path, node.lineno, self.text(node.lineno, last), "move", None))
        return out

    def _cuda_switches(self, path: str) -> list[SourceSnippet]:
        """The first `if <switch>:` whose body moves things with `.cuda()` (`if args.cuda: model.cuda()`, pytorch/
        examples' older scripts): a script that names no device still says, there, when it uses the GPU."""
        assert self.tree is not None
        for node in ast.walk(self.tree):
            if isinstance(node, ast.If) and is_cuda_switch(node):
                return [SourceSnippet(path, node.lineno, self.text(node.lineno, node.lineno), "device", None)]
        return []

    def _device_choices(self, path: str) -> list[SourceSnippet]:
        """The statements that call a framework with a device keyword (`trainer = Trainer(accelerator="cpu")`): the
        framework, not a `.to()` of the script, then places the model and the batches."""
        assert self.tree is not None
        out = []
        for node in ast.walk(self.tree):
            if isinstance(node, (ast.Assign, ast.AnnAssign, ast.Expr, ast.Return)) and _chooses_device(node):
                last = node.end_lineno or node.lineno
                out.append(SourceSnippet(path, node.lineno, self.text(node.lineno, last), "device-choice", None))
        out.sort(key=lambda s: s.first_line)
        return out


# Keywords by which Lightning's Trainer/Fabric, accelerate's Accelerator and transformers' TrainingArguments or
# from_pretrained choose where the whole job runs.
DEVICE_CHOICE_KEYWORDS = frozenset({"accelerator", "gpus", "cpu", "no_cuda", "use_cpu", "device_map"})


def _call_keys(node: ast.AST) -> set[tuple[str, str, str]]:
    """(callee, position or keyword, name) for each plain name passed to a call in the statement."""
    keys: set[tuple[str, str, str]] = set()
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        callee = ast.unparse(call.func)
        keys.update((callee, str(i), a.id) for i, a in enumerate(call.args) if isinstance(a, ast.Name))
        keys.update((callee, k.arg, k.value.id) for k in call.keywords if k.arg and isinstance(k.value, ast.Name))
    return keys


def _chooses_device(node: ast.stmt) -> bool:
    return any(
        isinstance(n, ast.Call) and any(k.arg in DEVICE_CHOICE_KEYWORDS for k in n.keywords) for n in ast.walk(node)
    )


_MAX_SWITCH_CHARS = 80  # a switch is a flag or a short test, not a whole expression


_DEVICE_STRINGS = re.compile(rf"^{DEVICE_STRING}$")


def _makes_torch_device(value: ast.expr) -> bool:
    """`torch.device(...)`, alone or in a conditional expression (`torch.device("cuda") if ok else ...`)."""
    calls = [value.body, value.orelse] if isinstance(value, ast.IfExp) else [value]
    return all(isinstance(c, ast.Call) and ast.unparse(c.func) in ("torch.device", "device") for c in calls)


def _compares_to_a_device_string(node: ast.Compare, devices: set[str]) -> bool:
    if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.Eq, ast.NotEq)):
        return False
    left, right = node.left, node.comparators[0]
    for a, b in ((left, right), (right, left)):
        if ast.unparse(a) in devices and isinstance(b, ast.Constant) and isinstance(b.value, str):
            return bool(_DEVICE_STRINGS.match(b.value))
    return False


def is_cuda_switch(node: ast.If) -> bool:
    """`if args.cuda:` / `if use_cuda:` / `if torch.cuda.is_available():` over statements that each call `.cuda()`
    with no argument (a device index, `.cuda(args.gpu)`, is another scheme)."""
    if len(ast.unparse(node.test)) > _MAX_SWITCH_CHARS or not node.body:
        return False
    return all(
        any(
            isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "cuda" and not n.args
            for n in ast.walk(stmt)
        )
        for stmt in node.body
    )


def _targets(node: ast.Assign | ast.AnnAssign) -> list[ast.expr]:
    return list(node.targets) if isinstance(node, ast.Assign) else [node.target]


def _names_device(target: ast.expr) -> bool:
    if isinstance(target, ast.Name):
        return "device" in target.id.lower()
    if isinstance(target, ast.Attribute):
        return "device" in target.attr.lower()
    if isinstance(target, ast.Tuple):
        return any(_names_device(t) for t in target.elts)
    return False


def _enclosing(
    tree: ast.Module, line: int
) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef, str, ast.ClassDef | None] | None:
    """The innermost def around `line`, its qualified name, and the class it is a method of (None: not a method)."""
    best: tuple[ast.FunctionDef | ast.AsyncFunctionDef, str, ast.ClassDef | None] | None = None

    def visit(node: ast.AST, prefix: str, owner: ast.ClassDef | None) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                visit(child, prefix, None)  # a loop or an `if __name__ == "__main__":` block may hold a def
            elif child.lineno <= line <= (child.end_lineno or child.lineno):
                if isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.", child)
                else:
                    best = (child, f"{prefix}{child.name}", owner)
                    visit(child, f"{prefix}{child.name}.<locals>.", None)

    visit(tree, "", None)
    return best


# Bases that make a class an nn.Module: torch's own (`nn.Module`, `torch.nn.Linear`, `nn.Sequential`) and the
# frameworks' (`LightningModule`, `pl.LightningModule`)
def _module_base(name: str) -> bool:
    parts = name.split(".")
    return parts[-1] in ("Module", "LightningModule") or "nn" in parts[:-1]


def is_module_class(tree: ast.Module, cls: ast.ClassDef, depth: int = 0) -> bool | None:
    """Whether `cls` subclasses nn.Module, by its bases and the file's own classes; None where a base is not known."""
    if depth > 8:
        return None
    own = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
    answers: list[bool | None] = []
    for base in cls.bases:
        name = ast.unparse(base)
        if _module_base(name):
            return True
        if name == "object" or name.split(".")[-1] in ("ABC", "Generic", "Protocol", "NamedTuple", "Enum"):
            answers.append(False)
        elif name in own and own[name] is not cls:
            answers.append(is_module_class(tree, own[name], depth + 1))
        else:
            answers.append(None)
    return False if all(a is False for a in answers) else (True if True in answers else None)
