"""Fixes written in the user's own code: read the snippet around a `where` line (record/source.py) with `ast`.

Pure: the snippets were copied into the record by the collector, so a saved report re-renders the same fixes
anywhere. Every helper returns None when the source is missing or does not have the expected shape, and the rule
then falls back to a generic fix.

- `statement_at`: the statement on a line, parsed from the enclosing function (or alone, from a window of lines);
- `device_expression`: how the script already names its device (`device`, `args.device`, `self.device`, the
  `.to(...)` argument it uses elsewhere, a `device` parameter);
- `moved_argument`: `images = images.to(device, non_blocking=True)` for the argument of `output = model(images)`;
- `register_buffer_fix`: `self.register_buffer("pe", pe)` for `self.pe = pe`;
- `with_device`: the line that makes a tensor, with `device=...` added to its factory call.
"""

from __future__ import annotations

import ast
import copy
import io
import re
import textwrap
import tokenize
from collections.abc import Callable

import msgspec

from gputriage.data.torch_api import FACTORIES, HOST_CONSTRUCTORS
from gputriage.record.placement import TensorSeen
from gputriage.record.source import SourceSection, SourceSnippet, in_place_move, same_move, split_where
from gputriage.wording import listed

# torch functions that make a new tensor and take `device=`.
_NOT_A_DEVICE = ("dtype", "float", "half", "bfloat16", "long", "int", "bool", "double", "memory_format")


class Statement(msgspec.Struct, frozen=True):
    node: ast.stmt
    line: int  # the `where` line
    first_line: int  # the statement's first line in the file
    text: str  # the statement's source, stripped
    snippet: SourceSnippet
    function: ast.FunctionDef | ast.AsyncFunctionDef | None  # the enclosing def, when the snippet is a function
    offset: int  # file line = the parsed tree's line + offset
    indent: int  # columns that dedenting removed before parsing (tree column + indent = file column)
    tree: ast.Module  # what was parsed: the function, the window, or the line alone


def statement_at(source: SourceSection | None, where: str | None) -> Statement | None:
    """The innermost simple statement covering the `where` line."""
    parsed = split_where(where)
    snippet = source.around(where) if source is not None else None
    if parsed is None or snippet is None:
        return None
    line = parsed[1]
    tree = parse_code(snippet.text)
    offset, indent = snippet.first_line - 1, _indent(snippet.text)
    if tree is None and (block := _top_level_block(snippet, line)) is not None:
        # a window that starts inside a class or ends mid-statement: the top-level block that holds the line (a
        # script's training loop below its Dataset class) keeps the loop around the statement
        tree, offset, indent = block[0], block[1], 0
    if tree is None:  # a window cut through a block: the statement that starts on the line, alone
        found_lines = _statement_from(snippet, line)
        if found_lines is not None:
            tree, text = found_lines
            offset, indent = line - 1, _indent(text)
    if tree is None:
        return None
    found = _innermost_statement(tree, line - offset)
    if found is None:
        return None
    # the innermost function that holds the statement: a window at a module's top level may hold a def above the
    # loop, or a class whose method holds the line
    holders = [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.lineno <= found.lineno <= (n.end_lineno or 0)
    ]
    function = max(holders, key=lambda n: n.lineno, default=None)
    first, last = found.lineno + offset, (found.end_lineno or found.lineno) + offset
    text = "\n".join(filter(None, (snippet.line(n) for n in range(first, last + 1))))
    return Statement(
        found, line, first, without_comments(textwrap.dedent(text)), snippet, function, offset, indent, tree
    )


_MAX_STATEMENT_LINES = 40  # lines one statement may span when it is parsed out of a window cut through a block


def _top_level_block(snippet: SourceSnippet, line: int) -> tuple[ast.Module, int] | None:
    """The window from the last top-level statement at or above `line` to its end, cut short at the end until it
    parses; with the offset of its first line. None where the window has no top-level line above `line`."""
    starts = [
        n
        for n in range(snippet.first_line, line + 1)
        if (text := snippet.line(n)) and not text[0].isspace() and not text.startswith(("#", ")", "]", "}"))
    ]
    if not starts:
        return None
    first = starts[-1]
    lines = [snippet.line(n) or "" for n in range(first, snippet.last_line + 1)]
    for end in range(len(lines), line - first, -1):
        try:
            return ast.parse("\n".join(lines[:end])), first - 1
        except (SyntaxError, ValueError):
            continue
    return None


def _statement_from(snippet: SourceSnippet, line: int) -> tuple[ast.Module, str] | None:
    """The statement that starts on `line`, parsed on its own, its following lines added until it parses (a
    module-level `dataloader = DataLoader(` call spread over twelve lines, in a window that starts mid-block)."""
    text = ""
    for number in range(line, min(line + _MAX_STATEMENT_LINES, snippet.last_line + 1)):
        more = snippet.line(number)
        if more is None:
            return None
        text = f"{text}\n{more}" if text else more
        tree = parse_code(text)
        if tree is not None:
            return tree, text
    return None


def branch_at(source: SourceSection | None, where: str | None) -> str | None:
    """The `if` / `while` line whose test is on the `where` line (`if decoder_input.item() == EOS_token:` reads the
    device to decide the loop's path), stripped; None when the line is no such test."""
    parsed = split_where(where)
    snippet = source.around(where) if source is not None and parsed is not None else None
    line = snippet.line(parsed[1]) if snippet is not None and parsed is not None else None
    text = without_comments(line.strip()) if line is not None else ""
    return text if _BRANCH.match(text) else None


_BRANCH = re.compile(r"^(?:if|elif|while)\b.*:")


def without_comments(code: str) -> str:
    """The code with its comments removed (a fix shows the user's statement, not the notes around it)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return code
    lines = code.split("\n")
    for tok in reversed(tokens):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col]
    return "\n".join(line.rstrip() for line in lines).strip()


def parse_code(text: str) -> ast.Module | None:
    try:
        return ast.parse(textwrap.dedent(text))
    except (SyntaxError, ValueError):
        return None


def _innermost_statement(tree: ast.AST, line: int) -> ast.stmt | None:
    covering = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.stmt)
        and not isinstance(node, _COMPOUND)
        and node.lineno <= line <= (node.end_lineno or node.lineno)
    ]
    return max(covering, key=lambda node: node.lineno, default=None)


_COMPOUND = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.If,
    ast.With,
    ast.AsyncWith,
    ast.Try,
)


# -- the device expression ---------------------------------------------------------------------------------------------


def device_expression(source: SourceSection | None, where: str | None) -> str | None:
    """How the script names the device near `where`: the argument of its own `.to(...)` calls, a `device=` keyword, a
    `device` variable or parameter, or the file's `device = ...` assignment."""
    snippet = source.around(where) if source is not None else None
    if snippet is None or source is None:
        return None
    found = _device_in(window_tree(snippet.text))
    if found is not None:
        return found
    # a switch's snippet is its header alone (`if args.cuda:`), which window_tree parses with an empty body
    parsed_lines = [window_tree(line.text) for line in source.device_lines(snippet.path)]
    firsts = [parsed.body[0] for parsed in parsed_lines if parsed.body]
    for stmt in firsts:
        target = _device_target(stmt)
        if target is not None:
            return target
    # no device named: the script's own switch of its `.cuda()` moves, as the device (`"cuda" if args.cuda else
    # "cpu"`), so that the fix keeps the script's CPU runs working
    for stmt in firsts:
        if isinstance(stmt, ast.If):
            return f'"cuda" if {ast.unparse(stmt.test)} else "cpu"'
    return None


def window_tree(text: str) -> ast.Module:
    """A window of the user's source, parsed whole, or line by line where it is cut inside a block."""
    return parse_code(text) or line_by_line(text)


def line_by_line(text: str) -> ast.Module:
    """The statements of a window that does not parse as a whole (it starts inside a block: "else:", or a loop at
    a module's top level cut mid-way), each line parsed on its own, a block's header with an empty body: what the
    script moves its tensors to still shows (`X = X.to(args.device)`), and so do its tests (`if step % 10 == 0:`)."""
    body: list[ast.stmt] = []
    for line in text.splitlines():
        code = line.strip()
        parsed = parse_code(code + " pass" if code.endswith(":") else code) if code else None
        if parsed is not None:
            body.extend(parsed.body)
    return ast.Module(body=body, type_ignores=[])


