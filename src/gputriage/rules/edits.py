"""The fixes as edits: the exact lines of the user's file that a finding's fix changes, for `--patch FILE`.

Pure, like `codefix.py`, and built from the same pieces: an edit is the recorded snippet's lines (`old`) and the
lines that replace them (`new`), both in the file's own indentation. A rule stores its edits in the finding's
evidence (`edits`, a list of `Edit.to_json()`), so the fix text and the patch come from one computation; the patch
writer (`report/patch.py`) only checks that the file on disk still holds `old` and writes the diff.

Only edits that are safe as written are built: one statement (or the line before / after it) changed in place, with
names the script already has. Anything else stays advice in the fix text, and the patch says so.
"""

from __future__ import annotations

import ast
import io
import textwrap
import tokenize

import msgspec

from gputriage.record.edit import Edit
from gputriage.record.placement import StrayPart, TensorSeen
from gputriage.record.source import SourceSection
from gputriage.rules import codefix
from gputriage.rules.codefix import Statement

# `if step % READ_EVERY_STEPS == 0:` around a per-step print of a device value.
READ_EVERY_STEPS = 100
# Calls that only show a value: wrapping them in `if step % N == 0:` changes how often they show it, nothing else.
_DISPLAY_CALLS = frozenset({"print", "info", "debug", "log", "write", "set_postfix", "add_scalar", "set_description"})


def evidence_of(edits: list[Edit]) -> dict[str, object]:
    """The evidence entry a rule adds: {"edits": [...]}, or nothing."""
    return {"edits": [e.to_json() for e in edits]} if edits else {}


# -- the statement's lines --------------------------------------------------------------------------------------------


def _lines(stmt: Statement) -> list[str] | None:
    last = stmt.first_line + (stmt.node.end_lineno or stmt.node.lineno) - stmt.node.lineno
    lines = [stmt.snippet.line(n) for n in range(stmt.first_line, last + 1)]
    return None if any(x is None for x in lines) else [x for x in lines if x is not None]


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _alone(stmt: Statement, lines: list[str]) -> bool:
    """The statement starts its line (not `for x in xs: f(x)`, not after a `;`) and ends it."""
    starts = stmt.node.col_offset + stmt.indent == len(_indent_of(lines[0]))
    end = stmt.node.end_col_offset
    rest = lines[-1][end + stmt.indent :] if end is not None else ";"
    return starts and not rest.strip().startswith(";")


def insert_before(stmt: Statement, added: list[str], kind: str) -> Edit | None:
    """`added` on their own lines just above the statement, at its indentation."""
    lines = _lines(stmt)
    if not lines or not _alone(stmt, lines):
        return None
    pad = _indent_of(lines[0])
    return Edit(stmt.snippet.path, stmt.first_line, (lines[0],), (*(pad + a for a in added), lines[0]), kind)


def insert_after(stmt: Statement, added: list[str], kind: str) -> Edit | None:
    """`added` on their own lines just below the statement, at its indentation."""
    lines = _lines(stmt)
    if not lines or not _alone(stmt, lines):
        return None
    pad = _indent_of(lines[0])
    last = stmt.first_line + len(lines) - 1
    return Edit(stmt.snippet.path, last, (lines[-1],), (lines[-1], *(pad + a for a in added)), kind)


def splice(stmt: Statement, node: ast.AST, text: str, *, at_end: bool, kind: str) -> Edit | None:
    """The statement's lines with `text` put at the end of `node` (or replacing it when not at_end)."""
    return splice_many(stmt, [(node, text, at_end)], kind)


def splice_many(stmt: Statement, changes: list[tuple[ast.AST, str, bool]], kind: str) -> Edit | None:
    """Several in-line changes to one statement: (node, text, at_end) each, applied right to left."""
    lines = _lines(stmt)
    if not lines:
        return None
    new = list(lines)
    spans = []
    for node, text, at_end in changes:
        pos = _file_span(stmt, node)
        if pos is None:
            return None
        (l1, c1), (l2, c2) = pos
        spans.append(((l2, c2), (l2, c2), text) if at_end else ((l1, c1), (l2, c2), text))
    for (l1, c1), (l2, c2), text in sorted(spans, key=lambda s: s[0], reverse=True):
        i1, i2 = l1 - stmt.first_line, l2 - stmt.first_line
        if not (0 <= i1 <= i2 < len(new)) or c1 > len(new[i1]) or c2 > len(new[i2]):
            return None
        merged = new[i1][:c1] + text + new[i2][c2:]
        new[i1 : i2 + 1] = merged.split("\n")
    return Edit(stmt.snippet.path, stmt.first_line, tuple(lines), tuple(new), kind)


