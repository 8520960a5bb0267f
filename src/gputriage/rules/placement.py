"""Rungs 2-3: the model and the data are on the device the job is meant to use; device-mismatch crashes explained.

The evidence is what the forward pre-hooks saw at the first steps (see gputriage.collectors.probe.placement), judged
against the expected device type (`--expect-device`, or the first accelerator). With no accelerator expected ("cpu")
the placement rules have nothing to judge and say so once.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.compute import MixedDeviceOp
from gputriage.record.device import judged_device
from gputriage.record.edit import Edit
from gputriage.record.placement import ModelInfo, StrayPart, TensorSeen
from gputriage.record.source import DEVICE_STRING
from gputriage.rules import codefix, edits
from gputriage.rules.devicechoice import cpu_chosen
from gputriage.rules.operandfix import OperandFix, operand_fix
from gputriage.rules.registry import rule

# The texts of a device-mismatch RuntimeError, per backend and per PyTorch generation.
MISMATCH_PATTERNS = (
    re.compile(r"Expected all tensors to be on the same device", re.IGNORECASE),  # cuda, mps, xpu
    re.compile(r"Tensor on device \S+ is not on the expected device \S+"),  # meta
    re.compile(r"Placeholder storage has not been allocated on MPS device"),  # mps
    re.compile(r"Expected object of device type \w+ but got device type \w+"),  # torch < 1.5
    re.compile(r"is on (?:CPU|cpu|GPU|cuda)[^,]*, but expected (?:it )?to be on (?:GPU|CPU|cuda|cpu)"),
    re.compile(r"Input and (?:parameter|hidden) tensors are not at the same device"),  # RNNs
    re.compile(r"to have the same device as tensor for argument"),
    re.compile(r"indices should be either on cpu or on the same device as the indexed tensor"),
    re.compile(r"Expected (?:a|all) \w+ tensors? to be on the same device"),
    re.compile(r"expected self and \w+ to be on the same device"),  # cuda masked_fill_, index ops
)
# "Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor)" is a device mismatch only when the device
# part differs; the same sentence with Half vs Float is a dtype mismatch.
_TYPE_PAIR = re.compile(r"Input type \(([\w.]+)\) and weight type \(([\w.]+)\) should be the same")
_DEVICE_WORD = re.compile(r"\b(cuda(?::\d+)?|cpu|mps(?::\d+)?|xpu(?::\d+)?|meta|npu(?::\d+)?|hpu(?::\d+)?)\b")


def device_type(device: str) -> str:
    return device.split(":", 1)[0]


def is_device_mismatch(message: str | None) -> bool:
    if not message:
        return False
    if any(p.search(message) for p in MISMATCH_PATTERNS):
        return True
    pair = _TYPE_PAIR.search(message)
    if pair is not None:
        return _tensor_type_device(pair.group(1)) != _tensor_type_device(pair.group(2))
    return False


def _tensor_type_device(type_name: str) -> str:
    parts = type_name.split(".")
    return parts[1] if len(parts) == 3 else "cpu"  # torch.cuda.FloatTensor -> cuda; torch.FloatTensor -> cpu


def mismatch_devices(message: str) -> list[str]:
    """The devices a mismatch message names, in order of first mention."""
    found: list[str] = []
    for word in _DEVICE_WORD.findall(message):
        if word not in found:
            found.append(word)
    return found


def crash_evidence(run: Run) -> dict[str, object]:
    """What the crash adds to a placement finding: the error and where it happened."""
    proc = run.process
    if proc is None or not is_device_mismatch(proc.exception_message):
        return {}
    evidence: dict[str, object] = {"crashed_with": _first_line(proc.exception_message or "")}
    if proc.crash_where:
        evidence["crash_where"] = proc.crash_where
    if proc.crash_module:
        evidence["crash_module"] = proc.crash_module
    return evidence


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0][:300] if text.strip() else ""


# -- model placement -------------------------------------------------------------------------------------------------


def _off_numel(model: ModelInfo, expected: str) -> int:
    return sum(n for dev, n in model.devices.items() if device_type(dev) != expected)


def _total_numel(model: ModelInfo) -> int:
    return sum(model.devices.values())


def model_findings(run: Run) -> Iterator[Finding]:
    expected = judged_device(run)
    if run.placement is None or expected in (None, "cpu"):
        return
    for model in _models_judged(run, expected):
        total, off = _total_numel(model), _off_numel(model, expected)
        if total == 0 or off == 0:
            continue
        if off == total and not _only_listed_parts_off(model, expected):
            yield _model_on_cpu(run, model, expected)
        else:
            yield _model_partly_on_cpu(run, model, expected, off, total)


def _models_judged(run: Run, expected: str) -> list[ModelInfo]:
    """The models that ran; and, where the job died mixing devices with no model that ran off the device, the one
    module the script made and never moved (its weights are the crash's host tensor: the DQN tutorial's target_net)."""
    assert run.placement is not None
    models = run.placement.models
    proc = run.process
    crashed = proc is not None and is_device_mismatch(proc.exception_message)
    unmoved = run.placement.unmoved_at_crash
    if crashed and len(unmoved) == 1 and not any(_off_numel(m, expected) for m in models):
        return [*models, *unmoved]
    return models


def _only_listed_parts_off(model: ModelInfo, expected: str) -> bool:
    """A model moved to the device whose tensors all sit in modules kept in a plain list (`self.layers = [...]`): the
    list, not a missing .to(), is what left them behind, so it is a partly-moved model with the list as its part."""
    moved = model.moved_to is not None and device_type(model.moved_to) == expected
    return moved and bool(model.stray) and all(p.kind == "listed" for p in model.stray)


def _model_on_cpu(run: Run, model: ModelInfo, expected: str) -> Finding:
    devices = sorted({device_type(d) for d in model.devices})
    evidence: dict[str, object] = {
        "model": model.name,
        "parameter_count": model.parameter_count,
        "elements_per_device": dict(model.devices),
        "expected_device": expected,
    }
    if model.called_where:
        evidence["first_forward_where"] = model.called_where
    evidence.update(crash_evidence(run))
    chosen = cpu_chosen(run)
    if chosen is None:  # a model moved to the CPU on purpose: another .to() changes nothing
        built = _class_name(model.name)
        evidence.update(edits.evidence_of(edits.model_edits(run.source, model.where, model.called_where, built)))
    else:
        evidence.update(chosen.evidence())
    if model.held_in:
        evidence["held_in"] = model.held_in
    return Finding(
        code="model-on-cpu",
        rung=3,
        severity=Severity.CRITICAL,
        title=f"The model {model.name} is on {'/'.join(devices)}, not on {expected}",
        evidence=evidence,
        fix=chosen.fix(expected) if chosen is not None else _model_fix(run, model, expected),
        where=(chosen.where if chosen is not None else None) or model.where or model.called_where,
    )


def _model_fix(run: Run, model: ModelInfo, expected: str) -> str:
    """`net = Net().to(device)` on the line that builds the model, in the script's names."""
    device, define = codefix.device_for(run.source, model.where or model.called_where, expected)
    moved = codefix.moved_model_line(run.source, model.where, device, _class_name(model.name))
    held = _held_in_note(model)
    if moved is not None:
        return "\n".join([*define, moved, *held])
    built = f"  # {model.where}" if model.where else ""
    batches = [] if model in _unmoved(run) else ["# and move every batch too, before the model"]
    return "\n".join([*define, f"model = {_class_name(model.name)}(...).to({device}){built}", *held, *batches])