def _device_in(tree: ast.AST) -> str | None:
    candidates: dict[str, int] = {}
    for node in ast.walk(tree):
        expr = None
        if isinstance(node, ast.Call):
            expr = _moved_to(node) if _is_to_call(node) else _cuda_index(node) or _device_keyword(node)
        elif isinstance(node, ast.arg) and node.arg == "device":
            candidates["device"] = candidates.get("device", 0) + 1
        elif _names_accelerator(node):
            # Hugging Face accelerate: the device the script's Accelerator placed the model on
            candidates["accelerator.device"] = candidates.get("accelerator.device", 0) + 1
        elif isinstance(node, ast.Assign):
            target = _device_target(node)
            if target is not None and "." not in target:
                candidates[target] = candidates.get(target, 0) + 1
        if expr is not None and isinstance(expr, (ast.Name, ast.Attribute)):
            text = ast.unparse(expr)
            candidates[text] = candidates.get(text, 0) + 2  # a device the script already moves things to
    return max(candidates, key=lambda k: (candidates[k], k == "device")) if candidates else None


def _cuda_index(call: ast.Call) -> ast.expr | None:
    """The device index of `.cuda(self.cuda_index)`: the script's own name of its GPU (`.to()` takes it too)."""
    if isinstance(call.func, ast.Attribute) and call.func.attr == "cuda" and len(call.args) == 1:
        return call.args[0]
    return None


def _names_accelerator(node: ast.AST) -> bool:
    """`accelerator` as a parameter, or assigned from `Accelerator(...)`."""
    if isinstance(node, ast.arg):
        return node.arg == "accelerator"
    if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
        made_by = ast.unparse(node.value.func).rsplit(".", 1)[-1]
        return made_by == "Accelerator" and any(ast.unparse(t) == "accelerator" for t in node.targets)
    return False


def _is_to_call(call: ast.Call) -> bool:
    return isinstance(call.func, ast.Attribute) and call.func.attr == "to"


def _device_keyword(call: ast.Call) -> ast.expr | None:
    return next((kw.value for kw in call.keywords if kw.arg == "device"), None)


def _moved_to(call: ast.Call) -> ast.expr | None:
    """The device of a `.to(...)` call: its `device=` keyword, else its first argument unless that is a dtype."""
    keyword = _device_keyword(call)
    if keyword is not None:
        return keyword
    return call.args[0] if call.args and not _dtype_like(call.args[0]) else None


def _dtype_like(node: ast.expr) -> bool:
    text = ast.unparse(node)
    return text.startswith(("torch.float", "torch.int", "torch.bool", "torch.half", "torch.bfloat", "torch.long")) or (
        isinstance(node, ast.Attribute) and node.attr in _NOT_A_DEVICE
    )


def _device_target(stmt: ast.stmt) -> str | None:
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
    for target in targets:
        if isinstance(target, (ast.Name, ast.Attribute)) and "device" in ast.unparse(target).lower():
            return ast.unparse(target)
    return None


# -- moving an argument ---------------------------------------------------------------------------------------------


def call_argument(stmt: Statement, argument: str | None, callee: str | None) -> ast.expr | None:
    """The expression passed as `argument` ("args[0]", "labels", "input_ids") to the call on the line.

    `callee` is what the probe saw being called: a module class ("Net", "CrossEntropyLoss") or a functional loss
    ("cross_entropy"). A keyword that came from `**batch` gives `batch` itself (a ast.Starred-like dict spread).
    """
    calls = [n for n in ast.walk(stmt.node) if isinstance(n, ast.Call)]
    if not calls or not argument:
        return None
    index = _positional_index(argument)
    for call in _rank_calls(calls, callee):
        starred = _starred_at(call, index)
        if starred is not None:
            return starred  # `model(*inputs)`: the tensor is one of `inputs`
        if index is not None and index < len(call.args) and not isinstance(call.args[index], ast.Starred):
            if _literal(call.args[index]):
                continue  # `.squeeze(-1)`, `.max(1)`: a number is never the tensor the probe saw
            return call.args[index]
        if index is None:
            key = argument.split("[", 1)[0]
            named = next((kw.value for kw in call.keywords if kw.arg == key), None)
            if named is not None:
                return named
            spread = next((kw.value for kw in call.keywords if kw.arg is None), None)
            if spread is not None:
                return spread
    return None


def _starred_at(call: ast.Call, index: int | None) -> ast.Starred | None:
    """The `*name` that positional argument `index` came from: the first starred argument at or before it."""
    if index is None:
        return None
    for position, arg in enumerate(call.args[: index + 1]):
        if isinstance(arg, ast.Starred):
            return arg if isinstance(arg.value, ast.Name) and position <= index else None
    return None


def moved_starred(name: str, device: str) -> str:
    """`inputs = tuple(...)` that moves every tensor of `model(*inputs)`, leaving any other element as it is."""
    return f"{name} = tuple(t.to({device}, non_blocking=True) if torch.is_tensor(t) else t for t in {name})"


def _literal(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp):
        node = node.operand
    return isinstance(node, ast.Constant)


def _positional_index(argument: str) -> int | None:
    if argument.startswith("args[") and "]" in argument:
        inner = argument[5 : argument.index("]")]
        return int(inner) if inner.isdigit() else None
    return None


def _rank_calls(calls: list[ast.Call], callee: str | None) -> list[ast.Call]:
    """The calls of the line, the one most likely to be `callee` first."""

    def score(call: ast.Call) -> int:
        name = ast.unparse(call.func).split(".")[-1].lower()
        wanted = (callee or "").lower()
        if wanted and name == wanted:
            return 0
        if isinstance(call.func, ast.Attribute) and isinstance(call.func.value, (ast.Call, ast.Subscript)):
            return 4  # a method chained on a result (`.gather(...)`, `.squeeze(-1)`): not a module's call
        if wanted.endswith("loss") and ("loss" in name or "criterion" in name):
            return 1
        a_loss = "loss" in name or "criterion" in name
        if not wanted.endswith("loss") and not a_loss and name not in FACTORIES:
            # `loss_fn(model(x), y)`: the model's input is the inner call's, not the loss's first argument
            return 2 if not ast.unparse(call.func).startswith("torch.") else 3
        return 3

    return sorted(calls, key=score)


def moved_already(expr: ast.expr) -> str | None:
    """The device an argument is already moved to in the code (`x.to(device)` -> "device", `x.cuda()` -> "cuda"), or
    None when it is not moved where it is passed."""
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)):
        return None
    if expr.func.attr == "cuda":
        return "cuda"
    target = _moved_to(expr) if _is_to_call(expr) else None
    return ast.unparse(target) if target is not None else None


def cpu_moves_of_call(stmt: Statement, expr: ast.expr) -> list[ast.Call]:
    """`loss = criterion(out.cpu(), y.cpu())`: the script itself moves the call's arguments to the CPU, so the fix
    drops every `.cpu()` among them; moving one back would leave the other on the CPU, and the call would fail on a
    GPU. Empty when `expr` is no `.cpu()` of its own."""
    own = _cpu_call(expr)
    if own is None:
        return []
    call = next(
        (n for n in ast.walk(stmt.node) if isinstance(n, ast.Call) and any(a is expr for a in _arguments(n))), None
    )
    found = [c for a in _arguments(call) if (c := _cpu_call(a)) is not None] if call is not None else []
    return found or [own]


def _arguments(call: ast.Call) -> list[ast.expr]:
    return [*call.args, *(k.value for k in call.keywords)]


def _cpu_call(expr: ast.expr) -> ast.Call | None:
    """`x.cpu()` as the argument itself."""
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "cpu":
        return expr if not expr.args and not expr.keywords else None
    return None


def without_cpu(stmt: Statement, calls: list[ast.Call]) -> str:
    """The statement with the `.cpu()` of each call dropped, as code."""
    spans = {(c.lineno, c.col_offset, c.end_lineno, c.end_col_offset) for c in calls}

    class _Drop(ast.NodeTransformer):
        def visit_Call(self, node: ast.Call) -> ast.AST:
            self.generic_visit(node)
            if (node.lineno, node.col_offset, node.end_lineno, node.end_col_offset) in spans:
                assert isinstance(node.func, ast.Attribute)
                return node.func.value
            return node

    return ast.unparse(_Drop().visit(copy.deepcopy(stmt.node)))