def _file_span(stmt: Statement, node: ast.AST) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """(line, column) of the node's start and end in the file."""
    start_line, end_line = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    start_col, end_col = getattr(node, "col_offset", None), getattr(node, "end_col_offset", None)
    if start_line is None or end_line is None or start_col is None or end_col is None:
        return None
    # tree columns count from the dedented text: put the indentation back (one-line parses are stripped instead)
    return (start_line + stmt.offset, start_col + stmt.indent), (end_line + stmt.offset, end_col + stmt.indent)


def _parses(edit: Edit) -> bool:
    """The new lines still form statements (dedented, on their own)."""
    try:
        ast.parse(textwrap.dedent("\n".join(edit.new)))
    except SyntaxError:
        return False
    return True


def checked(edit: Edit | None) -> Edit | None:
    return edit if edit is not None and edit.new != edit.old and _parses(edit) else None


# -- the edit of each fix ----------------------------------------------------------------------------------------------


def move_argument(
    source: SourceSection | None,
    where: str | None,
    argument: str | None,
    callee: str | None,
    device: str,
    *,
    batch_tensors: list[bool] | None = None,
) -> Edit | None:
    """`x = x.to(device, non_blocking=True)` above `out = model(x)` (the argument is a name); `model(**batch)` gets
    the dict comprehension; any other argument gets `.to(device, ...)` in place."""
    stmt = codefix.statement_at(source, where)
    if stmt is None:
        return None
    expr = codefix.call_argument(stmt, argument, callee)
    if expr is None or codefix.moved_already(expr) is not None:
        return None  # moved already: the device it names is what is wrong, no edit of this line fixes that
    at_origin = _cpu_dropped(stmt, expr) or _moved_where_made(source, stmt, expr, argument, device)
    if at_origin is not None or codefix.is_global_name(stmt, expr):
        return at_origin  # a module global is never assigned inside the function: beside the module's moves, or none
    line = _line_that_moves(stmt, expr, argument, device)
    if line is not None:
        moves = [line, *codefix.sibling_moves(stmt, expr, batch_tensors, device)]
        return checked(insert_before(stmt, moves, "move-data"))
    if codefix.in_container(argument):
        return None  # an element of a container written out in the call: advice, not an edit
    return checked(splice(stmt, expr, f".to({device}, non_blocking=True)", at_end=True, kind="move-data"))


def _moved_where_made(
    source: SourceSection | None, stmt: Statement, expr: ast.expr, argument: str | None, device: str
) -> Edit | None:
    """Beside the batch's other moves, in their words (the loop's, or the module level's for a module global and a
    slice of one); or, for the same tensor at every step, where it is made."""
    beside = codefix.sibling_move(source, stmt, expr) or codefix.global_move(source, stmt, expr)
    if beside is not None:
        return checked(insert_after(beside.after, [beside.line], "move-beside"))
    origin = codefix.loop_invariant_origin(stmt, expr)
    if origin is None:
        return None
    return device_in_factory(origin, device) or checked(
        insert_after(origin, [codefix.moved_argument(stmt, expr, device, argument)], "move-data")
    )


def _cpu_dropped(stmt: Statement, expr: ast.expr) -> Edit | None:
    """`criterion(out.cpu(), y.cpu())`: each `.cpu()` among the call's arguments dropped (codefix.cpu_moves_of_call)."""
    calls = codefix.cpu_moves_of_call(stmt, expr)
    lines = _lines(stmt) if calls else None
    if not calls or not lines:
        return None
    changes: list[tuple[ast.AST, str, bool]] = []
    for call in calls:
        assert isinstance(call.func, ast.Attribute)
        receiver = _segment(stmt, call.func.value, lines) or ast.unparse(call.func.value)
        changes.append((call, receiver, False))
    return checked(splice_many(stmt, changes, "drop-cpu"))