def _unmoved(run: Run) -> list[ModelInfo]:
    return run.placement.unmoved_at_crash if run.placement is not None else []


def _held_in_note(model: ModelInfo) -> list[str]:
    """Why moving the holder did not (and would not) move this module."""
    if not model.held_in:
        return []
    holder = model.held_in.partition(".")[0]
    return [
        f"# {model.held_in} is a plain Python list, tuple or dict: {holder}.to() and {holder}.parameters() never "
        f"reach the {_class_name(model.name)} in it;",
        "# an nn.ModuleList (or nn.ModuleDict) registers them, so one .to() on the holder moves them all",
    ]


def _class_name(name: str) -> str:
    """'Sequential' for a model named 'Agent.actor (Sequential)' (a submodule called on its own)."""
    return name.rpartition(" (")[2].rstrip(")") if name.endswith(")") else name


def _model_partly_on_cpu(run: Run, model: ModelInfo, expected: str, off: int, total: int) -> Finding:
    names = [f"{p.path} ({_kind_text(p)}, {p.numel} elements on {p.device})" for p in model.stray]
    evidence: dict[str, object] = {
        "model": model.name,
        "stray_parts": names,
        "stray_elements": off,
        "stray_pct": round(100.0 * off / total, 2),
        "expected_device": expected,
    }
    if model.moved_where:
        evidence["moved_where"] = model.moved_where
    evidence.update(crash_evidence(run))
    first = model.stray[0] if model.stray else None
    label = ", ".join(p.path for p in model.stray[:4]) or "some parameters"
    severity, title = Severity.CRITICAL, f"Part of the model {model.name} stays off {expected}: {label}"
    if _unused_attributes(run, model):
        severity = Severity.INFO
        title = (
            f"Plain tensor attributes of {model.name} stay off {expected}, and the device computation never mixed "
            f"them in: {label}"
        )
        evidence["steps_completed"] = run.steps.steps_total if run.steps is not None else None
    # every plain attribute left behind gets its line (SiameseNetwork's pixel_mean and pixel_std: fixing the first
    # alone, the patched job died on the second)
    alike = [p for p in model.stray if first is not None and first.kind == "attribute" == p.kind][:MAX_FIXED_PARTS]
    fixed_parts: list[StrayPart | None] = list(alike) or [first]
    found = [e for p in fixed_parts for e in edits.stray_edits(run.source, p, model.moved_where)]
    evidence.update(edits.evidence_of(list({(e.path, e.line): e for e in found}.values())))
    return Finding(
        code="model-partly-on-cpu",
        rung=3,
        severity=severity,
        title=title,
        evidence=evidence,
        fix=_attributes_fix(run, alike) if len(alike) > 1 else _partly_fix(run, model, first),
        where=(first.where if first and first.where else None) or model.where,
    )


