"""The fix of host-sync-in-loop, written from the line that reads the device value: the user's statement, names and
loop counter, and the change that fits what the line does with the value.

- an accumulator (`train_loss += loss.item()`): keep it a tensor on the device (`+= loss.detach()`), read it once
  where it is shown;
- `torch.cuda.synchronize()`: drop it, or keep it on the steps that are timed or logged;
- a print or a log call: the same line under the script's own logging test, or every READ_EVERY_STEPS steps;
- anything else (`.cpu().numpy()` for a metric): the user's line, with what to do instead.
Pure: it reads the recorded source only.
"""

from __future__ import annotations

import ast
import textwrap

from gputriage.record.source import SourceSection
from gputriage.rules import codefix, edits

GENERIC_FIX = (
    "# keep running values on the device and read them rarely:\n"
    "running_loss += loss.detach()\n"
    f"if step % {edits.READ_EVERY_STEPS} == 0:\n"
    f"    print(running_loss.item() / {edits.READ_EVERY_STEPS}); running_loss.zero_()"
)
_HOST_READS = frozenset({"item", "cpu", "numpy", "tolist"})


def sync_fix(
    source: SourceSection | None, where: str | None, kind: str | None = None, caller_where: str | None = None
) -> str:
    stmt = codefix.statement_at(source, where)
    if stmt is not None and (stepped := _returned_to_environment(source, stmt, caller_where)) is not None:
        return _environment_fix(stmt.text, stepped)
    if kind == "cpu-index":
        line = f"{stmt.text}\n" if stmt is not None else ""
        head = (
            "# a device tensor indexed by an index tensor on the CPU: CUDA copies the index over from pageable\n"
            f"# memory, and that copy first waits for the device, every step:\n{line}"
        )
        moved = codefix.unmoved_index(source, stmt) if stmt is not None else None
        if moved is not None:
            others = ", ".join(moved.siblings[:4]) + (", ..." if len(moved.siblings) > 4 else "")
            return (
                f"{head}# {moved.name} is never moved: the script moves {others} but not it; move it with them, once "
                f"(after line {moved.after.first_line}):\n{moved.line}"
            )
        return (
            f"{head}# make the index on the device: torch.randperm(n, device=x.device),"
            " torch.arange(n, device=x.device), or\n"
            "# a torch.randn(..., device=x.device).argsort(...) where a random order is made"
        )
    if kind == "nonzero":
        line = f"{stmt.text}\n" if stmt is not None else ""
        return (
            "# a data-dependent shape (x[mask], nonzero, unique, masked_select) makes the host wait for the device to\n"
            f"# count the result, every step:\n{line}"
            "# keep the shape fixed on the device: torch.where(mask, x, fill), x.masked_fill(~mask, fill), or indices\n"
            "# computed once outside the loop when the mask does not change (a fixed eye/diagonal mask)"
        )
    if stmt is None:
        branch = codefix.branch_at(source, where)
        return _branch_fix(branch) if branch is not None else GENERIC_FIX
    guard = edits.guarding_interval(stmt)
    return _interval_too_small(stmt.text, guard) if guard is not None else _fix_of(stmt)


VALIDATE_ARGS_OFF = "torch.distributions.Distribution.set_default_validate_args(False)"


def validation_fix(source: SourceSection | None, where: str | None) -> str:
    """A read inside torch.distributions' argument checks: the user's line with the checks off, or the switch."""
    head = (
        "# torch.distributions checks its arguments on the host (validate_args, on by default): each check waits for\n"
        "# the device, every step. They catch invalid parameters (NaN probabilities): keep them on while debugging\n"
    )
    edit = edits.validation_off(source, where)
    if edit is None:
        return f"{head}# switch them off once, before the loop:\n{VALIDATE_ARGS_OFF}"
    line = textwrap.dedent("\n".join(edit.new))
    return f"{head}{line}\n# or switch them off once, before the loop: {VALIDATE_ARGS_OFF}"