def _line_that_moves(stmt: codefix.Statement, expr: ast.expr, argument: str | None, device: str) -> str | None:
    """The line inserted above the call that moves what it is given by name: a name, `**batch`, `*inputs`, or an
    element of a container the name holds; None for an argument written out in the call."""
    if isinstance(expr, ast.Starred) and isinstance(expr.value, ast.Name):
        return codefix.moved_starred(expr.value.id, device)
    if isinstance(expr, ast.Name):
        spread = argument is not None and not argument.startswith("args[") and codefix.is_spread(stmt, expr)
        return codefix.moved_spread(expr.id, device) if spread else codefix.moved_argument(stmt, expr, device, argument)
    if codefix.container_element(expr, argument) is not None or codefix.batch_indexed(stmt, expr) is not None:
        return codefix.moved_argument(stmt, expr, device, argument)
    return None


def comment_out(source: SourceSection | None, where: str | None, why: str) -> Edit | None:
    """The statement at `where` turned into a comment that says why; the patch leaves it out where the file would no
    longer parse (the only statement of a block)."""
    stmt = codefix.statement_at(source, where)
    lines = _lines(stmt) if stmt is not None else None
    if stmt is None or not lines or not _alone(stmt, lines):
        return None
    pad = _indent_of(lines[0])
    new = (f"{pad}# {why}:", *(f"{pad}# {line[len(pad) :]}" for line in lines))
    return checked(Edit(stmt.snippet.path, stmt.first_line, tuple(lines), new, "comment-out"))


def move_model(
    source: SourceSection | None, model_where: str | None, device: str, class_name: str | None = None
) -> Edit | None:
    """`net = Net()` -> `net = Net().to(device)` on the line that builds the model."""
    stmt = codefix.statement_at(source, model_where)
    call = codefix.built_call(stmt, class_name) if stmt is not None else None
    if stmt is None or call is None:
        return None
    return checked(splice(stmt, call, f".to({device})", at_end=True, kind="move-model"))


def move_after_attach(source: SourceSection | None, attach_where: str | None, device: str) -> Edit | None:
    """`model.to(device)` right below `model.head = nn.Linear(...)`: the model moves after its last submodule."""
    stmt = codefix.statement_at(source, attach_where)
    found = codefix.assigned_attribute(stmt) if stmt is not None else None
    if stmt is None or found is None:
        return None
    root = found[0].split(".", 1)[0].split("[", 1)[0]
    if not root.isidentifier() or root in ("self", "cls"):
        return None  # inside the class: the caller moves the model after constructing it
    return checked(insert_after(stmt, [f"{root}.to({device})"], "move-model"))


def register_buffer(stmt: Statement, leaf: str | None = None) -> Edit | None:
    """`self.pe = pe` -> `self.register_buffer("pe", pe)`, in `__init__` only, and only when nothing assigned the
    attribute earlier in it (register_buffer refuses a name that already exists), and the line assigns the attribute
    itself (`leaf`), not the module that holds it."""
    found = codefix.assigned_attribute(stmt)
    func = stmt.function
    if found is None and func is not None and func.name == "__init__":
        return _setattr_as_buffer(stmt)
    if found is None or func is None or func.name != "__init__" or found[0] != "self" or found[1] != (leaf or found[1]):
        return None
    name = found[1]
    first_in_tree = stmt.first_line - stmt.offset
    for earlier in ast.walk(func):
        if isinstance(earlier, ast.Assign):
            targets = earlier.targets
        elif isinstance(earlier, ast.AnnAssign):
            targets = [earlier.target]
        else:
            continue
        if earlier.lineno < first_in_tree and any(ast.unparse(t) == f"self.{name}" for t in targets):
            return None
    node = stmt.node
    value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
    if value is None:
        return None
    lines = _lines(stmt)
    text = _segment(stmt, value, lines) if lines else None
    if text is None or not lines or not _alone(stmt, lines):
        return None
    body = f'self.register_buffer("{name}", {text})'.split("\n")
    pad = _indent_of(lines[0])
    tail = lines[-1][len(lines[-1].rstrip()) :]
    comment = _trailing_comment(lines[-1])
    new = [pad + body[0], *body[1:]]
    new[-1] += f"  {comment}" if comment else tail
    return checked(Edit(stmt.snippet.path, stmt.first_line, tuple(lines), tuple(new), "register-buffer"))