def moved_argument(stmt: Statement, expr: ast.expr, device: str, argument: str | None = None) -> str:
    """The line that moves `expr` to the device, in the script's names: `images = images.to(device, ...)` for a name,
    else the statement itself with `.to(device, ...)` on the argument (`model(batch[0].to(device, ...))`). An argument
    the code already moves (`model(x.to(device))`) that still arrived on the CPU is not moved twice: what is wrong is
    where its device points when the script runs, and the line says so."""
    text = ast.unparse(expr)
    target = moved_already(expr)
    if target is not None:
        return (
            f"# {text} is moved already, yet arrived on the CPU: {target} names the CPU when this runs "
            f"(check where {target} is set, and that torch.cuda.is_available() is True)"
        )
    element = container_element(expr, argument)
    if element is not None:  # `lstm(x, (h0, c0))`: the tensor is one name of the tuple written in the call
        return f"{element.id} = {element.id}.to({device}, non_blocking=True)"
    if in_container(argument) and isinstance(expr, ast.Name):
        # `model(inputs, states)` with states = (h, c): a tuple has no .to(); each of its tensors moves
        return f"{text} = tuple(t.to({device}, non_blocking=True) for t in {text})"
    if in_container(argument):
        return f"# move each tensor of {text} to {device} before this line"
    if isinstance(expr, ast.Name):
        return f"{text} = {text}.to({device}, non_blocking=True)"
    return _moved_expression(stmt, expr, device)


def _moved_expression(stmt: Statement, expr: ast.expr, device: str) -> str:
    """An argument written out in the call: the batch it indexes moved whole (`batch_indexed`), else the statement
    with `.to(device, ...)` on the argument."""
    whole = batch_indexed(stmt, expr)
    if whole is not None:
        return whole_batch_moved(whole, device, by_key=isinstance(_index(expr), str))
    text = ast.unparse(expr)
    inline = with_suffix(stmt, expr, f".to({device}, non_blocking=True)")
    return inline if inline is not None else f"# pass {text}.to({device}, non_blocking=True) instead of {text}"


def _index(expr: ast.expr) -> object:
    """The constant index of `batch[0]` / `batch["x"]`, else None."""
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant):
        return expr.slice.value
    return None


def batch_indexed(stmt: Statement, expr: ast.expr) -> str | None:
    """`data` for `model(data[0])` inside `for ..., data in ...:`, where the loop takes another element of it too
    (`criterion(out, data[1])`): moving the one element that crashed leaves the next one to crash on the next line (a
    trial: accelerate's `data[0]`, then `data[1]`), so the whole batch moves once."""
    index = _index(expr)
    if index is None or not isinstance(expr, ast.Subscript) or not isinstance(expr.value, ast.Name):
        return None
    name = expr.value.id
    loop = enclosing_loop(stmt)
    if loop is None or name not in {n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)}:
        return None
    others = {
        _index(n)
        for n in ast.walk(loop)
        if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name
    }
    return name if len(others - {None, index}) > 0 else None


def whole_batch_moved(name: str, device: str, *, by_key: bool) -> str:
    """Every tensor of a batch the loop indexes moved once, its other values left as they are."""
    moved = f"to({device}, non_blocking=True)"
    if by_key:
        return f"{name} = {{k: v.{moved} if torch.is_tensor(v) else v for k, v in {name}.items()}}"
    return f"{name} = [t.{moved} if torch.is_tensor(t) else t for t in {name}]"


def container_element(expr: ast.expr, argument: str | None) -> ast.Name | None:
    """The name at the probe's inner index of a tuple or list written in the call: `(h0, c0)` and "args[1][1]" give
    `c0`; None otherwise."""
    if not in_container(argument) or not isinstance(expr, (ast.Tuple, ast.List)) or argument is None:
        return None
    inner = argument.rsplit("[", 1)[1].rstrip("]")
    if not inner.isdigit() or int(inner) >= len(expr.elts):
        return None
    element = expr.elts[int(inner)]
    return element if isinstance(element, ast.Name) else None


def in_container(argument: str | None) -> bool:
    """The probe saw the tensor inside a tuple or list passed as the argument: "args[1][0]", "hx[1]"."""
    return argument is not None and argument.count("[") > (1 if argument.startswith("args[") else 0)


def with_suffix(stmt: Statement, node: ast.expr, suffix: str) -> str | None:
    """The statement with `suffix` written right after `node` (e.g. `.to(device)` after `Net()`), in the user's own
    formatting; None when the node spans several lines."""
    if node.lineno != node.end_lineno or node.end_col_offset is None:
        return None
    line_no = node.lineno + stmt.offset
    line = stmt.snippet.line(line_no)
    if line is None:
        return None
    col = node.end_col_offset + stmt.indent
    if not 0 < col <= len(line):
        return None
    fixed = f"{line[:col]}{suffix}{line[col:]}"
    lines = [stmt.snippet.line(n) or "" for n in range(stmt.first_line, line_no)] + [fixed]
    return without_comments(textwrap.dedent("\n".join(lines)))


def assigned_call(stmt: Statement) -> tuple[str, ast.Call] | None:
    """(target, call) for `target = SomeCall(...)` on the line, e.g. ("net", Net())."""
    node = stmt.node
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call):
        return ast.unparse(node.targets[0]), node.value
    return None


def built_call(stmt: Statement, class_name: str | None = None) -> ast.Call | None:
    """The call that builds the model on this line: `net = Net()`'s, or, where the module is built inside an
    expression (`self.layers = self.layers + [Layer(a, b)]`), the call of its class."""
    found = assigned_call(stmt)
    if found is not None:
        return found[1]
    if class_name is None:
        return None
    calls = [n for n in ast.walk(stmt.node) if isinstance(n, ast.Call)]
    return next((c for c in calls if ast.unparse(c.func).split(".")[-1] == class_name), None)


def moved_spread(name: str, device: str) -> str:
    """A batch passed as `model(**batch)`: move every tensor of the dict."""
    return f"{name} = {{k: v.to({device}, non_blocking=True) for k, v in {name}.items()}}"


_ONLY_AVAILABILITY = re.compile(
    r"""(?:torch\.device\()?["']cuda(?::0)?["'] if torch\.cuda\.is_available\(\) else ["']cpu["']\)?"""
)


def device_definition(source: SourceSection | None, where: str | None, name: str) -> tuple[str, str] | None:
    """(file:line, text) of the file's assignment of the device variable `name` (`DEVICE = torch.device("cuda" if
    args.backend == "gpu" else "cpu")`), among the device lines the record carries; None when it is not there."""
    parsed = split_where(where)
    if source is None or parsed is None:
        return None
    found = []
    for snippet in source.device_lines(parsed[0]):
        tree = parse_code(snippet.text.strip())
        if tree is not None and tree.body and _device_target(tree.body[0]) is not None:
            targets = [t for n in tree.body if isinstance(n, ast.Assign) for t in n.targets]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                found.append((f"{snippet.path}:{snippet.first_line}", snippet.text.strip()))
    # The one that can choose the CPU where CUDA is available (a flag, a config) is the one that did: a bare
    # `"cuda" if torch.cuda.is_available() else "cpu"` chose CUDA under the preflight.
    deciding = [f for f in found if not _ONLY_AVAILABILITY.fullmatch(f[1].split("=", 1)[-1].strip())]
    chosen = deciding or found
    return chosen[-1] if chosen else None


def device_for(source: SourceSection | None, where: str | None, expected: str) -> tuple[str, list[str]]:
    """The script's own device expression near `where`; failing that, `device` and the line that defines it."""
    found = device_expression(source, where)
    if found is not None:
        return found, []
    return "device", [f'device = torch.device("{expected}")']


def moved_model_line(
    source: SourceSection | None,
    model_where: str | None,
    device: str,
    class_name: str | None = None,
    what: str = "model",
) -> str | None:
    """`net = Net().to(device)` on the line that builds the model (or the module `what` names: a loss)."""
    stmt = statement_at(source, model_where)
    call = built_call(stmt, class_name) if stmt is not None else None
    if stmt is None or call is None:
        return None
    fixed = with_suffix(stmt, call, f".to({device})")
    return f"{fixed}  # line {stmt.first_line}: move the {what} once, before the loop" if fixed is not None else None