def _unused_attributes(run: Run, model: ModelInfo) -> bool:
    """Only plain tensor attributes stay behind, and nothing shows the device computation uses them un-moved.

    Such an attribute is often host-side by design (a Lightning module's `example_input_array`, a fixed validation
    noise that is `.type_as()`-ed before use). Mixed into a device op as it is, it raises a device mismatch on the
    first step. So when training steps completed without such a crash, or the crash is the batch's (data-on-cpu),
    the attributes are reported as a note, not as the cause.
    """
    if not model.stray or any(p.kind != "attribute" for p in model.stray):
        return False
    proc = run.process
    crashed = proc is not None and is_device_mismatch(proc.exception_message)
    if crashed:
        return any(True for _ in data_findings(run))
    return run.steps is not None and bool(run.steps.steps_total)


_KIND_TEXTS = {
    "attribute": "plain tensor attribute, not a registered buffer",
    "listed": "modules in a plain Python container, not an nn.ModuleList",
}


def _kind_text(part: StrayPart) -> str:
    kind = _KIND_TEXTS.get(part.kind, part.kind)
    return f"{kind}, made inside forward" if part.created_in_forward else kind


MAX_FIXED_PARTS = 6


def _attributes_fix(run: Run, parts: list[StrayPart]) -> str:
    """Each plain tensor attribute registered as a buffer, on its own line: once per line of code (the blocks of a
    transformer share their class's `self.bias = ...`)."""
    once: dict[str, StrayPart] = {}
    for part in parts:
        once.setdefault(part.where or part.path, part)
    fixes = []
    for part in once.values():
        fixed = _buffer_line(run, part)
        owner, _, leaf = part.path.rpartition(".")
        target = f"self.{owner}" if owner else "self"
        fixes.append(fixed or f'{target}.register_buffer("{leaf}", ...)  # instead of {target}.{leaf} = ...')
    return (
        "# plain tensor attributes never follow model.to(); register each as a buffer (they then move with the "
        "model):\n" + "\n".join(fixes)
    )


def _buffer_line(run: Run, part: StrayPart) -> str | None:
    """The plain attribute's assignment as a `register_buffer` call, in the user's words, where its line is known."""
    stmt = codefix.statement_at(run.source, part.where)
    return codefix.register_buffer_fix(stmt, part.path.rpartition(".")[2]) if stmt is not None else None


def _partly_fix(run: Run, model: ModelInfo, part: StrayPart | None) -> str:
    if part is not None and part.created_in_forward:
        fixed = _made_in_forward_fix(run, part.where)
        if fixed is not None:
            return fixed
    if part is not None and part.kind == "attribute":
        fixed = _buffer_line(run, part)
        if fixed is not None:
            return (
                "# a plain tensor attribute never follows model.to(); register it as a buffer (it then moves with "
                f"the model):\n{fixed}"
            )
        owner, _, leaf = part.path.rpartition(".")
        target = f"self.{owner}" if owner else "self"
        return (
            "# a plain tensor attribute never follows model.to(); register it as a buffer in __init__:\n"
            f'{target}.register_buffer("{leaf}", torch.ones(...))  # instead of {target}.{leaf} = torch.ones(...)'
        )
    if part is not None and part.kind == "listed":
        stmt = codefix.statement_at(run.source, part.where)
        fixed = codefix.module_container_fix(stmt) if stmt is not None else None
        return (
            f"# {part.path} keeps modules in a plain Python container: model.to() never moves them, and\n"
            "# model.parameters() never yields them (the optimizer does not train them either); register them:\n"
            + (fixed or f"self.{part.path.rpartition('.')[2]} = nn.ModuleList([...])  # or nn.ModuleDict({{...}})")
        )
    moved = f" (the model was moved at {model.moved_where})" if model.moved_where else ""
    name = part.path if part is not None else "the new layer"
    return (
        f"# {name} was created or attached after model.to(device){moved}:\n"
        "# attach every submodule first, then move the whole model once\n" + _move_again_line(run, model, part)
    )