def _fix_of(stmt: codefix.Statement) -> str:
    """The fix that fits what the line does with the device value it reads."""
    interval = edits.read_interval(stmt)
    # no counter in the loop: `step` is one to add, and the fix says how (a test on a name the script lacks raised
    # NameError when pasted)
    counter = "" if interval is not None else _counter_line(stmt)
    interval = interval or edits.Interval(f"step % {edits.READ_EVERY_STEPS} == 0", "100")
    every = interval.every
    node = stmt.node
    plain = _no_reading_fix(stmt)
    if plain is not None:
        return plain
    if _calls(node, "synchronize"):
        return (
            f"# {stmt.text} waits until the device has finished all its work, every step:\n"
            f"# drop it, or keep it only on the steps you time or log:\n{counter}"
            f"if {interval.test}:\n{_indented(stmt.text)}"
        )
    stepped = _environment_step(stmt)
    if stepped is not None:
        return _environment_fix(stmt.text, stepped)
    if edits.is_display(node):
        return _display_fix(stmt, interval, counter)
    accumulated = _accumulated_on_device(node)
    if accumulated is not None:
        target, text = accumulated
        fix = (
            f"# keep {target} on the device (a tensor) instead of reading the value every step:\n{text}\n"
            f"# and read it once where it is shown: {target}.item() (one wait, not one per step)"
        )
        shown = _shown_each_step(stmt, target)
        if shown is not None:
            # cifar's progress line prints the running loss every batch: the read moves there, one per step still
            fix += (
                f"\n# it is shown every step, at line {shown.lineno + stmt.offset}: {ast.unparse(shown)}\n"
                f"# a tensor shown there is read there, a wait per step again: show it every {every} steps"
            )
        return fix
    return (
        f"# this line reads a device value on the host every step:\n{stmt.text}\n"
        "# compute it with torch ops on the device and keep the result a tensor (.detach()),\n"
        f"# then read it with .item() once where it is shown (every {every} steps, or once per epoch)"
    )


def _display_fix(stmt: codefix.Statement, interval: edits.Interval, counter: str) -> str:
    inner = edits.loop_within_step(stmt)
    if inner is not None:
        return (
            f"# this line runs on every pass of `for {ast.unparse(inner.target)} in ...`, inside one training step: it "
            "waits for the device\n# that many times a step. Show the value once per step, after that loop (or not "
            f"at all):\n{stmt.text}   # move it below the loop, at the loop's indentation"
        )
    return (
        f"# showing a device value waits for the device: show it every {interval.every} steps\n{counter}"
        f"if {interval.test}:\n{_indented(stmt.text)}"
    )


def _no_reading_fix(stmt: codefix.Statement) -> str | None:
    """A line whose wait no reading interval removes: a check, a host-side update, a freed cache."""
    node = stmt.node
    if isinstance(node, ast.Assert):
        # a check, not a shown value: reading it less often is no fix for a check that should not run in training
        return (
            f"# {stmt.text}\n"
            "# the assert checks a device value on the host at every step, so the host waits for the device each\n"
            "# time: delete it once it has served, or keep it for debugging only (`python -O` skips asserts)"
        )
    host_update = _host_copy_fed_to_an_op(node)
    if host_update is not None:
        return (
            f"# {stmt.text}\n"
            f"# {host_update} copies a device tensor to the host at every step, to update a tensor kept there\n"
            "# (an EMA, a running copy): keep that tensor on the device too (move it once, before the loop) and drop\n"
            "# the copy"
        )
    if _calls(node, "empty_cache"):
        return (
            f"# {stmt.text} returns the cached blocks to the driver, every step: it waits for the device (cudaFree),\n"
            "# and the next step allocates them again (cudaMalloc). Delete it from the loop; if memory runs short,\n"
            "# call it once between phases (after training, before evaluation), or lower the batch size"
        )
    return None