def _setattr_as_buffer(stmt: Statement) -> Edit | None:
    """`setattr(self, k, v)` -> `self.register_buffer(k, v)`, on its own single line in `__init__`."""
    called = codefix.setattr_call(stmt)
    lines = _lines(stmt)
    if called is None or called[0] != "self" or not lines or len(lines) != 1 or not _alone(stmt, lines):
        return None
    comment = _trailing_comment(lines[0])
    new = f"{_indent_of(lines[0])}self.register_buffer({called[1]}, {called[2]})" + (f"  {comment}" if comment else "")
    return checked(Edit(stmt.snippet.path, stmt.first_line, tuple(lines), (new,), "register-buffer"))


def _segment(stmt: Statement, node: ast.AST, lines: list[str]) -> str | None:
    """The node's source text, from the statement's lines in the file."""
    span = _file_span(stmt, node)
    if span is None:
        return None
    (l1, c1), (l2, c2) = span
    i1, i2 = l1 - stmt.first_line, l2 - stmt.first_line
    if not 0 <= i1 <= i2 < len(lines):
        return None
    if i1 == i2:
        return lines[i1][c1:c2]
    return "\n".join([lines[i1][c1:], *lines[i1 + 1 : i2], lines[i2][:c2]])


def _trailing_comment(line: str) -> str:
    text = codefix.without_comments(line.strip())
    rest = line.strip()[len(text) :].strip()
    return rest if rest.startswith("#") else ""


def device_in_factory(stmt: Statement, device: str) -> Edit | None:
    """`torch.ones(n, n)` -> `torch.ones(n, n, device=x.device)` on the line that makes the tensor;
    `torch.LongTensor(a)` -> `torch.LongTensor(a).to(x.device)`."""
    calls = codefix.factory_calls(stmt.node)
    if not calls or any(call.end_col_offset is None for call in calls):
        return None
    changes: list[tuple[ast.AST, str, bool]] = [
        (
            _closing_parenthesis(call, (call.end_col_offset or 0) + codefix.is_host_constructor(call)),
            codefix.device_argument(call, device),
            True,
        )
        for call in calls
    ]
    return checked(splice_many(stmt, changes, "device-in-forward"))


def _closing_parenthesis(call: ast.Call, end_col: int) -> ast.AST:
    """A zero-width node at `end_col - 1`: just before the call's closing parenthesis (an added argument), or, given
    the column after it, just after it (a `.to(...)`)."""
    closing = ast.Pass()
    closing.lineno = closing.end_lineno = call.end_lineno or call.lineno
    closing.col_offset = closing.end_col_offset = end_col - 1
    return closing


def loader_arguments(source: SourceSection | None, where: str | None, wanted: dict[str, str]) -> Edit | None:
    """The user's `DataLoader(...)` call with `wanted` keywords set (num_workers=3, pin_memory=True, ...)."""
    stmt = codefix.statement_at(source, where)
    if stmt is None or not wanted:
        return None
    call = next(
        (n for n in ast.walk(stmt.node) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith("DataLoader")),
        None,
    )
    changes = _keyword_changes(call, wanted) if call is not None else None
    if changes is None:
        return None
    edit = splice_many(stmt, changes, "loader-args")
    return checked(_without_stale_comments(edit, set(wanted)) if edit is not None else None)


def _keyword_changes(call: ast.Call, wanted: dict[str, str]) -> list[tuple[ast.AST, str, bool]] | None:
    """The splices that give `call` the `wanted` keywords: a value replaced where the keyword is given, the rest
    added after the last argument. None where the call's keywords cannot be known (`**kwargs`)."""
    if any(kw.arg is None for kw in call.keywords) or call.end_col_offset is None:
        return None
    changes: list[tuple[ast.AST, str, bool]] = []
    missing = []
    for key, value in wanted.items():
        given = next((kw for kw in call.keywords if kw.arg == key), None)
        if given is not None and key == "num_workers" and not isinstance(given.value, ast.Constant):
            # the script's own option (`num_workers=args.workers`, 0 by default): kept, with a floor, so that a
            # larger value given on the command line still wins (trial 10: replaced by a literal 3)
            changes.append((given.value, f"max({ast.unparse(given.value)}, {value})", False))
        elif given is not None:
            changes.append((given.value, value, False))
        else:
            missing.append(f"{key}={value}")
    if missing:
        # right after the last argument (before a trailing comma, if the call has one), else inside the parentheses
        last = max([*call.args, *(kw.value for kw in call.keywords)], key=_end, default=None)
        anchor = last if last is not None else _closing_parenthesis(call, call.end_col_offset)
        changes.append((anchor, (", " if last is not None else "") + ", ".join(missing), True))
    return changes