def _move_again_line(run: Run, model: ModelInfo, part: StrayPart | None) -> str:
    """The move the patch inserts below the attaching line, in the script's names (`encoder1.to(device)  # after
    line 399: ...`); the generic line only where that statement is not in the record."""
    found = edits.stray_edits(run.source, part, model.moved_where) if part is not None else []
    added = [e for e in found if e.kind == "move-model"]
    if not added:
        return "model = model.to(device)"
    edit = added[0]
    return f"{edit.new[-1].strip()}  # after line {edit.line}: {codefix.without_comments(edit.old[-1].strip())}"


def _made_in_forward_fix(run: Run, where: str | None) -> str | None:
    """`mask = torch.ones(n, n, device=device)`: the line that makes the tensor inside forward, on the right device."""
    stmt = codefix.factory_statement(run.source, where)
    if stmt is None:
        return None
    device = codefix.forward_device(stmt, run.source)
    fixed = codefix.with_device(stmt, device)
    if fixed is None:
        return None
    siblings = [
        (s.first_line, codefix.with_device(s, device)) for s in codefix.sibling_factory_statements(run.source, stmt)
    ]
    more = [(line, text) for line, text in siblings if text is not None]
    if not more:
        why = f"# made on the CPU inside forward, at every call (line {stmt.first_line}): make it on the input's device"
        return f"{why}\n{fixed}"
    lines = ", ".join(str(line) for line in sorted([stmt.first_line, *(line for line, _ in more)]))
    why = f"# made on the CPU inside forward, at every call (lines {lines}): make them on the input's device"
    return "\n".join([why, fixed, *(text for _, text in more)])


# -- data placement --------------------------------------------------------------------------------------------------


def data_findings(run: Run) -> Iterator[Finding]:
    expected = judged_device(run)
    if run.placement is None or expected in (None, "cpu"):
        return
    tensors = run.placement.tensors
    off = [t for t in tensors if t.shape and device_type(t.device) != expected]
    # A host tensor that is a view of one seen before it (a loss inside forward gets the labels the loop passed to
    # the model) is that tensor: moving the first moves both. Its role tells what the first one is.
    seen_as = {t.described(): t for t in off}
    followers = [t for t in off if t.same_as in seen_as]
    label_sources = {t.same_as for t in followers if t.role == "label"}
    off = [t for t in off if t not in followers]
    on_cpu_models = {
        m.name for m in run.placement.models if _total_numel(m) and _off_numel(m, expected) == _total_numel(m)
    }
    into_model = [
        t
        for t in off
        if t.role == "input"
        and not _host_side_argument(t, tensors, expected)
        and not _follows_the_model(t, tensors, on_cpu_models, expected)
    ]
    # `model(**batch, labels=labels)`: labels that enter the model (which computes the loss) are still the labels
    labels = [
        t for t in off if t.role == "label" or t.described() in label_sources or (t in into_model and _label_keyword(t))
    ]
    labels = [t for t in labels if not _beside_a_host_prediction_without_gradient(t, tensors, expected)]
    inputs = [t for t in into_model if t not in labels]
    if inputs or labels:
        yield _data_on_cpu(run, inputs, labels, expected)


# Keyword names of a model's arguments that carry the labels (Hugging Face models compute the loss inside forward).
_LABEL_KEYWORDS = ("label", "target")


def _label_keyword(t: TensorSeen) -> bool:
    return (
        t.argument is not None
        and not t.argument.startswith("args[")
        and any(word in t.argument.lower() for word in _LABEL_KEYWORDS)
    )


def _beside_a_host_prediction_without_gradient(t: TensorSeen, seen: list[TensorSeen], expected: str) -> bool:
    """The loss's prediction is on the CPU too, and no gradient flows through it (`loss_fn(torch.rand(4, 10),
    torch.tensor([1, 5, 3, 7]))`, a tutorial's demo before training): not the training's loss; a GPU machine runs it
    on the CPU the same. A model's output brought back with `.cpu()` keeps its gradient: that one is still judged."""
    return any(
        o.role == "prediction"
        and o.target == t.target
        and o.where == t.where
        and device_type(o.device) != expected
        and o.requires_grad is False
        for o in seen
    )


def _host_side_argument(t: TensorSeen, seen: list[TensorSeen], expected: str) -> bool:
    """A 1-D integer tensor next to device inputs is host-side by design: `lengths` for pack_padded_sequence. Not
    when the keyword says it is the labels (`model(**batch, labels=labels)`)."""
    if len(t.shape) != 1 or t.dtype not in ("int64", "int32"):
        return False
    if _label_keyword(t):
        return False
    return _beside_a_device_input(t, seen, expected)


def _beside_a_device_input(t: TensorSeen, seen: list[TensorSeen], expected: str) -> bool:
    """Another input of the same call is on the expected device: the batch itself was moved."""
    return any(o.target == t.target and o.role == "input" and device_type(o.device) == expected for o in seen)