def feeds_environment(source: SourceSection | None, where: str | None, caller_where: str | None = None) -> bool:
    """The line reads the action of an environment that runs on the host: a read no change of the loop removes. A
    function that returns the value it reads (`return action.item()` in `select_action`) feeds the environment its
    caller steps (`action = select_action(state)`, then `env.step(action)`)."""
    stmt = codefix.statement_at(source, where)
    if stmt is None:
        return False
    return _environment_step(stmt) is not None or _returned_to_environment(source, stmt, caller_where) is not None


def _returned_to_environment(
    source: SourceSection | None, stmt: codefix.Statement, caller_where: str | None
) -> str | None:
    """`return action.item()` whose caller steps an environment with what it got: that step call's text."""
    if not isinstance(stmt.node, ast.Return) or stmt.node.value is None or not _host_read(stmt.node.value):
        return None
    caller = codefix.statement_at(source, caller_where)
    return _environment_step(caller) if caller is not None else None


def _environment_step(stmt: codefix.Statement) -> str | None:
    """`env.step(action.item())`, or `a = action.cpu().numpy()` then `envs.step(a)` in the same loop: the value read
    is the action of an environment that runs on the host (gym's `step` API). The step call's text, else None."""
    names = {t.id for n in ast.walk(stmt.node) if isinstance(n, ast.Assign) for t in _names(n.targets)}
    loop = codefix.enclosing_loop(stmt)
    scope: list[ast.AST] = [stmt.node, *([loop] if loop is not None else [])]
    for call in (n for node in scope for n in ast.walk(node) if isinstance(n, ast.Call)):
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr != "step":
            continue
        # the receiver names an environment somewhere: env, envs, self.env, train_env, envs.worlds[0]
        if not any("env" in n.lower() for n in _identifiers(func.value)):
            continue
        read_here = any(_host_read(a) for a in call.args) and _within(call, stmt.node)
        passed = any(isinstance(a, ast.Name) and a.id in names for a in call.args)
        if read_here or passed:
            return ast.unparse(call)
    return None


def _host_copy_fed_to_an_op(node: ast.AST) -> str | None:
    """`ema_p.mul_(d).add_(p.detach().cpu(), alpha=1 - d)`: a `.cpu()` whose result goes straight into a tensor
    method or a torch function, so the value is no shown one; the copy's text, else None."""
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        func = call.func
        if not isinstance(func, ast.Attribute) or func.attr in _KEEPS_ON_THE_HOST:
            continue
        for arg in (*call.args, *(k.value for k in call.keywords)):
            if isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) and arg.func.attr == "cpu":
                return ast.unparse(arg)
    return None


# methods that take a host value by design: a log, a list of results, a file
_KEEPS_ON_THE_HOST = frozenset({"print", "append", "extend", "format", "write", "info", "log", "add_scalar"})


def _identifiers(node: ast.expr) -> list[str]:
    return [
        n.id if isinstance(n, ast.Name) else n.attr for n in ast.walk(node) if isinstance(n, (ast.Name, ast.Attribute))
    ]