# The classes of torch.distributions (2.x) whose constructors take validate_args: a call of one of these names on the
# user's line makes a distribution that checks its arguments on the host.
DISTRIBUTIONS = frozenset(
    {
        "Bernoulli", "Beta", "Binomial", "Categorical", "Cauchy", "Chi2", "ContinuousBernoulli", "Dirichlet",
        "Exponential", "FisherSnedecor", "Gamma", "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy",
        "HalfNormal", "Independent", "InverseGamma", "Kumaraswamy", "LKJCholesky", "Laplace", "LogNormal",
        "LogisticNormal", "LowRankMultivariateNormal", "MixtureSameFamily", "Multinomial", "MultivariateNormal",
        "NegativeBinomial", "Normal", "OneHotCategorical", "OneHotCategoricalStraightThrough", "Pareto", "Poisson",
        "RelaxedBernoulli", "RelaxedOneHotCategorical", "StudentT", "TransformedDistribution", "Uniform", "VonMises",
        "Weibull", "Wishart",
    }
)  # fmt: skip


def validation_off(source: SourceSection | None, where: str | None) -> Edit | None:
    """The user's line with `validate_args=False` in each torch.distributions constructor it calls."""
    stmt = codefix.statement_at(source, where)
    if stmt is None:
        return None
    calls = [
        n
        for n in ast.walk(stmt.node)
        if isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1] in DISTRIBUTIONS
    ]
    changes = [_keyword_changes(call, {"validate_args": "False"}) for call in calls]
    if not calls or any(c is None for c in changes):
        return None
    return checked(splice_many(stmt, [c for found in changes for c in found or []], "validate-args"))


def _end(node: ast.AST) -> tuple[int, int]:
    return (getattr(node, "end_lineno", 0) or 0, getattr(node, "end_col_offset", 0) or 0)


def _without_stale_comments(edit: Edit, keys: set[str]) -> Edit:
    """A comment on the edited lines that names a keyword the edit changes (`# num_workers=0: the files are
    small`) would contradict the new code: it goes, and the others stay."""
    new = list(edit.new)
    dedented = textwrap.dedent("\n".join(new))
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(dedented + "\n").readline))
    except (tokenize.TokenError, SyntaxError):
        return edit
    pad = len(new[0]) - len(dedented.split("\n", 1)[0]) if new else 0  # the indent dedent took off every line
    for tok in tokens:
        if tok.type == tokenize.COMMENT and any(key in tok.string for key in keys):
            row, col = tok.start[0] - 1, tok.start[1] + pad
            if 0 <= row < len(new):
                new[row] = new[row][:col].rstrip()
    return Edit(edit.path, edit.line, edit.old, tuple(new), edit.kind)


def read_rarely(source: SourceSection | None, where: str | None) -> Edit | None:
    """`print(f"... {loss}")` each step -> the same line under the script's own logging test (`if iter_num %
    log_interval == 0:`), or `if step % 100 == 0:` with the loop's own counter.

    Only a statement that just shows a value (a print or a logging call); a read whose result the loop uses (`x =
    loss.item()`) changes what the loop computes, and stays advice.
    """
    stmt = codefix.statement_at(source, where)
    if stmt is None or not is_display(stmt.node) or guarding_interval(stmt) is not None:
        return None  # under its own `if step % every == 0:` already: the value of `every` is what to change
    if stmt.function is None and codefix.enclosing_loop(stmt) is None:
        return None  # a module-level line seen without its loop: nothing tells how often it runs
    if loop_within_step(stmt) is not None:
        return None  # its loop's index counts passes inside one step, not steps: no test on it reads less often
    interval = read_interval(stmt)
    lines = _lines(stmt)
    if interval is None or not lines:
        return None
    pad = _indent_of(lines[0])
    step_in = "\t" if "\t" in pad else "    "  # the file's own indentation: a tab beside spaces is a TabError
    new = (
        f"{pad}if {interval.test}:  # read the device value every {interval.every} steps",
        *(f"{step_in}{line}" if line.strip() else line for line in lines),
    )
    return checked(Edit(stmt.snippet.path, stmt.first_line, tuple(lines), new, "read-rarely"))