def _follows_the_model(t: TensorSeen, seen: list[TensorSeen], on_cpu_models: set[str], expected: str) -> bool:
    """An input on the CPU into a model that is all on the CPU, beside an input of the same call on the device: the
    batch was moved, and this one was made from the model's own weights (an RNN's `init_hidden` with
    `weight.new_zeros`). It follows the model: moving the model is the fix, and model-on-cpu says so."""
    return t.target in on_cpu_models and _beside_a_device_input(t, seen, expected)


def _data_on_cpu(run: Run, inputs: list[TensorSeen], labels: list[TensorSeen], expected: str) -> Finding:
    """One finding for the batch: the inputs (into the model) and/or the labels (into the loss)."""
    first = (inputs or labels)[0]
    both = inputs + labels
    evidence: dict[str, object] = {
        "tensors": [f"{t.target} {t.argument}: {t.dtype}{t.shape} on {t.device} at {t.where}" for t in both[:6]],
        "inputs_off_device": len(inputs),
        "labels_off_device": len(labels),
        "expected_device": expected,
    }
    evidence.update(crash_evidence(run))
    chosen = cpu_chosen(run)
    maker = _made_by_a_helper(run, both)
    if maker is not None:  # the one tensor that crashed is made on the CPU by a function of the user's: fixed there
        evidence.update(maker.evidence)
    elif chosen is None:
        evidence.update(edits.evidence_of(edits.data_edits(run.source, both, _batch_tensors(run))))
    else:
        evidence.update(chosen.evidence())
    if maker is not None:
        fix, where = maker.fix, maker.where
    elif chosen is not None:
        fix, where = chosen.fix(expected), chosen.where or first.where
    else:
        made = codefix.made_before_loop(run.source, first)
        if made is not None:  # the fix is where it was made, before the loop: the finding points there
            evidence["host_tensor_made_where"] = made
        fix, where = _data_fix(run, inputs, labels, expected), made or first.where
    if inputs and labels:
        what = "The inputs and the labels reach the model and the loss"
    elif inputs:
        what = "The inputs reach the model"
    else:
        what = "The labels reach the loss"
    title = f"{what} on {device_type(first.device)}, not on {expected}"
    stmt = codefix.statement_at(run.source, first.where)
    expr = codefix.call_argument(stmt, first.argument, first.target) if stmt is not None else None
    if stmt is not None and expr is not None and codefix.cpu_moves_of_call(stmt, expr):
        # `criterion(out.cpu(), y.cpu())`: the script itself moves the call's operands off the device (a re-judge:
        # "the labels reach the loss on cpu" beside a fix that drops both .cpu())
        title = (
            f"{first.target} runs on {device_type(first.device)}, not on {expected}: the script moves its operands "
            f"there with .cpu() at {first.where}"
        )
    return Finding(
        code="data-on-cpu",
        rung=2,
        severity=Severity.CRITICAL,
        title=title,
        evidence=evidence,
        fix=fix,
        where=where,
    )


def _made_by_a_helper(run: Run, off: list[TensorSeen]) -> OperandFix | None:
    """The crash's host tensor, the only one off the device, made by a factory in a function of the user's that
    the loop calls (`hidden = rnn.initHidden()`): `device=` there fixes every call, with no copy per step."""
    host = run.placement.crash_operand if run.placement is not None else None
    if host is None or host.made_where is None or len(off) != 1 or off[0].shape != host.shape:
        return None
    told = operand_fix(run, host)
    return told if told.where == host.made_where else None


def _data_fix(run: Run, inputs: list[TensorSeen], labels: list[TensorSeen], expected: str) -> str:
    """`images = images.to(device, non_blocking=True)` before `output = model(images)`, in the script's names."""
    device, lines = codefix.device_for(run.source, (inputs or labels)[0].where, expected)
    moves = codefix.moved_everywhere(run.source, [*inputs, *labels], device, _batch_tensors(run))
    if lines and not any(device in line for line in moves):
        lines = []  # every move is in the script's own words (`.cuda()` beside the batch's): no device to define
    if device.startswith("accelerator."):
        # accelerate places the batches of a DataLoader given to prepare(): one left out arrives on the CPU (a trial's
        # imagenette loop); the moves above work, prepare is accelerate's own way
        moves.append(
            "# or pass the training DataLoader to accelerator.prepare(...) with the model and the optimizer: "
            "accelerate then places every batch"
        )
    return "\n".join([*lines, *moves])


def _batch_tensors(run: Run) -> list[bool] | None:
    """Which elements of the loader's last tuple batch are tensors, when the probes saw one."""
    return run.placement.batch_tensors if run.placement is not None else None


# -- rules -------------------------------------------------------------------------------------------------------------