def moved_tensor_lines(
    source: SourceSection | None, tensors: list[TensorSeen], device: str, batch_tensors: list[bool] | None = None
) -> list[str]:
    """For each tensor seen off the device: `# before line N: <the call>` and the line that moves it, once each; with
    it, the other tensors of the batch its loop unpacks (see `batch_siblings`)."""
    lines: list[str] = []
    done: set[str] = set()
    found = [(t, _moved_line(source, t, device, batch_tensors)) for t in tensors]
    # A tensor whose call is not in the user's code (a loss that runs inside the library the line calls) reached it
    # from that line: where another tensor of the line has its own move, that move is the fix, not a made-up name.
    named_at = {t.where for t, moved in found if moved is not None}
    for t, own in found:
        if own is None and t.where in named_at:
            continue
        # The call is not in the record's source: say which tensor, and to where, without inventing its name.
        shown = f"{t.dtype}{t.shape}" if t.dtype else "the tensor"
        generic = (f"before {t.where}", f"# move {t.target}'s {t.argument} ({shown}) to {device} before this call")
        before, line, note = own or (*generic, None)
        moves = [m for m in line.split("\n") if m not in done]
        if not moves:
            continue
        done.update(moves)
        if before not in done:
            lines.append(f"# {before}")
            done.add(before)
        lines.extend([note, *moves] if note else moves)
    return lines


# Calls that hand out a batch without being where it is made: iterating a loader, taking the next item.
_NOT_PRODUCERS = frozenset({"next", "iter", "enumerate", "zip", "list", "tuple", "range", "len", "print"})


def _producer_note(stmt: Statement, expr: ast.expr) -> str | None:
    """`# Y comes from get_batch(split): ...` when the argument was assigned, just before, from the script's own
    function: every caller of it gets the same host tensor (nanoGPT's estimate_loss and the training loop), and a
    move at one call site leaves the others crashing."""
    if not isinstance(expr, ast.Name):
        return None
    scope = stmt.function if stmt.function is not None else stmt.tree
    assigns = [n for n in ast.walk(scope) if isinstance(n, ast.Assign) and n.lineno < stmt.node.lineno]
    made_by = [n for n in assigns if _assigns(n, expr.id) and _own_function_call(n.value)]
    found = max(made_by, key=lambda n: n.lineno, default=None)
    if found is None:
        return None
    made = ast.unparse(found.value)
    # `data, targets = get_batch(...)`: the tensors one call hands out are made alike; moving the one that crashed
    # first leaves the next one to crash on the next line. One this very line passes was seen, on the device or not.
    here = {n.id for n in ast.walk(stmt.node) if isinstance(n, ast.Name)}
    siblings = [
        e.id
        for t in found.targets
        for e in (t.elts if isinstance(t, ast.Tuple) else [])
        if isinstance(e, ast.Name) and e.id not in (expr.id, "_") and e.id not in here
    ]
    also = f" (with {listed(siblings)}, which come from it too: move them alike)" if siblings else ""
    return (
        f"# {expr.id} comes from {made}{also}: moved there, before it returns, every caller gets it on the device; or:"
    )


def batch_siblings(stmt: Statement, expr: ast.expr, batch_tensors: list[bool] | None) -> list[str]:
    """The other tensors of the batch the loop unpacks with `expr`: `for i, (data, target) in enumerate(loader):` and a
    batch of two tensors give ["target"] for `data`. The script dies at the model's call before the loss shows the
    labels off the device, and a fix that moves only the inputs leaves it to die on the next line."""
    if not isinstance(expr, ast.Name):
        return []
    line = stmt.node.lineno
    scope = stmt.function if stmt.function is not None else stmt.tree
    loops = [n for n in ast.walk(scope) if isinstance(n, ast.For) and n.lineno < line <= (n.end_lineno or 0)]
    here = {n.id for n in ast.walk(stmt.node) if isinstance(n, ast.Name)}
    for loop in sorted(loops, key=lambda n: n.lineno, reverse=True):
        unpacked = _tuple_holding(loop.target, expr.id)
        if unpacked is not None:
            return _tensor_names(unpacked, expr.id, batch_tensors, here) if batch_tensors else []
        indexed = _indexed_alike(loop, expr.id, line)
        if indexed:
            # lengths stay on the host (pack_padded_sequence takes them there)
            return [n for n in indexed if n not in here and "len" not in n.lower() and _passed_after(loop, n, line)]
    return []


def _indexed_alike(loop: ast.For, name: str, line: int) -> list[str]:
    """The other names of `data, target = data_all[i], target_all[i]` in the loop, before `line`: parallel arrays taken
    at one index are one batch's parts, made alike (the loop unpacks no loader, so the probes saw no batch)."""
    for node in ast.walk(loop):
        if not (isinstance(node, ast.Assign) and node.lineno < line and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if not (isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple)) or len(target.elts) != len(value.elts):
            continue
        names = [e.id if isinstance(e, ast.Name) else None for e in target.elts]
        if name not in names or not all(isinstance(v, ast.Subscript) for v in value.elts):
            continue
        indices = {ast.unparse(v.slice) for v in value.elts if isinstance(v, ast.Subscript)}
        if len(indices) == 1:
            return [n for n in names if n is not None and n not in (name, "_")]
    return []


def _passed_after(loop: ast.For, name: str, line: int) -> bool:
    """`name` is an argument of a call in the loop after `line` (the loss that takes the labels)."""
    return any(
        isinstance(n, ast.Call)
        and n.lineno > line
        and any(isinstance(a, ast.Name) and a.id == name for a in [*n.args, *(k.value for k in n.keywords)])
        for n in ast.walk(loop)
    )


def _tensor_names(unpacked: ast.Tuple | ast.List, name: str, batch_tensors: list[bool], here: set[str]) -> list[str]:
    """The names of `unpacked` whose batch element is a tensor, other than `name` and those in `here`."""
    names = [e.id if isinstance(e, ast.Name) else None for e in unpacked.elts]
    if len(names) != len(batch_tensors):
        return []  # not the batch's shape: which name is which element is not known
    return [
        n
        for n, is_tensor in zip(names, batch_tensors, strict=True)
        if is_tensor and n is not None and n not in (name, "_") and n not in here
    ]


def sibling_moves(stmt: Statement, expr: ast.expr, batch_tensors: list[bool] | None, device: str) -> list[str]:
    """The lines that move the other tensors of `expr`'s batch (`target = target.to(device, non_blocking=True)`)."""
    return [f"{name} = {name}.to({device}, non_blocking=True)" for name in batch_siblings(stmt, expr, batch_tensors)]


def _tuple_holding(target: ast.expr, name: str) -> ast.Tuple | ast.List | None:
    """The innermost tuple of a loop's target that has `name` as one of its own elements."""
    for node in ast.walk(target):
        if isinstance(node, (ast.Tuple, ast.List)) and any(isinstance(e, ast.Name) and e.id == name for e in node.elts):
            return node
    return None


def _own_function_call(value: ast.expr) -> bool:
    """`get_batch(split)` or `self.sample(...)`: a function of the script's; not a method on a value
    (`batch.pop("labels")`, `b[:, :-1].contiguous()`), not torch's (`torch.stack(...)`), not `next(it)`."""
    if not isinstance(value, ast.Call):
        return False
    func = value.func
    if isinstance(func, ast.Name):
        return func.id not in _NOT_PRODUCERS
    return isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self"