class Interval(msgspec.Struct, frozen=True):
    """How often a fix reads a device value: `test` is the `if` condition, `every` the steps between reads."""

    test: str  # "iter_num % log_interval == 0"
    every: str  # "log_interval"


# A modulo test whose divisor names one of these is the script's logging interval, preferred over an eval interval.
_LOG_WORDS = ("log", "print", "display", "report", "verbose")
# ... and one that names these is when a checkpoint is written, or when the optimizer steps after accumulating
# gradients (`step % gradient_accumulation_steps`, often 1: the patched read still ran every step, trial 10), not a
# time to read a value.
_SAVE_WORDS = ("save", "ckpt", "checkpoint", "accum")


def read_interval(stmt: Statement) -> Interval | None:
    """The script's own `if <counter> % <interval> == 0:` test in the code around the statement (nanoGPT's `iter_num %
    log_interval`, the examples' `batch_idx % args.log_interval`), a logging one first; else `<counter> % 100` with the
    loop's counter; None when the loop has no counter."""
    counter = loop_counter(stmt)
    # outside a function, the window around the line (read line by line where it is cut inside a block)
    if stmt.function is not None:
        scope: ast.AST = stmt.function
        to_file = stmt.offset
    else:
        scope, to_file = codefix.window_tree(stmt.snippet.text), stmt.snippet.first_line - 1
    tests = _modulo_tests(scope)
    if counter is not None:
        tests = [t for t in tests if counter in t[2]]
    # a divisor first assigned below the statement is not there yet when it runs (UNet's `division_step`: the patched
    # job died of UnboundLocalError)
    late = _assigned_after(scope, stmt.first_line - to_file)
    tests = [t for t in tests if not (t[3] & late)]
    logging = [t for t in tests if any(word in t[1].lower() for word in _LOG_WORDS)]
    other = [t for t in tests if not any(word in t[1].lower() for word in _SAVE_WORDS)]
    chosen = logging or other
    if chosen:
        return Interval(f"{chosen[0][0]} == 0", chosen[0][1])
    if counter is None:
        return None
    return Interval(f"{counter} % {READ_EVERY_STEPS} == 0", str(READ_EVERY_STEPS))


def guarding_interval(stmt: Statement) -> Interval | None:
    """The script's own `if <counter> % <interval> == 0:` that the statement is already under, or None. A read under
    it that still happened at every step means the interval was 1 (a command-line flag) in this run."""
    for node in ast.walk(stmt.tree):
        if not isinstance(node, ast.If):
            continue
        modulo = _zero_modulo(node.test)
        if modulo is not None and any(n is stmt.node for child in node.body for n in ast.walk(child)):
            return Interval(ast.unparse(node.test), ast.unparse(modulo.right))
    return None


def _modulo_tests(scope: ast.AST) -> list[tuple[str, str, set[str], set[str]]]:
    """Each `a % b == 0` (or `not a % b`) in the scope: the modulo text, the divisor text, the names in `a` and those in
    `b`. A small
    literal divisor (`% 2`, alternating steps) is not an interval for reading values."""
    found = []
    for node in ast.walk(scope):
        modulo = _zero_modulo(node)
        if modulo is None:
            continue
        divisor = modulo.right
        if isinstance(divisor, ast.Constant) and not (isinstance(divisor.value, int) and divisor.value >= 10):
            continue
        names = {n.id for n in ast.walk(modulo.left) if isinstance(n, ast.Name)}
        if names:
            used = {n.id for n in ast.walk(divisor) if isinstance(n, ast.Name)}
            found.append((ast.unparse(modulo), ast.unparse(divisor), names, used))
    return found


def _assigned_after(scope: ast.AST, line: int) -> set[str]:
    """Names whose first assignment in the scope lies below `line` (the scope's own line numbers)."""
    first: dict[str, int] = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            first[node.id] = min(first.get(node.id, node.lineno), node.lineno)
    return {name for name, at in first.items() if at > line}


def _zero_modulo(node: ast.AST) -> ast.BinOp | None:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node = node.operand
        return node if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) else None
    if not (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Eq)):
        return None
    left, right = node.left, node.comparators[0]
    zero = isinstance(right, ast.Constant) and right.value == 0 and not isinstance(right.value, bool)
    return left if zero and isinstance(left, ast.BinOp) and isinstance(left.op, ast.Mod) else None