@rule
def placement_rule(run: Run) -> list[Finding]:
    """data-on-cpu, model-on-cpu, model-partly-on-cpu."""
    return [*data_findings(run), *model_findings(run)]


# CUDA's message when a forked child (a DataLoader worker) touches the device the parent initialised.
FORKED_CUDA = "Cannot re-initialize CUDA in forked subprocess"


@rule
def device_in_loader_worker(run: Run) -> list[Finding]:
    """device-in-loader-worker: the job died because a DataLoader worker put a tensor on the GPU."""
    proc = run.process
    if proc is None or FORKED_CUDA not in (proc.exception_message or ""):
        return []
    where = proc.worker_where or proc.crash_where
    return [
        Finding(
            code="device-in-loader-worker",
            rung=2,
            severity=Severity.CRITICAL,
            title=f"A DataLoader worker puts a tensor on the GPU at {where}, which CUDA forbids in a forked worker",
            evidence={"error": FORKED_CUDA, "worker_where": proc.worker_where, "crash_where": proc.crash_where},
            fix=_worker_fix(run, proc.worker_where, proc.crash_where),
            where=where,
        )
    ]


def _worker_fix(run: Run, worker_where: str | None, loop_where: str | None) -> str:
    """The dataset's line without its device move, and the loop's move of the batch, in the script's names."""
    lines = ["# keep __getitem__ on the CPU (workers load in parallel; pin_memory=True speeds the copy):"]
    stmt = codefix.statement_at(run.source, worker_where)
    on_cpu = codefix.without_device_moves(stmt) if stmt is not None else None
    lines.append(on_cpu if on_cpu is not None else "# in __getitem__: no .to(device) / .cuda() / device=")
    if stmt is not None and on_cpu is not None:  # `y = torch.tensor(..., device="cuda")` next to the x that died first
        alike = codefix.adjacent_statements(run.source, stmt, lambda s: codefix.without_device_moves(s) is not None)
        lines += [fixed for s in alike if (fixed := codefix.without_device_moves(s)) is not None]
    device = codefix.device_expression(run.source, worker_where) or codefix.device_expression(run.source, loop_where)
    device = device or '"cuda"'
    batch = codefix.loop_targets(run.source, loop_where)
    lines.append("# and move the batch in the training loop, where it arrives:")
    lines += [f"{name} = {name}.to({device}, non_blocking=True)" for name in batch] or [
        f"x = x.to({device}, non_blocking=True)"
    ]
    return "\n".join(lines)


@rule
def device_mismatch_rule(run: Run) -> list[Finding]:
    """device-mismatch-error, when the crash is a device mismatch (or, before any crash, the op census saw a CPU
    tensor meet the device's tensors) and nothing more specific explains it."""
    if any(True for _ in data_findings(run)) or any(True for _ in model_findings(run)):
        return []
    proc = run.process
    if proc is None or not is_device_mismatch(proc.exception_message):
        return census_mismatch(run)
    message = proc.exception_message or ""
    evidence: dict[str, object] = {
        "error": _first_line(message),
        "devices": mismatch_devices(message),
    }
    if proc.crash_module:
        evidence["module"] = proc.crash_module
    module = f" inside {proc.crash_module}" if proc.crash_module else ""
    title = f"The script died mixing tensors on {' and '.join(mismatch_devices(message)) or 'two devices'}" + module
    fix = (
        "# move the tensor created on the other device to the model's device, e.g.\n"
        "t = t.to(next(model.parameters()).device)\n"
        "# tensors made inside forward: torch.zeros(..., device=x.device)"
    )
    where = proc.crash_where
    if _HOST_INDEXED in message:
        title = "The script died indexing a tensor on the CPU with indices on the device" + module
        fix = _host_indexed_fix(run, where) or fix
    origin = _crash_origin(run, proc.crash_where)
    host = run.placement.crash_operand if run.placement is not None else None
    if origin is not None:  # the failing op's CPU operand was made inside forward: that line is the one to change
        evidence.update(_origin_evidence(run, origin))
        title += f": the CPU tensor was made at {origin.cpu_tensor_where}"
        fix, where = _mixed_fix(run, origin), origin.cpu_tensor_where
    elif host is not None and host.where is not None:  # whose tensor it is says where it was made
        told = operand_fix(run, host)
        evidence.update(told.evidence)
        title += f": {told.title}"
        fix, where = told.fix, told.where
    elif (made := _factory_on_the_line(run, where)) is not None:  # `y_hat + torch.randn(n, 1)`: made right there
        fix, found = made
        evidence.update(edits.evidence_of(found))
        title += ": the CPU tensor is made on the line that crashed"
    return [
        Finding(
            code="device-mismatch-error",
            rung=3,
            severity=Severity.CRITICAL,
            title=title,
            evidence=evidence,
            fix=fix,
            where=where,
        )
    ]