def _assigns(node: ast.Assign, name: str) -> bool:
    targets = [e for t in node.targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
    return any(isinstance(e, ast.Name) and e.id == name for e in targets)


def _moved_line(
    source: SourceSection | None, t: TensorSeen, device: str, batch_tensors: list[bool] | None = None
) -> tuple[str, str, str | None] | None:
    """(the statement it goes before, the line that moves the tensor and those of its batch, a note on where the tensor
    comes from) from the call's source."""
    stmt = statement_at(source, t.where)
    if stmt is None:
        return None
    expr = call_argument(stmt, t.argument, t.target)
    if expr is None:
        return None
    at_origin = (
        _cpu_dropped_line(stmt, expr)
        or _moved_beside(source, stmt, expr, device)
        or _moved_at_origin(stmt, expr, t, device)
    )
    if at_origin is not None:
        return at_origin
    before = f"before line {stmt.first_line}: {stmt.text}"
    note = _producer_note(stmt, expr)
    if isinstance(expr, ast.Starred) and isinstance(expr.value, ast.Name):
        return before, moved_starred(expr.value.id, device), note
    spread = t.argument is not None and not t.argument.startswith("args[") and is_spread(stmt, expr)
    if spread and isinstance(expr, ast.Name):
        return before, moved_spread(expr.id, device), note
    siblings = sibling_moves(stmt, expr, batch_tensors, device)
    return before, "\n".join([moved_argument(stmt, expr, device, t.argument), *siblings]), note


def _cpu_dropped_line(stmt: Statement, expr: ast.expr) -> tuple[str, str, str] | None:
    """The call with the `.cpu()` the script wrote on its arguments dropped (cpu_moves_of_call)."""
    calls = cpu_moves_of_call(stmt, expr)
    if not calls:
        return None
    said = listed([ast.unparse(c.func.value) for c in calls if isinstance(c.func, ast.Attribute)])
    note = f"# the script moves {said} to the CPU itself (.cpu()): compute this where the rest is"
    return f"line {stmt.first_line}: {stmt.text}", without_cpu(stmt, calls), note


def _moved_beside(
    source: SourceSection | None, stmt: Statement, expr: ast.expr, device: str
) -> tuple[str, str, str] | None:
    beside = sibling_move(source, stmt, expr)
    if beside is not None:
        note = "# the loop moves the rest of the batch here: this one with them"
        return f"after line {beside.after.first_line}: {beside.after.text}", beside.line, note
    beside = global_move(source, stmt, expr)
    whole = sliced_global(stmt, expr)
    if beside is not None and whole is not None:
        note = f"# each batch is a slice of {whole}, a module global: moved once where the script moves the others"
    elif is_global_name(stmt, expr):
        assert isinstance(expr, ast.Name) and stmt.function is not None
        if beside is None:
            return (
                f"{expr.id} is a module global used at line {stmt.first_line}: move it once where it is made",
                f"{expr.id} = {expr.id}.to({device})   # at module level (inside {stmt.function.name}() it would "
                "become a local name)",
                "",
            )
        note = (
            f"# {expr.id} is a module global: moved once where the script moves the others (an assignment inside "
            f"{stmt.function.name}() would make it local there)"
        )
    if beside is None:
        return None
    return f"after line {beside.after.first_line}: {beside.after.text}", beside.line, note


class SiblingMove(msgspec.Struct, frozen=True):
    """The loop moves the other tensors of the batch in place (`user = user.cuda()`) and not this one: its move goes
    right after theirs, in their words, where the batch arrives (not before the call, and with no device to define)."""

    after: Statement  # the last of the siblings' moves
    line: str  # `label = label.cuda()`


def sibling_move(source: SourceSection | None, stmt: Statement, expr: ast.expr) -> SiblingMove | None:
    """NCF's loop moved `user` and `item` with `.cuda()` and dropped `label`'s: a trial's fix defined a device, moved
    all three before the loss, and had no edit."""
    if not isinstance(expr, ast.Name) or source is None:
        return None
    loop = enclosing_loop(stmt)
    if loop is None:
        return None
    moves = [n for n in loop.body if n.lineno < stmt.node.lineno and in_place_move(n) is not None]
    moved = {name for n in moves if (name := in_place_move(n)) is not None}
    # moved by another statement of the loop before the line (`label = label.float().cuda()`): not forgotten
    if not moves or expr.id in moved or _moved_before(loop, expr.id, stmt.node.lineno):
        return None
    after = statement_at(source, f"{stmt.snippet.path}:{moves[-1].lineno + stmt.offset}")
    return SiblingMove(after, same_move(moves[-1], expr.id)) if after is not None else None


def moved_everywhere(
    source: SourceSection | None, tensors: list[TensorSeen], device: str, batch_tensors: list[bool] | None = None
) -> list[str]:
    """moved_tensor_lines for the tensors' own calls, then for the same calls in the file's other functions."""
    lines: list[str] = []
    for group in [tensors, *other_uses(source, tensors, device)]:
        lines.extend(moved_tensor_lines(source, group, device, batch_tensors))
    return lines


def other_uses(source: SourceSection | None, tensors: list[TensorSeen], device: str) -> list[list[TensorSeen]]:
    """The same tensors at the same call in the file's other functions (`output = model(data)` in `test()` as well as
    in `train()`), where that function does not move them already and can name `device`: grouped per function, so
    that a fix moves the batch in every loop that feeds the model, and the patched script does not crash in its
    evaluation. The source capture keeps those functions (`collectors/source_capture.py`, same_calls)."""
    if source is None:
        return []
    groups: dict[tuple[str, int], list[TensorSeen]] = {}
    seen = {t.where for t in tensors}
    for t in tensors:
        stmt = statement_at(source, t.where)
        expr = call_argument(stmt, t.argument, t.target) if stmt is not None else None
        key = _call_key(stmt, expr) if stmt is not None and isinstance(expr, ast.Name) else None
        if stmt is None or key is None or not isinstance(expr, ast.Name):
            continue
        for snippet, line in _same_calls(source, stmt, key, expr.id, device):
            where = f"{snippet.path}:{line}"
            if where not in seen:
                seen.add(where)
                groups.setdefault((snippet.path, snippet.first_line), []).append(
                    msgspec.structs.replace(t, where=where)
                )
    return list(groups.values())


def _call_key(stmt: Statement, expr: ast.Name) -> tuple[str, str] | None:
    """(callee, position or keyword) of the call that takes `expr`."""
    for call in (n for n in ast.walk(stmt.node) if isinstance(n, ast.Call)):
        for index, arg in enumerate(call.args):
            if arg is expr:
                return ast.unparse(call.func), str(index)
        for kw in call.keywords:
            if kw.value is expr and kw.arg:
                return ast.unparse(call.func), kw.arg
    return None


def _same_calls(
    source: SourceSection, stmt: Statement, key: tuple[str, str], name: str, device: str
) -> list[tuple[SourceSnippet, int]]:
    found = []
    for snippet in source.snippets:
        if snippet.kind != "function" or snippet.path != stmt.snippet.path or snippet == stmt.snippet:
            continue
        tree = parse_code(snippet.text)
        if tree is None or not _can_name(tree, device, global_device(source, snippet.path)):
            continue
        for node in (n for n in ast.walk(tree) if isinstance(n, ast.stmt) and not isinstance(n, _COMPOUND)):
            if _passes(node, key, name) and not _moved_before(tree, name, node.lineno):
                found.append((snippet, node.lineno + snippet.first_line - 1))
    return found


def _passes(node: ast.stmt, key: tuple[str, str], name: str) -> bool:
    callee, place = key
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call) and ast.unparse(n.func) == callee):
        given = call.args[int(place)] if place.isdigit() and int(place) < len(call.args) else None
        given = given or next((kw.value for kw in call.keywords if kw.arg == place), None)
        if isinstance(given, ast.Name) and given.id == name:
            return True
    return False


def _moved_before(tree: ast.AST, name: str, line: int) -> bool:
    """`name = name.to(...)` / `data, target = data.to(device), ...` / `.cuda()` above the line."""
    return any(
        isinstance(n, ast.Assign)
        and n.lineno < line
        and _assigns(n, name)
        and any(
            isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in ("to", "cuda")
            for c in ast.walk(n.value)
        )
        for n in ast.walk(tree)
    )


def _can_name(tree: ast.AST, device: str, file_device: str | None) -> bool:
    """Every name of the device expression is one the function uses (a parameter, a local, `args`), or the file's
    own global device variable: a move there must not raise NameError."""
    parsed = parse_code(device)
    wanted = {n.id for n in ast.walk(parsed) if isinstance(n, ast.Name)} if parsed is not None else {device}
    known = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    known |= {a.arg for a in ast.walk(tree) if isinstance(a, ast.arg)}
    return all(w in known or w == file_device for w in wanted)