def is_display(node: ast.stmt) -> bool:
    if not isinstance(node, ast.Expr) or not isinstance(node.value, ast.Call):
        return False
    return ast.unparse(node.value.func).split(".")[-1] in _DISPLAY_CALLS


_STEP_CALLS = frozenset({"backward", "step"})


def loop_within_step(stmt: Statement) -> ast.For | None:
    """The innermost `for` around the statement when it runs inside one training step: the loop calls no
    `backward()` / `.step()`, and its function (or the script) calls one after it, in no other loop than those around
    this one (a char-RNN's `for c in range(chunk_len)` that sums the loss, then one backward; not an evaluation loop
    before the training loop). Its index counts passes, not steps."""
    loop = codefix.enclosing_loop(stmt)
    if loop is None or any(_is_step_call(n) for n in ast.walk(loop)):
        return None
    scope: ast.AST = stmt.function if stmt.function is not None else stmt.tree
    end = loop.end_lineno or loop.lineno
    loops = [n for n in ast.walk(scope) if isinstance(n, ast.For)]

    def in_the_same_step(call: ast.AST) -> bool:
        line = getattr(call, "lineno", 0)
        around = [n for n in loops if n.lineno <= line <= (n.end_lineno or n.lineno)]
        return line > end and all(n.lineno < loop.lineno and (n.end_lineno or 0) >= end for n in around)

    return loop if any(_is_step_call(n) and in_the_same_step(n) for n in ast.walk(scope)) else None


def _is_step_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _STEP_CALLS


def loop_counter(stmt: Statement) -> str | None:
    """The step counter of the innermost `for` around the statement: `step` in `for step in range(n)` or
    `for step, batch in enumerate(loader)`; a loop at a script's top level as well as one in a function."""
    loop = codefix.enclosing_loop(stmt)
    if loop is None:
        return _counter_parameter(stmt)
    call = ast.unparse(loop.iter.func) if isinstance(loop.iter, ast.Call) else ""
    if call == "range" and isinstance(loop.target, ast.Name):
        return loop.target.id
    if call == "enumerate" and isinstance(loop.target, ast.Tuple) and isinstance(loop.target.elts[0], ast.Name):
        return loop.target.elts[0].id
    return _counted_in_body(loop)


# The names a function called once per step (`def train(epoch):`, the loop in its caller) takes its count by.
_COUNTER_PARAMETERS = ("epoch", "step", "global_step", "iteration", "iter_num", "it", "batch_idx", "i")


def _counter_parameter(stmt: Statement) -> str | None:
    """`epoch` in `def train(epoch):` whose body has no loop around the statement: the caller's loop counts the
    steps and passes the count (pygcn's train(epoch); trial 10 was told to add a `step` counter)."""
    if stmt.function is None:
        return None
    names = [a.arg for a in (*stmt.function.args.posonlyargs, *stmt.function.args.args, *stmt.function.args.kwonlyargs)]
    return next((n for n in _COUNTER_PARAMETERS if n in names), None)


def _counted_in_body(loop: ast.For | ast.AsyncFor) -> str | None:
    """A counter the loop body steps itself: `global_step += 1` (UNet), `iter_num += 1` at the body's own level."""
    for node in loop.body:
        if (
            isinstance(node, ast.AugAssign)
            and isinstance(node.op, ast.Add)
            and isinstance(node.target, ast.Name)
            and isinstance(node.value, ast.Constant)
            and node.value.value == 1
        ):
            return node.target.id
    return None


# -- per finding: what the rules call ----------------------------------------------------------------------------------


def _unique(found: list[Edit | None]) -> list[Edit]:
    seen: set[tuple[str, int, tuple[str, ...]]] = set()
    out = []
    for edit in found:
        if edit is not None and (edit.path, edit.line, edit.new) not in seen:
            seen.add((edit.path, edit.line, edit.new))
            out.append(edit)
    return out


