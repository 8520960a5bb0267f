"""The user's source around each `where`: what lets a fix be written in the user's own names.

The rules are pure and never read files: `gputriage report report.json` must re-render the same findings on another
machine, where the user's files are not. So the run's collector copies, once the job has ended, the few pieces of the
user's source that the findings point at (`collectors/source_capture.py`): the whole function around each `where`
line (or a window of lines when the function is long), and the lines of each file that assign a device
(`device = torch.device(...)`), since a fix should move tensors with the expression the script already uses, and the
framework calls that choose the device for the script (`Trainer(accelerator="cpu")`). The rules read these snippets
through `rules/codefix.py`.

Bounded: at most MAX_SNIPPETS snippets of at most MAX_SNIPPET_LINES lines each.
"""

from __future__ import annotations

import ast

import msgspec

MAX_SNIPPETS = 48
MAX_SNIPPET_LINES = 200
WINDOW_LINES = 30  # on each side of the line, when the enclosing function is longer than MAX_SNIPPET_LINES
MAX_DEVICE_LINES = 12  # device assignments kept per file
# A string that names a device (`"cuda"`, `"cuda:0"`): the collector finds a torch.device compared with one
# (a device-compare snippet) and the rule reads the comparison back out of the line, both by this one pattern.
DEVICE_STRING = r"(?:cuda|cpu|mps|xpu|meta)(?::[0-9]+)?"


class SourceSnippet(msgspec.Struct):
    path: str  # as the `where` strings write it: relative to the working directory when below it
    first_line: int  # 1-based number of the first line of `text`
    text: str
    # function (a whole def) | window (lines around a where) | device (one device assignment) | device-choice (a
    # framework call with a device keyword: `Trainer(accelerator="cpu")`, `Accelerator(cpu=True)`) | move (a
    # module-level statement that moves a name in place: `labels = labels.cuda()`) | device-compare (a line that
    # compares a torch.device with a string: `if device == "cuda":`, always False)
    kind: str = "function"
    function: str | None = None  # qualified name of the enclosing function, e.g. "GPT.forward"
    # For a method: whether its class is an nn.Module by its bases in this file (`nn.Module`, `LightningModule`, a
    # class of the file that is one): True, False (a plain class: `object`, none, or the file's plain classes), None
    # (a base from elsewhere, or not a method). A fix may use `next(self.parameters())` only in a Module.
    module_class: bool | None = None

    @property
    def last_line(self) -> int:
        return self.first_line + self.text.count("\n")

    def line(self, number: int) -> str | None:
        """The text of line `number` of the file, when this snippet holds it."""
        if not self.first_line <= number <= self.last_line:
            return None
        return self.text.split("\n")[number - self.first_line]


class SourceSection(msgspec.Struct):
    snippets: list[SourceSnippet] = msgspec.field(default_factory=list)

    def measured_rungs(self) -> set[int]:
        return set()  # it measures nothing: it lets the fixes speak the user's code

    def unmeasured_rungs(self) -> dict[int, str]:
        return {}

    def self_check(self) -> list[str]:
        problems = []
        for s in self.snippets:
            if s.first_line < 1:
                problems.append(f"source: snippet of {s.path} starts at line {s.first_line}")
        if len(self.snippets) > MAX_SNIPPETS:
            problems.append(f"source: {len(self.snippets)} snippets, at most {MAX_SNIPPETS} expected")
        return problems

    def around(self, where: str | None) -> SourceSnippet | None:
        """The function (or window) snippet that holds the `where` line, or None."""
        parsed = split_where(where)
        if parsed is None:
            return None
        path, line = parsed
        holding = [s for s in self.snippets if s.path == path and s.first_line <= line <= s.last_line]
        for kinds in (("function", "window"), ("move",)):  # a move's own snippet only where nothing wider holds it
            for s in holding:
                if s.kind in kinds:
                    return s
        return None

    def device_compares(self) -> list[SourceSnippet]:
        return [s for s in self.snippets if s.kind == "device-compare"]

    def moves(self, path: str) -> list[SourceSnippet]:
        return [s for s in self.snippets if s.kind == "move" and s.path == path]

    def device_lines(self, path: str) -> list[SourceSnippet]:
        return [s for s in self.snippets if s.kind == "device" and s.path == path]

    def device_choices(self) -> list[SourceSnippet]:
        """The framework calls that choose the job's device (`Trainer(accelerator=...)`), in every captured file."""
        return [s for s in self.snippets if s.kind == "device-choice"]


def split_where(where: str | None) -> tuple[str, int] | None:
    """'train.py:42' -> ('train.py', 42); None for anything else."""
    if not where:
        return None
    path, sep, line = where.rpartition(":")
    if not sep or not path or not line.isdigit():
        return None
    return path, int(line)


def in_place_move(node: ast.AST) -> str | None:
    """`x` for `x = x.cuda()` or `x = x.to(...)`: a name moved to the device in place (the source capture keeps such
    module-level statements, kind `move`; the fixes move a forgotten tensor beside them, in their words)."""
    if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
        return None
    call, name = node.value, node.targets[0].id
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in ("cuda", "to")):
        return None
    return name if isinstance(call.func.value, ast.Name) and call.func.value.id == name else None


def same_move(node: ast.AST, name: str) -> str:
    """`label = label.cuda()` for `name`, in the words of the in-place move `node` (`item = item.cuda()`)."""
    assert isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
    call = node.value
    assert isinstance(call.func, ast.Attribute)
    arguments = ", ".join([*map(ast.unparse, call.args), *map(ast.unparse, call.keywords)])
    return f"{name} = {name}.{call.func.attr}({arguments})"