def loop_invariant_origin(stmt: Statement, expr: ast.expr) -> Statement | None:
    """The statement before the loop that made `expr`, a name the innermost loop around the call never rebinds
    (`features, adj = load_cora()` above `for epoch in ...: model(features, adj)`): the same tensor at every step,
    moved once there, not copied to the device at every step (trial 8: the whole graph moved per epoch)."""
    if not isinstance(expr, ast.Name):
        return None
    loops = [
        n
        for n in ast.walk(stmt.tree)
        if isinstance(n, (ast.For, ast.AsyncFor, ast.While)) and _holds(n, stmt.node) and n is not stmt.node
    ]
    loop = max(loops, key=lambda n: n.lineno, default=None)
    if loop is None or expr.id in _bound_in(loop):
        return None
    # made in a block that also holds the loop (not in an `if` branch beside it, whose move would not always run)
    blocks = [b for b in ast.walk(stmt.tree) if isinstance(b, _COMPOUND)]
    made = [
        n
        for n in ast.walk(stmt.function or stmt.tree)
        if isinstance(n, ast.Assign)
        and _assigns(n, expr.id)
        and (n.end_lineno or n.lineno) < loop.lineno
        and all(_holds(b, loop) for b in blocks if _holds(b, n))
    ]
    origin = max(made, key=lambda n: n.lineno, default=None)
    if origin is None or _moved_before(origin, expr.id, origin.lineno + 1):
        return None  # made by a move already (`x = x.to("cpu")`): the device it names is what is wrong
    return statement_at(SourceSection([stmt.snippet]), f"{stmt.snippet.path}:{origin.lineno + stmt.offset}")


def _holds(outer: ast.AST, inner: ast.AST) -> bool:
    """`inner` lies in `outer`'s lines (a node of the same tree)."""
    first, last = getattr(outer, "lineno", 0), getattr(outer, "end_lineno", None)
    if isinstance(outer, ast.Module):
        return True
    return last is not None and first <= getattr(inner, "lineno", -1) <= last


def _bound_in(loop: ast.For | ast.AsyncFor | ast.While) -> set[str]:
    """Every name the loop binds: its targets, and what its body assigns (`hidden = rnn(x, hidden)` carries the
    name from one step to the next)."""
    bound: set[str] = set()
    for node in ast.walk(loop):
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            bound.add(node.id)
    return bound


def made_before_loop(source: SourceSection | None, t: TensorSeen) -> str | None:
    """'path:line' of the statement before the loop that made the tensor the call received, when the fix moves it
    there (see loop_invariant_origin); None when it is moved at the call."""
    stmt = statement_at(source, t.where)
    expr = call_argument(stmt, t.argument, t.target) if stmt is not None else None
    origin = loop_invariant_origin(stmt, expr) if stmt is not None and expr is not None else None
    return f"{origin.snippet.path}:{origin.first_line}" if origin is not None else None


def _moved_at_origin(stmt: Statement, expr: ast.expr, t: TensorSeen, device: str) -> tuple[str, str, str] | None:
    """A tensor made once before the loop: made on the device there (a factory), or moved once just after."""
    origin = loop_invariant_origin(stmt, expr)
    if origin is None:
        return None
    on_device = with_device(origin, device)
    if on_device is not None:
        note = "# the same tensor at every step: made on the device once, not copied in the loop"
        return f"instead of line {origin.first_line}: {origin.text}", on_device, note
    note = "# the same tensor at every step: moved once, where it is made, not in the loop"
    return f"after line {origin.first_line}: {origin.text}", moved_argument(stmt, expr, device, t.argument), note


def is_spread(stmt: Statement, expr: ast.expr) -> bool:
    """`expr` is passed as `**expr` in the statement."""
    return any(
        isinstance(n, ast.Call) and any(kw.arg is None and kw.value is expr for kw in n.keywords)
        for n in ast.walk(stmt.node)
    )


# -- plain tensor attributes -------------------------------------------------------------------------------------------


def assigned_attribute(stmt: Statement) -> tuple[str, str, str] | None:
    """(owner, name, value) for `owner.name = value` on the line, e.g. ("self", "pe", "pe")."""
    node = stmt.node
    if isinstance(node, ast.Assign) and len(node.targets) == 1:
        target, value = node.targets[0], node.value
    elif isinstance(node, ast.AnnAssign) and node.value is not None:
        target, value = node.target, node.value
    else:
        return None
    if not isinstance(target, ast.Attribute):
        return None
    return ast.unparse(target.value), target.attr, ast.unparse(value)


class IndexMove(msgspec.Struct, frozen=True):
    """An index tensor the loop uses that the script never moves, beside the names it does move in place."""

    name: str  # idx_train
    line: str  # idx_train = idx_train.cuda(): the siblings' own move
    after: Statement  # the last sibling move, where the line goes
    siblings: list[str]  # the names the script moves there


def unmoved_index(source: SourceSection | None, stmt: Statement) -> IndexMove | None:
    """`output[idx_train]` where `idx_train` is bound outside the function (a module global) and the file's module
    level moves other names in place (`labels = labels.cuda()`) but not this one (pygcn's `if args.cuda:` block)."""
    if source is None:
        return None
    moves = source.moves(stmt.snippet.path)
    if not moves:
        return None
    local = _function_locals(stmt.function) if stmt.function is not None else set()
    names = [
        n.slice.id
        for n in ast.walk(stmt.node)
        if isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Name) and n.slice.id not in local
    ]
    moved = {_moved(m) for m in moves}
    name = next((n for n in dict.fromkeys(names) if n not in moved), None)
    beside = module_level_move(source, stmt, name) if name is not None else None
    if name is None or beside is None:
        return None
    siblings = list(dict.fromkeys(_moved(m) for m in moves))
    return IndexMove(name, beside.line, beside.after, siblings)


def is_global_name(stmt: Statement, expr: ast.expr) -> bool:
    """A name the statement's function reads but never binds (a module global): an assignment to it inside the
    function would make it local there, and the function would fail before its first step (UnboundLocalError)."""
    return isinstance(expr, ast.Name) and stmt.function is not None and expr.id not in _function_locals(stmt.function)


def sliced_global(stmt: Statement, expr: ast.expr) -> str | None:
    """`train_x` for `model(x.unsqueeze(1))` after `x = train_x[start:end]` in the loop, where `train_x` is a module
    global (TCN: the whole dataset kept on the device, its move dropped from the `if args.cuda:` block): the move that
    fixes every batch is the dataset's, once, not a copy of each slice."""
    root: ast.expr = expr
    while isinstance(root, (ast.Attribute, ast.Call, ast.Subscript)):
        root = root.func if isinstance(root, ast.Call) else root.value
    loop = enclosing_loop(stmt)
    if not isinstance(root, ast.Name) or loop is None or stmt.function is None:
        return None
    local = _function_locals(stmt.function)
    for node in loop.body:
        if node.lineno >= stmt.node.lineno:
            break
        if isinstance(node, ast.Assign) and _assigns(node, root.id) and isinstance(node.value, ast.Subscript):
            whole = node.value.value
            if isinstance(whole, ast.Name) and whole.id not in local:
                return whole.id
    return None


def global_move(source: SourceSection | None, stmt: Statement, expr: ast.expr) -> SiblingMove | None:
    """The module-level move that fixes `expr` where it is a module global (`adj` in pyGAT's train()) or a slice of
    one (`x = train_x[a:b]` in TCN's step): beside the script's own module-level moves, in their words."""
    name = sliced_global(stmt, expr)
    if name is None and isinstance(expr, ast.Name) and is_global_name(stmt, expr):
        name = expr.id
    return module_level_move(source, stmt, name) if name is not None else None


def enclosing_loop(stmt: Statement) -> ast.For | None:
    """The innermost `for` around the statement, in its function (or the parsed window outside one)."""
    line = stmt.node.lineno
    scope = stmt.function if stmt.function is not None else stmt.tree
    loops = [n for n in ast.walk(scope) if isinstance(n, ast.For) and n.lineno < line <= (n.end_lineno or n.lineno)]
    return max(loops, key=lambda n: n.lineno, default=None)


def module_level_move(source: SourceSection | None, stmt: Statement, name: str) -> SiblingMove | None:
    """A module global the function uses, that the module level never moves where it moves others in place
    (pyGAT's `if args.cuda:` block without `adj = adj.cuda()`): its move goes there, in their words."""
    moves = source.moves(stmt.snippet.path) if source is not None else []
    if not moves or name in {_moved(m) for m in moves}:
        return None
    last = statement_at(source, f"{moves[-1].path}:{moves[-1].first_line}")
    if last is None or in_place_move(last.node) is None:
        return None
    return SiblingMove(last, same_move(last.node, name))