def data_edits(
    source: SourceSection | None, tensors: list[TensorSeen], batch_tensors: list[bool] | None = None
) -> list[Edit]:
    """Each tensor seen off the device moved before the call that received it, with the script's device expression
    (none when the script names no device: the fix then says to define one), and the other tensors of the batch its
    loop unpacks with it."""
    if not tensors:
        return []
    device = codefix.device_expression(source, tensors[0].where)
    if device is None:
        # no device expression to use: only the moves in the script's own words, beside the batch's other moves
        # (the one kind of move that names no device; every other kind would be written with the empty one)
        found = [move_argument(source, t.where, t.argument, t.target, "", batch_tensors=batch_tensors) for t in tensors]
        return _once_each(_unique([e for e in found if e is not None and e.kind == "move-beside"]))
    out: list[Edit] = []
    # the call's own loop first, then the same call in each other function of the file (an evaluation loop), each
    # on its own: a line inserted in `train()` does not make the same line in `test()` a repeat
    for group in [tensors, *codefix.other_uses(source, tensors, device)]:
        moves = [
            move_argument(source, t.where, t.argument, t.target, device, batch_tensors=batch_tensors) for t in group
        ]
        out.extend(_merged_inserts(_once_each(_unique(moves))))
    return out


def _once_each(found: list[Edit]) -> list[Edit]:
    """Inserted lines that an earlier edit already inserts (a label moved with its batch above the model's call, and
    again above the loss) are left out; an edit left with nothing to insert is dropped."""
    out: list[Edit] = []
    seen: set[str] = set()
    for edit in found:
        if not _is_insert(edit):
            out.append(edit)
            continue
        added = [line for line in edit.new[:-1] if line.strip() not in seen]
        seen.update(line.strip() for line in added)
        if added:
            out.append(Edit(edit.path, edit.line, edit.old, (*added, *edit.old), edit.kind))
    return out


def _is_insert(edit: Edit) -> bool:
    """Lines added above one statement that stays as it was (insert_before's shape)."""
    return len(edit.old) == 1 and edit.new[-1:] == edit.old


def _merged_inserts(found: list[Edit]) -> list[Edit]:
    """Lines inserted above the same statement (the inputs, then the labels) as one edit: edits never overlap."""
    out: list[Edit] = []
    for edit in found:
        twin = next((e for e in out if (e.path, e.line, e.old) == (edit.path, edit.line, edit.old)), None)
        if twin is not None and _is_insert(edit) and _is_insert(twin):
            out[out.index(twin)] = Edit(twin.path, twin.line, twin.old, (*twin.new[:-1], *edit.new), twin.kind)
        elif twin is None:
            out.append(edit)
    return out


def model_edits(
    source: SourceSection | None, model_where: str | None, called_where: str | None, class_name: str | None = None
) -> list[Edit]:
    device = codefix.device_expression(source, model_where or called_where)
    return _unique([move_model(source, model_where, device, class_name)]) if device is not None else []


def forward_factory_edits(source: SourceSection | None, where: str | None) -> list[Edit]:
    """`device=` on the factory call that makes a tensor inside forward (the same statement the fix shows)."""
    stmt = codefix.factory_statement(source, where)
    if stmt is None:
        return []
    device = codefix.forward_device(stmt, source)
    siblings = codefix.sibling_factory_statements(source, stmt)
    return _unique([device_in_factory(s, device) for s in (stmt, *siblings)])


def stray_edits(source: SourceSection | None, part: StrayPart | None, moved_where: str | None) -> list[Edit]:
    """The part of a model left behind: made in forward (device=), a plain attribute (register_buffer), or a
    submodule attached after the move (move again after it)."""
    if part is None or part.where is None:
        return []
    if part.created_in_forward:
        return forward_factory_edits(source, part.where)
    if part.kind == "attribute":
        stmt = codefix.statement_at(source, part.where)
        return _unique([register_buffer(stmt, part.path.rpartition(".")[2])]) if stmt is not None else []
    device = codefix.device_expression(source, moved_where or part.where)
    return _unique([move_after_attach(source, part.where, device)]) if device is not None else []


def loader_edits(source: SourceSection | None, where: str | None, wanted: dict[str, str]) -> list[Edit]:
    return _unique([loader_arguments(source, where, wanted)]) if wanted else []


def read_rarely_edits(source: SourceSection | None, where: str | None) -> list[Edit]:
    return _unique([read_rarely(source, where)])


def index_move_edits(source: SourceSection | None, where: str | None) -> list[Edit]:
    """The index tensor's move, below its siblings' (codefix.unmoved_index)."""
    stmt = codefix.statement_at(source, where)
    found = codefix.unmoved_index(source, stmt) if stmt is not None else None
    return _unique([insert_after(found.after, [found.line], "move-index")]) if found is not None else []