def _factory_on_the_line(run: Run, where: str | None) -> tuple[str, list[Edit]] | None:
    """The crash's own statement makes a tensor with a factory and no device= (noise in a Lightning training_step:
    `y_hat + 0.01 * torch.randn(y_hat.shape[0], 1)`): made on the device of the tensor it meets there, or of the
    script's own device expression. A trial got the template `t = t.to(next(model.parameters()).device)`."""
    stmt = codefix.statement_at(run.source, where)
    if stmt is None or not codefix.factory_calls(stmt.node):
        return None
    device = _partner_device(stmt) or codefix.device_expression(run.source, where)
    device = device or codefix.forward_device(stmt, run.source)
    fixed = codefix.with_device(stmt, device)
    if fixed is None:
        return None
    edit = edits.device_in_factory(stmt, device)
    return (
        f"# line {stmt.first_line} makes a tensor on the CPU and uses it with tensors on the device: make it there\n"
        f"{fixed}",
        [edit] if edit is not None else [],
    )


def _partner_device(stmt: codefix.Statement) -> str | None:
    """`y_hat.device` for `y_hat + 0.01 * torch.randn(...)`: the variable the made tensor meets in the same
    arithmetic (a name that is no call, no module attribute)."""
    calls = {id(c) for c in codefix.factory_calls(stmt.node)}
    for node in ast.walk(stmt.node):
        if not isinstance(node, ast.BinOp):
            continue
        sides = (node.left, node.right)
        holds = [any(id(n) in calls for n in ast.walk(side)) for side in sides]
        if holds.count(True) != 1:
            continue
        other = sides[holds.index(False)]
        name = next((n.id for n in ast.walk(other) if isinstance(n, ast.Name) and n.id not in ("torch", "np")), None)
        if name is not None and not any(isinstance(n, ast.Call) for n in ast.walk(other)):
            return f"{name}.device"
    return None


_HOST_INDEXED = "indices should be either on cpu or on the same device as the indexed tensor"