def _moved(snippet: SourceSnippet) -> str:
    return snippet.text.split("=", 1)[0].strip()


def _function_locals(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names a function binds itself: its parameters and its assignment targets (not its `global`s)."""
    args = function.args
    bound = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg] if a}
    declared = {n for g in ast.walk(function) if isinstance(g, ast.Global) for n in g.names}
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            bound.add(node.id)
    return bound - declared


def setattr_call(stmt: Statement) -> tuple[str, str, str] | None:
    """(owner, name, value) as code for `setattr(owner, name, value)` alone on the line (a schedule's tensors set in a
    loop: `for k, v in schedules.items(): setattr(self, k, v)`); the name stays an expression (`k`, `"pe"`)."""
    node = stmt.node
    call = node.value if isinstance(node, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "setattr"):
        return None
    if len(call.args) != 3 or call.keywords or any(isinstance(a, ast.Starred) for a in call.args):
        return None
    owner, name, value = (ast.unparse(a) for a in call.args)
    return owner, name, value


def module_container_fix(stmt: Statement) -> str | None:
    """`self.blocks = [nn.Linear(...) for _ in range(3)]` -> `self.blocks = nn.ModuleList([...])` (a dict:
    nn.ModuleDict); None when the line is not such an assignment."""
    found = assigned_attribute(stmt)
    node = stmt.node
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if found is None or value is None:
        return None
    owner, name, text = found
    if isinstance(value, (ast.Dict, ast.DictComp)):
        return f"{owner}.{name} = nn.ModuleDict({text})"
    if isinstance(value, ast.Tuple):
        return f"{owner}.{name} = nn.ModuleList([{', '.join(ast.unparse(e) for e in value.elts)}])"
    return f"{owner}.{name} = nn.ModuleList({text})"


def register_buffer_fix(stmt: Statement, leaf: str | None = None) -> str | None:
    """`self.register_buffer("pe", pe)` for `self.pe = pe`; None where the line assigns another name than the
    attribute's `leaf` (`self.conv1 = weight_norm(...)` for `conv1.weight`: a module is no buffer)."""
    found = assigned_attribute(stmt)
    if found is not None and leaf is not None and found[1] != leaf:
        return None
    if found is None:
        called = setattr_call(stmt)
        if called is None:
            return None
        owner, name, value = called
        return f"{owner}.register_buffer({name}, {value})  # instead of: {ast.unparse(stmt.node)}"
    owner, name, value = found
    # The statement as one line: a comment cannot hold a line break, and a backslash continuation would end it.
    was = ast.unparse(stmt.node) if "\n" in stmt.text else stmt.text
    return f'{owner}.register_buffer("{name}", {value})  # instead of: {was}'


# -- device= on the line that makes a tensor ---------------------------------------------------------------------------


def factory_statement(source: SourceSection | None, where: str | None) -> Statement | None:
    """The statement that calls a tensor factory on `where`, or the assignment of the name the line stores (`mask` in
    `self.register_buffer("mask", mask)`) further up in the same function."""
    stmt = statement_at(source, where)
    if stmt is None:
        return None
    if factory_call(stmt.node) is not None:
        return stmt
    stored = _stored_name(stmt.node)
    if stored is None or stmt.function is None:
        return None
    earlier = [
        n
        for n in ast.walk(stmt.function)
        if isinstance(n, ast.Assign)
        and n.lineno + stmt.offset < stmt.first_line
        and any(isinstance(t, ast.Name) and t.id == stored for t in n.targets)
        and factory_call(n) is not None
    ]
    if not earlier:
        return None
    last = max(earlier, key=lambda n: n.lineno)
    return statement_at(source, f"{stmt.snippet.path}:{last.lineno + stmt.offset}")


def sibling_factory_statements(source: SourceSection | None, stmt: Statement) -> list[Statement]:
    """The other statements of the same function that call the same factory without `device=`: an LSTM's forward
    makes h_t, c_t, h_t2 and c_t2 with four `torch.zeros(...)` lines, and fixing only the one that crashed first
    leaves the next crash for the next run."""
    call = factory_call(stmt.node)
    if call is None or stmt.function is None:
        return []
    name = ast.unparse(call.func)
    lines = sorted(
        {
            n.lineno + stmt.offset
            for n in ast.walk(stmt.function)
            if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.Expr))
            and n.lineno + stmt.offset != stmt.first_line
            and (found := factory_call(n)) is not None
            and ast.unparse(found.func) == name
        }
    )
    found_statements = (statement_at(source, f"{stmt.snippet.path}:{line}") for line in lines)
    return [s for s in found_statements if s is not None]


def adjacent_factory_statements(source: SourceSection | None, stmt: Statement) -> list[Statement]:
    """The statements right above and below `stmt` that make a tensor with the same factory, without `device=`:
    `mean = torch.tensor(cfg["mean"])` and `std = torch.tensor(cfg["std"])` are made alike, and a fix of the one that
    crashed first left the other for the next run."""
    call = factory_call(stmt.node)
    if call is None:
        return []
    name = ast.unparse(call.func)

    def alike(other: Statement) -> bool:
        made = factory_call(other.node) if isinstance(other.node, ast.Assign) else None
        return made is not None and ast.unparse(made.func) == name

    return adjacent_statements(source, stmt, alike)


def adjacent_statements(
    source: SourceSection | None, stmt: Statement, alike: Callable[[Statement], bool]
) -> list[Statement]:
    """The run of statements on the lines right above and below `stmt` (no blank line between) for which `alike`
    holds, in line order."""
    found: list[Statement] = []
    for step in (-1, 1):
        line = stmt.first_line if step < 0 else (stmt.node.end_lineno or stmt.node.lineno) + stmt.offset
        while len(found) < MAX_ADJACENT:
            line += step
            text = stmt.snippet.line(line)
            other = statement_at(source, f"{stmt.snippet.path}:{line}") if text and text.strip() else None
            if other is None or other.first_line == stmt.first_line or not alike(other):
                break
            found.append(other)
            line = other.first_line if step < 0 else (other.node.end_lineno or other.node.lineno) + other.offset
    return sorted(found, key=lambda s: s.first_line)


MAX_ADJACENT = 8


def _stored_name(node: ast.stmt) -> str | None:
    """`mask` in `self.mask = mask` or `self.register_buffer("mask", mask, ...)`."""
    value: ast.expr | None = None
    if isinstance(node, ast.Assign):
        value = node.value
    elif isinstance(node, ast.Expr) and _is_register_buffer(node.value):
        assert isinstance(node.value, ast.Call)
        value = node.value.args[1]
    return value.id if isinstance(value, ast.Name) else None


def _is_register_buffer(call: ast.expr) -> bool:
    return isinstance(call, ast.Call) and len(call.args) >= 2 and ast.unparse(call.func).endswith("register_buffer")


def factory_calls(node: ast.AST) -> list[ast.Call]:
    """The calls of torch tensor factories without `device=` (torch.ones, torch.arange, ...), and of the host
    constructors not moved on (`torch.LongTensor(...)`, `torch.from_numpy(...)` without `.to(...)`), in source order."""
    moved = {id(n.value) for n in ast.walk(node) if isinstance(n, ast.Attribute) and n.attr in _MOVES}
    found = []
    for n in ast.walk(node):
        if not isinstance(n, ast.Call):
            continue
        name = ast.unparse(n.func)
        short = name.split(".")[-1]
        from_torch = name.startswith(("torch.", "th."))
        if short in FACTORIES and (from_torch or isinstance(n.func, ast.Name)):
            if not any(kw.arg == "device" for kw in n.keywords):
                found.append(n)
        elif short in HOST_CONSTRUCTORS and from_torch and id(n) not in moved:
            found.append(n)
    # a host constructor inside another (`torch.LongTensor(torch.from_numpy(a))`): the outer one is moved
    inner = {id(c) for outer in found if is_host_constructor(outer) for c in ast.walk(outer) if c is not outer}
    return sorted((n for n in found if id(n) not in inner), key=lambda n: (n.lineno, n.col_offset))


