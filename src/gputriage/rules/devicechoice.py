"""Where the script itself chose the CPU, so that moving more tensors "to the device" would change nothing.

Two ways a whole job lands on the CPU although it is meant for the GPU:
- the script's own device expression was the CPU when it ran: `model.to(DEVICE)` with `DEVICE` chosen by a flag left at
  "cpu" (`--backend cpu`) or a config; the fix names the assignment that chose it;
- a framework that places the model and the batches for the script was told to use the CPU:
  `Trainer(accelerator="cpu")`, `Fabric(accelerator="cpu")`, `Accelerator(cpu=True)`, `TrainingArguments(no_cuda=True)`
  or `use_cpu=True`, `from_pretrained(..., device_map="cpu")`; the fix is that call with the keyword changed.
Pure: it reads the record and the captured source only.
"""

from __future__ import annotations

import ast

import msgspec

from gputriage.record import Run
from gputriage.record.device import device_type
from gputriage.record.source import SourceSection
from gputriage.rules import codefix


class FrameworkChoice(msgspec.Struct, frozen=True):
    """A framework call that chose the CPU for the job, as written and with the keyword that chooses the GPU."""

    where: str  # file:line of the statement
    written: str  # trainer = Trainer(accelerator="cpu", devices=1)
    fixed: str  # trainer = Trainer(accelerator="gpu", devices=1)
    keyword: str  # accelerator="cpu"


class CpuChosen(msgspec.Struct, frozen=True):
    """The job's device choice was the CPU: by the script's device expression, or by a framework call."""

    moved_where: str | None  # the `.to(DEVICE)` that sent the model to the CPU
    expression: str | None  # DEVICE
    defined: tuple[str, str] | None  # (file:line, text) of `DEVICE = ...`
    framework: FrameworkChoice | None = None

    @property
    def where(self) -> str | None:
        """The line a finding should point at instead of its own: the one that chose the CPU for every model and
        batch (the framework call, or the device variable's assignment); None when the choice was not found."""
        if self.framework is not None:
            return self.framework.where
        return self.defined[0] if self.defined is not None else None

    def evidence(self) -> dict[str, object]:
        if self.framework is not None:
            return {"device_chosen_at": self.framework.where, "device_chosen_by": self.framework.keyword}
        if self.defined is not None:
            return {"device_chosen_at": self.defined[0]}
        return {}

    def fix(self, expected: str) -> str:
        if self.framework is not None:
            chosen = self.framework
            return "\n".join(
                [
                    f"# {chosen.where} runs the whole job on the CPU ({chosen.keyword}): the framework places the",
                    "# model and every batch where this call says, so no .to() in the script changes it:",
                    chosen.written,
                    "# choose the GPU there:",
                    chosen.fixed,
                ]
            )
        name = self.expression or "the device"
        lines = [f"# {name} was the CPU when this ran: the model was moved there at {self.moved_where}"]
        if self.defined is not None:
            lines += [f"# {self.defined[0]} chooses it:", codefix.without_comments(self.defined[1])]
        lines.append(f"# make it choose {expected} on the GPU machine (the flag, config or condition it reads)")
        return "\n".join(lines)


def cpu_chosen(run: Run) -> CpuChosen | None:
    """The job's own device choice was the CPU, when a model ran wholly on the CPU and either the script moved it there
    with its device expression (`model.to(DEVICE)` with DEVICE = cpu) or a framework call in the script chose the
    CPU; None otherwise."""
    placement = run.placement
    on_cpu_models = [
        m
        for m in (placement.models if placement is not None else [])
        if m.devices and all(device_type(d) == "cpu" for d in m.devices)
    ]
    if not on_cpu_models:
        return None
    # A framework told in so many words to use the CPU decides first: it moved the model itself (Lightning's strategy
    # calls .to() from inside fit(), which looks like a move by the script's line).
    framework = framework_cpu_choice(run.source)
    if framework is not None:
        return CpuChosen(None, None, None, framework)
    for model in on_cpu_models:
        # moved there by the script (not a model that leaves the device at the end: Lightning's teardown calls .cpu())
        if model.moved_to is not None and device_type(model.moved_to) == "cpu" and model.moved_where:
            name = codefix.device_expression(run.source, model.moved_where)
            defined = None
            if name is not None and name.isidentifier():
                defined = codefix.device_definition(run.source, model.moved_where, name)
            return CpuChosen(model.moved_where, name, defined)
    return None


# keyword -> (the constant that chooses the CPU, the one that chooses the GPU)
_CPU_KEYWORDS: dict[str, tuple[object, object]] = {
    "accelerator": ("cpu", "gpu"),  # Lightning Trainer / Fabric
    "gpus": (0, 1),  # Lightning < 2
    "cpu": (True, False),  # accelerate's Accelerator
    "no_cuda": (True, False),  # transformers' TrainingArguments (older)
    "use_cpu": (True, False),  # transformers' TrainingArguments
    "device_map": ("cpu", "auto"),  # from_pretrained / pipeline
}


def framework_cpu_choice(source: SourceSection | None) -> FrameworkChoice | None:
    """The first captured framework call whose device keyword is the constant that means the CPU."""
    for snippet in source.device_choices() if source is not None else []:
        text = codefix.without_comments(snippet.text.strip())
        tree = codefix.parse_code(text)
        if tree is None:
            continue
        for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
            for keyword in call.keywords:
                found = _cpu_keyword(keyword)
                if found is not None:
                    old = ast.get_source_segment(text, keyword) or ast.unparse(keyword)
                    fixed = text.replace(old, found, 1)
                    return FrameworkChoice(f"{snippet.path}:{snippet.first_line}", text, fixed, old)
    return None


def _cpu_keyword(keyword: ast.keyword) -> str | None:
    """`accelerator="gpu"` for `accelerator="cpu"`, or None when the keyword does not choose the CPU."""
    if keyword.arg not in _CPU_KEYWORDS or not isinstance(keyword.value, ast.Constant):
        return None
    cpu, gpu = _CPU_KEYWORDS[keyword.arg]
    value = keyword.value.value
    if isinstance(value, str) and isinstance(cpu, str) and value.lower() == cpu:
        return f'{keyword.arg}="{gpu}"'
    if type(value) is type(cpu) and value == cpu:
        return f"{keyword.arg}={gpu!r}"
    return None
