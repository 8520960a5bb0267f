"""The fix for a device-mismatch crash whose host tensor is known by name (record: PlacementSection.crash_operand).

The line that crashed only uses the tensor; the fix goes where it was made: the variable's assignment (a prompt made
with `torch.zeros(...)` for `generate`), or, for a plain object's tensors (a noise scheduler's tables, which no .to()
reaches), one move of all of them after the object is built.
"""

from __future__ import annotations

import msgspec

from gputriage.record import Run
from gputriage.record.device import judged_device
from gputriage.record.placement import CrashOperand
from gputriage.rules import codefix, edits


class OperandFix(msgspec.Struct):
    title: str  # what the finding's title adds: whose tensor it is
    fix: str
    where: str | None
    evidence: dict[str, object] = msgspec.field(default_factory=dict)


def operand_fix(run: Run, host: CrashOperand) -> OperandFix:
    expected = judged_device(run) or "cuda"
    evidence: dict[str, object] = {"host_tensor": _described(host), "host_tensor_where": host.where}
    if host.shape:
        evidence["cpu_shape"] = host.shape
    if host.kind == "variable":
        return _variable_fix(run, host, expected, evidence)
    if not host.owner_is_module:
        return _object_fix(run, host, expected, evidence)
    device, define = codefix.device_for(run.source, host.owner_where or host.where, expected)
    moved = codefix.moved_model_line(run.source, host.owner_where, device, host.owner, what=host.owner or "module")
    if moved and not define:  # the script's own device expression: the same line as an edit for --patch
        evidence.update(edits.evidence_of(edits.model_edits(run.source, host.owner_where, None, host.owner)))
    fix = moved or f"# move the {host.owner} once, where it is built ({host.owner_where or host.where}): .to({device})"
    return OperandFix(
        title=f"the CPU tensor is {_described(host)}, a {host.kind} of the {host.owner} built at {host.owner_where}",
        fix="\n".join([*define, fix]),
        where=host.owner_where or host.where,
        evidence=evidence,
    )


def _described(host: CrashOperand) -> str:
    return f"{host.owner}.{host.name}" if host.owner else host.name


def _variable_fix(run: Run, host: CrashOperand, expected: str, evidence: dict[str, object]) -> OperandFix:
    """`context = torch.zeros((1, 1), dtype=torch.long, device=device)`: made on the device where it is made."""
    in_callee = _made_in_callee(run, host)
    if in_callee is not None:
        fixed, factory, device = in_callee
        edit = edits.device_in_factory(factory, device)
        evidence.update(edits.evidence_of([edit] if edit is not None else []))
        evidence["host_tensor_made_where"] = host.made_where
        why = f"# {host.name} comes from line {factory.first_line}, which makes it on the CPU: make it on the device"
        return OperandFix(
            title=f"the CPU tensor is {host.name} ({host.where}), made on the CPU at {host.made_where}",
            fix=f"{why}\n{fixed}",
            where=host.made_where,
            evidence=evidence,
        )
    device, define = codefix.device_for(run.source, host.where, expected)
    stmt = codefix.statement_at(run.source, host.where)
    made = codefix.with_device(stmt, device) if stmt is not None else None
    if stmt is not None and made is not None:
        alike = codefix.adjacent_factory_statements(run.source, stmt)
        also = [(s, m) for s in alike if (m := codefix.with_device(s, device)) is not None]
        found = [edits.device_in_factory(s, device) for s in (stmt, *(s for s, _ in also))]
        evidence.update(edits.evidence_of([e for e in found if e is not None]))
        fix = [f"# {host.name} is made on the CPU at line {stmt.first_line}: make it on the device there", made]
        if also:
            lines = ", ".join(str(s.first_line) for s, _ in also)
            fix[0] += f"; line{'s' if len(also) > 1 else ''} {lines} make{'' if len(also) > 1 else 's'} tensors alike"
            fix += [m for _, m in also]
    else:
        line = host.where.rpartition(":")[2] if host.where else "?"
        fix = [f"{host.name} = {host.name}.to({device})  # after line {line}, where {host.name} is made"]
        batch = run.placement.batch_tensors if run.placement is not None else None
        # a name the loop unpacks from the loader's batch: the batch's other tensors are on the CPU with it
        siblings = codefix.loop_batch_siblings(run.source, host.where, host.name, batch)
        fix += [f"{n} = {n}.to({device})" for n in siblings]
    return OperandFix(
        title=f"the CPU tensor is {host.name}, made at {host.where}",
        fix="\n".join([*define, *fix]),
        where=host.where,
        evidence=evidence,
    )


def _made_in_callee(run: Run, host: CrashOperand) -> tuple[str, codefix.Statement, str] | None:
    """The factory statement in the user's function that made the tensor (`return torch.zeros(1, self.hidden_size)`
    in `initHidden`) with `device=` written in, the statement, and that device; None where that function has no
    device to give it."""
    stmt = codefix.statement_at(run.source, host.made_where)
    if stmt is None:
        return None
    device = codefix.forward_device(stmt, run.source)
    if device == "x.device":  # a function with no device, no tensor argument and no module: nothing to name
        return None
    fixed = codefix.with_device(stmt, device)
    return (fixed, stmt, device) if fixed is not None else None


def _object_fix(run: Run, host: CrashOperand, expected: str, evidence: dict[str, object]) -> OperandFix:
    """A plain object's tensors: nothing moves them, so move every one of them once, after the object is built."""
    where = host.owner_where or host.where
    device, define = codefix.device_for(run.source, where, expected)
    names = ", ".join([host.name, *host.others][:4]) + (", ..." if len(host.others) > 3 else "")
    why = (
        f"# {host.owner} is a plain object, not an nn.Module: no .to() reaches its tensors\n"
        f"# ({names}), so they stay on the CPU"
    )
    built = codefix.statement_at(run.source, host.owner_where) if host.owner_variable else None
    if built is not None and host.owner_variable:
        obj = host.owner_variable
        moves = [
            f"for name, value in vars({obj}).items():",
            "    if torch.is_tensor(value):",
            f"        setattr({obj}, name, value.to({device}))",
        ]
        edit = edits.insert_after(built, moves, kind="move-object-tensors")
        evidence.update(edits.evidence_of([edit] if edit is not None else []))
        last = built.first_line + (built.node.end_lineno or built.node.lineno) - built.node.lineno
        then = f"# move them once, after line {last} builds it (or make each with device= where it is set):"
        fix = [why, then, *moves]
    else:
        fix = [why, f"self.{host.name} = self.{host.name}.to({device})  # where it is set ({host.where}); each alike"]
    evidence["host_tensor_owner_where"] = host.owner_where
    return OperandFix(
        title=f"the CPU tensor is {_described(host)}, set at {host.where}, and nothing moves a plain object's tensors",
        fix="\n".join([*define, *fix]),
        where=where,
        evidence=evidence,
    )