def _host_indexed_fix(run: Run, where: str | None) -> str | None:
    """`labels[idx]` with `labels` on the CPU and `idx` on the device: the indexed tensor is the one to move, once."""
    stmt = codefix.statement_at(run.source, where)
    if stmt is None:
        return None
    subscripts = [n for n in ast.walk(stmt.node) if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name)]
    if not subscripts:
        return None
    names = list(dict.fromkeys(n.value.id for n in subscripts if isinstance(n.value, ast.Name)))
    # the step's own results (`output = model(x)`) are on the device: the CPU one was made before the loop or the
    # step function (a parameter, a global)
    scope: ast.AST = codefix.enclosing_loop(stmt) or stmt.function or stmt.node
    made_here = {
        t.id
        for n in ast.walk(scope)
        if isinstance(n, ast.Assign) and n is not stmt.node
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    names = [n for n in names if n not in made_here] or names
    device = codefix.device_expression(run.source, where) or '"cuda"'
    moves = "\n".join(f"{name} = {name}.to({device})" for name in names)
    return (
        f"# {stmt.text}\n# indexes a tensor on the CPU with indices on the device, which CUDA refuses: move the "
        f"indexed tensor\n# to the device once, where it is made (before the loop), not the indices back:\n{moves}"
    )


def _crash_origin(run: Run, crash_where: str | None) -> MixedDeviceOp | None:
    """The mixed-device op seen at the crash's line, when the probes saw it (its CPU operand's origin is known)."""
    if run.compute is None or crash_where is None:
        return None
    return next((o for o in run.compute.mixed_device_ops if o.where == crash_where and o.cpu_tensor_where), None)


def census_mismatch(run: Run) -> list[Finding]:
    """A CPU tensor met tensors on the expected device in one op: CUDA refuses that op, the meta stand-in may not."""
    expected = judged_device(run)
    if run.compute is None or not run.compute.mixed_device_ops or expected in (None, "cpu"):
        return []
    ops = sorted(run.compute.mixed_device_ops, key=lambda o: (o.cpu_tensor_where is None, -o.count))
    first = ops[0]
    made = f" made at {first.cpu_tensor_where}" if first.cpu_tensor_where else ""
    evidence: dict[str, object] = {
        **_origin_evidence(run, first),
        "cpu_shape": first.cpu_shape,
        "devices": [expected, "cpu"],
        "mixed_ops": [f"{o.name} ×{o.count} at {o.where}" for o in ops[:6]],
        "window_steps": run.compute.window_steps,
    }
    return [
        Finding(
            code="device-mismatch-error",
            rung=3,
            severity=Severity.CRITICAL,
            title=(
                f"A CPU tensor{made} meets tensors on {expected} in {first.name} at every step: "
                f"on a GPU this fails with a device mismatch"
            ),
            evidence=evidence,
            fix=_mixed_fix(run, first),
            where=first.cpu_tensor_where or first.where,
        )
    ]


def _origin_evidence(run: Run, op: MixedDeviceOp) -> dict[str, object]:
    """What a mixed-device op says of its CPU operand: the op and its line, where the operand was made, and the edit
    that makes it on the device (for --patch)."""
    evidence: dict[str, object] = {"op": op.name, "op_where": op.where, "cpu_tensor_where": op.cpu_tensor_where}
    if op.cpu_tensor_where:
        evidence.update(edits.evidence_of(edits.forward_factory_edits(run.source, op.cpu_tensor_where)))
    return evidence


def _mixed_fix(run: Run, op: MixedDeviceOp) -> str:
    fixed = _made_in_forward_fix(run, op.cpu_tensor_where) if op.cpu_tensor_where else None
    if fixed is not None:
        return fixed
    return (
        f"# the CPU operand of {op.name} at {op.where}: make it on the device of the other operands, e.g.\n"
        "t = torch.arange(n, device=x.device)  # tensors made inside forward: device=x.device"
    )


# `device == "cuda"` with `device` a torch.device: its __eq__ takes devices only, so a string is never equal.
# The value is the collector's own DEVICE_STRING, quoted on both sides, so the comparison read back is the one the
# collector found, not another string test earlier on the same line (`if mode == "eval" and device == "cuda":`).
# The collector also takes the reversed order (`"cuda" == device`), so both orders are read back; the earlier one
# on the line is the comparison.
_DEVICE_COMPARED = (
    re.compile(
        rf"(?P<name>[A-Za-z_][\w.]*)(?P<op>\s*(?:==|!=)\s*)(?P<quote>['\"])(?P<value>{DEVICE_STRING})(?P=quote)"
    ),
    re.compile(
        rf"(?P<quote>['\"])(?P<value>{DEVICE_STRING})(?P=quote)(?P<op>\s*(?:==|!=)\s*)(?P<name>[A-Za-z_][\w.]*)"
        r"(?![\w.(\[])"
    ),
)


def _device_comparison(text: str) -> re.Match[str] | None:
    found = [m for pattern in _DEVICE_COMPARED if (m := pattern.search(text)) is not None]
    return min(found, key=lambda m: m.start()) if found else None


@rule
def device_compared_to_string(run: Run) -> list[Finding]:
    """device-compared-to-string: `if device == "cuda":` with `device = torch.device(...)` is always False, so the
    script's GPU branch never runs (PyTorch's speech tutorial: its num_workers=1 and pin_memory=True for the GPU)."""
    if run.source is None:
        return []
    found = []
    for snippet in run.source.device_compares():
        match = _device_comparison(snippet.text)
        if match is None:
            continue
        name, value = match.group("name"), match.group("value")
        quote = match.group("quote")
        if ":" in value:  # `device == "cuda:0"`: compared as a device, index and all
            fixed_line = snippet.text.replace(f"{quote}{value}{quote}", f"torch.device({quote}{value}{quote})", 1)
        else:
            fixed_line = snippet.text[: match.end("name")] + ".type" + snippet.text[match.end("name") :]
        where = f"{snippet.path}:{snippet.first_line}"
        edit = Edit(snippet.path, snippet.first_line, (snippet.text,), (fixed_line,), "device-type")
        said = "!=" if "!=" in match.group("op") else "=="
        compared = " ".join(match.group(0).replace(said, f" {said} ").split())  # as written, spaced as PEP 8 does
        always = "true" if said == "!=" else "false"
        found.append(
            Finding(
                code="device-compared-to-string",
                rung=3,
                severity=Severity.WARNING if judged_device(run) not in (None, "cpu") else Severity.INFO,
                title=(
                    f"`{compared}` is always {always}: {name} is a torch.device, which never equals a "
                    f"string, so the script's branch for {value} {'always' if said == '!=' else 'never'} runs"
                ),
                evidence={"comparison": snippet.text.strip(), "device_variable": name, **edits.evidence_of([edit])},
                fix=f"{fixed_line.strip()}   # compare the device's type (or a torch.device), not the device object",
                where=where,
            )
        )
    return found


@rule
def cpu_run_rule(run: Run) -> list[Finding]:
    """With no accelerator to expect, say plainly that rungs 2-5 describe a CPU run."""
    if run.command != "run" or judged_device(run) != "cpu":
        return []
    return [
        Finding(
            code="cpu-run",
            rung=2,
            severity=Severity.INFO,
            title="No accelerator was expected, so rungs 2 to 5 describe a run on the CPU",
            evidence={"expected_device": "cpu"},
            fix="# rung 1 says why no accelerator is usable; once one is, run again (or pass --expect-device cuda)",
        )
    ]