def _names(targets: list[ast.expr]) -> list[ast.Name]:
    return [n for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _host_read(node: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _HOST_READS
        for n in ast.walk(node)
    )


def _within(node: ast.AST, outer: ast.AST) -> bool:
    return any(n is node for n in ast.walk(outer))


def _environment_fix(text: str, step_call: str) -> str:
    """The action an environment needs on the host: the read is inherent; what amortises it."""
    return (
        f"# {text}\n"
        f"# {step_call} runs on the host and takes the action there: one read per step is inherent to stepping it.\n"
        "# Make one read serve many: step N environments at once (gymnasium.vector.SyncVectorEnv or AsyncVectorEnv)\n"
        "# and read all N actions with one .cpu(); a small policy may also run faster on the CPU, beside the\n"
        "# environment, than on a GPU that waits for every step"
    )


def _branch_fix(header: str) -> str:
    """A read in an `if` / `while` test: the loop's path depends on the device value, so the host waits for it."""
    return (
        f"# {header}\n"
        "# the loop decides its path from a device value (a data-dependent branch or early stop): the host waits for\n"
        "# the device at each test. Test it less often (every N steps), or keep the choice on the device\n"
        "# (torch.where, a mask) and stop on a fixed number of steps"
    )


def _counter_line(stmt: codefix.Statement) -> str:
    """The comment that gives the loop a step counter: its own `for` header with `enumerate`, or a counter to keep."""
    loop = codefix.enclosing_loop(stmt)
    if loop is None:
        return "# count the steps: step = 0 before the loop, step += 1 in it\n"
    target = ast.unparse(loop.target)  # a tuple comes back in parentheses: `(images, labels)`
    return f"# count the steps: for step, {target} in enumerate({ast.unparse(loop.iter)}):\n"


def _interval_too_small(text: str, guard: edits.Interval) -> str:
    """The read is under the script's own interval test already, and still ran every step: the interval is the fix."""
    every, steps = guard.every, edits.READ_EVERY_STEPS
    owner, _, name = every.partition(".")
    on_command_line = owner in ("args", "opt", "opts") and name.isidentifier()
    flag = f" (--{name.replace('_', '-')} {steps} on the command line)" if on_command_line else ""
    quoted = "\n".join(f"# {line}" for line in text.splitlines())
    # measured: the test held at every probed step. Either the interval is 1 in this run, or the counter starts
    # again at 0 each time round an outer loop, which may be in a caller (forward-forward trains layer by layer,
    # each with its own `i`): the value of `every` itself was not read, so neither is said to be the case
    return (
        f"{quoted}\n"
        f"# runs only when {guard.test}, yet it read the device at every probed step: {every} is 1 in this run,\n"
        "# or the counter starts again at 0 each time round an outer loop. Count the steps with a counter that\n"
        f"# keeps going, and set {every} to {steps}{flag} to read the value every {steps} steps"
    )


def _calls(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Call) and ast.unparse(n.func).split(".")[-1] == name for n in ast.walk(node))


class _ItemToDetach(ast.NodeTransformer):
    """`x.item()` -> `x.detach()`: the same value, left on the device."""

    def __init__(self) -> None:
        self.changed = 0

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "item" and not node.args and not node.keywords:
            self.changed += 1
            return ast.Call(func=ast.Attribute(value=func.value, attr="detach", ctx=ast.Load()), args=[], keywords=[])
        return node


def _shown_each_step(stmt: codefix.Statement, target: str) -> ast.stmt | None:
    """A display statement of the loop around `stmt` (a print, a progress bar's update) that reads `target`, outside
    any `if`: the accumulated value is shown, and read, at every step."""
    loop = codefix.enclosing_loop(stmt)
    if loop is None:
        return None
    for node in loop.body:
        if node is stmt.node or not edits.is_display(node):
            continue
        if any(isinstance(n, ast.Name) and n.id == target for n in ast.walk(node)):
            return node
    return None


def _accumulated_on_device(node: ast.stmt) -> tuple[str, str] | None:
    """`total += loss.item()` (or `/ n`, `* n`): the target and the statement with `.detach()` for `.item()`, when
    `.item()` is the line's only host read."""
    if not isinstance(node, ast.AugAssign):
        return None
    reads = {ast.unparse(n.func).split(".")[-1] for n in ast.walk(node.value) if isinstance(n, ast.Call)}
    if (reads & _HOST_READS) != {"item"}:
        return None
    swap = _ItemToDetach()
    value = swap.visit(ast.parse(ast.unparse(node.value), mode="eval")).body
    if not swap.changed:
        return None
    return ast.unparse(node.target), ast.unparse(ast.AugAssign(target=node.target, op=node.op, value=value))


def _indented(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.splitlines())