_MOVES = frozenset({"to", "cuda", "type"})


def is_host_constructor(call: ast.Call) -> bool:
    """A call that takes no `device=`: its tensor is moved with `.to(device)` after it."""
    return ast.unparse(call.func).split(".")[-1] in HOST_CONSTRUCTORS


def device_argument(call: ast.Call, device: str) -> str:
    """What makes the call's tensor on `device`: `, device=...` before its closing parenthesis, or `.to(...)` after a
    host constructor."""
    if is_host_constructor(call):
        return f".to({device})"
    return f"{', ' if call.args or call.keywords else ''}device={device}"


def factory_call(node: ast.AST) -> ast.Call | None:
    """The first call of a torch tensor factory without `device=`."""
    return next(iter(factory_calls(node)), None)


def with_device(stmt: Statement, device: str) -> str | None:
    """The statement with `device=...` added to every tensor factory call in it (`torch.meshgrid(torch.arange(h),
    torch.arange(w))` makes two), in the user's own formatting where the statement is one line."""
    calls = factory_calls(stmt.node)
    if not calls:
        return None
    line = stmt.snippet.line(stmt.first_line) if stmt.node.lineno == stmt.node.end_lineno else None
    if line is not None and all(c.lineno == c.end_lineno and c.end_col_offset is not None for c in calls):
        fixed = line
        for call in sorted(calls, key=lambda c: c.end_col_offset or 0, reverse=True):
            col = (call.end_col_offset or 0) - 1 + stmt.indent  # the closing parenthesis
            if not 0 < col < len(fixed) or fixed[col] != ")":
                break
            at = col + 1 if is_host_constructor(call) else col
            fixed = f"{fixed[:at]}{device_argument(call, device)}{fixed[at:]}"
        else:
            return without_comments(fixed.strip())
    # across lines: the statement rewritten, its formatting lost
    tree = ast.parse(ast.unparse(stmt.node))
    wanted = {ast.unparse(c) for c in calls}
    return ast.unparse(_OnDevice(wanted, device).visit(tree))


class _OnDevice(ast.NodeTransformer):
    """Each call whose source is in `wanted` made on `device`: `device=` added, or `.to(device)` after it."""

    def __init__(self, wanted: set[str], device: str) -> None:
        self.wanted, self.device = wanted, device

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if ast.unparse(node) not in self.wanted:
            self.generic_visit(node)
            return node
        target = ast.Name(id=self.device)
        if is_host_constructor(node):
            return ast.Call(func=ast.Attribute(value=node, attr="to", ctx=ast.Load()), args=[target], keywords=[])
        node.keywords.append(ast.keyword(arg="device", value=target))
        return node


def _indent(text: str) -> int:
    """The indentation textwrap.dedent removes from `text`."""
    widths = [len(line) - len(line.lstrip()) for line in text.split("\n") if line.strip()]
    return min(widths) if widths else 0


_MAX_HEADER_LOOKBACK = 200  # lines looked up for the `def` of a statement parsed alone


def _enclosing_def(stmt: Statement) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    """The `def` line above a statement that was parsed alone (its window cut through a class), read by its
    indentation: a header with an empty body, enough to name the function and its arguments."""
    own = stmt.snippet.line(stmt.first_line) or ""
    indent = len(own) - len(own.lstrip())
    for number in range(
        stmt.first_line - 1, max(stmt.snippet.first_line, stmt.first_line - _MAX_HEADER_LOOKBACK) - 1, -1
    ):
        text = stmt.snippet.line(number) or ""
        code = text.strip()
        if not code or len(text) - len(code) >= indent:
            continue
        if not code.startswith(("def ", "async def ")):
            return None  # a class, a loop or an if: the statement is not in a function's own body
        parsed = parse_code(code + " pass")
        node = parsed.body[0] if parsed is not None and parsed.body else None
        return node if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else None
    return None


def global_device(source: SourceSection | None, path: str) -> str | None:
    """The file's own device variable, assigned at its top level (`device = torch.device("cuda" ...)` at column 0): a
    name every function of the file can use."""
    for line in source.device_lines(path) if source is not None else []:
        parsed = parse_code(line.text) if line.text[:1].isalpha() else None
        target = _device_target(parsed.body[0]) if parsed is not None and parsed.body else None
        if target is not None and target.isidentifier():
            return target
    return None


def forward_device(stmt: Statement, source: SourceSection | None = None) -> str:
    """The device a tensor made in this function should use: a `device` variable or parameter of the function, the
    device of its first tensor argument when it is a forward, else the module's own parameters' device. A method of a
    plain class (a replay buffer: no .parameters()) gets the file's own device variable, else "x.device" (none to
    name)."""
    func = stmt.function or _enclosing_def(stmt)
    if func is not None:
        names = {a.arg for a in [*func.args.posonlyargs, *func.args.args, *func.args.kwonlyargs]}
        # assigned above the line (`_, h, w, dim, device, dtype = *patches.shape, patches.device, ...` included)
        assigned = {
            t.id
            for n in ast.walk(func)
            if isinstance(n, ast.Assign) and n.lineno < stmt.node.lineno
            for target in n.targets
            for t in ast.walk(target)
            if isinstance(t, ast.Name)
        }
        for candidate in ("device", "dev"):
            if candidate in names or candidate in assigned:
                return candidate
        params = [a.arg for a in func.args.args if a.arg not in ("self", "cls")]
        if func.name == "forward" and params:
            return f"{params[0]}.device"
        if func.args.args and func.args.args[0].arg == "self" and stmt.snippet.module_class is not False:
            return "next(self.parameters()).device"
        if func.args.args and func.args.args[0].arg == "self":
            return global_device(source, stmt.snippet.path) or "x.device"
        if params:  # a helper of the forward (`posemb_sincos_2d(patches)`): its first argument's device
            return f"{params[0]}.device"
    return "x.device"


class _NoDeviceMoves(ast.NodeTransformer):
    """`x.to(device)` -> `x`, `x.cuda()` -> `x`, `torch.zeros(3, device=d)` -> `torch.zeros(3)`."""

    def __init__(self) -> None:
        self.changed = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and (func.attr == "cuda" or (_is_to_call(node) and _device_target_of(node))):
            self.changed += 1
            return func.value
        kept = [kw for kw in node.keywords if kw.arg != "device"]
        if len(kept) != len(node.keywords):
            self.changed += 1
            node.keywords = kept
        return node


def _device_target_of(call: ast.Call) -> bool:
    target = _moved_to(call)
    return target is not None and not _dtype_like(target)


def without_device_moves(stmt: Statement) -> str | None:
    """The statement with its moves to a device taken out (a DataLoader worker must stay on the CPU); None when it
    has none."""
    tree = ast.parse(ast.unparse(stmt.node))
    undo = _NoDeviceMoves()
    fixed = undo.visit(tree)
    return ast.unparse(fixed) if undo.changed else None


def loop_targets(source: SourceSection | None, where: str | None) -> list[str]:
    """The names the `for` loop on the `where` line binds (`for x, y in loader:` -> ["x", "y"]); [] otherwise."""
    loop = _loop_at(source, where)
    return [n.id for n in ast.walk(loop.target) if isinstance(n, ast.Name)] if loop is not None else []


def loop_batch_siblings(
    source: SourceSection | None, where: str | None, name: str, batch_tensors: list[bool] | None
) -> list[str]:
    """The other tensors of the batch that the `for` loop on the `where` line unpacks with `name`."""
    loop = _loop_at(source, where)
    unpacked = _tuple_holding(loop.target, name) if loop is not None and batch_tensors else None
    return _tensor_names(unpacked, name, batch_tensors, set()) if unpacked is not None and batch_tensors else []


def _loop_at(source: SourceSection | None, where: str | None) -> ast.For | None:
    """The `for` statement that starts on the `where` line, parsed alone."""
    parsed = split_where(where)
    snippet = source.around(where) if source is not None and where is not None else None
    line = snippet.line(parsed[1]) if snippet is not None and parsed is not None else None
    tree = parse_code(line.strip() + " pass") if line is not None and line.strip().startswith("for ") else None
    loop = tree.body[0] if tree is not None and tree.body else None
    return loop if isinstance(loop, ast.For) else None
