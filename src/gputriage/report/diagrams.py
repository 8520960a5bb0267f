"""The two pictures people draw to explain an idle GPU, as data filled with what the Run record measured.

- the relationship diagram User -> DataLoader {dataset, batch_size} -> Model {architecture, parameters}
  -> GPU {usage, memory};
- the sequence diagram load data -> send data -> perform computation -> return results -> backpropagate, with the
  measured time per step on each arrow and the arrow where the time goes highlighted.

`svg.py` and `mermaid.py` draw these; the data is built once so that the HTML and the Markdown always agree.
"""

from __future__ import annotations

import math

import msgspec

from gputriage.record import Run
from gputriage.record.numbers import PARTS, StepNumbers, step_numbers, util_text, window_of
from gputriage.record.placement import ModelInfo
from gputriage.record.steps import LoaderInfo
from gputriage.record.trace import RankTrace
from gputriage.report import fmt
from gputriage.report.views import gpu_summary, model_device, primary_steps


class Attribute(msgspec.Struct):
    name: str
    value: str
    measured: bool  # False: the value reads "not measured" and is drawn greyed out


class Entity(msgspec.Struct):
    key: str  # user | loader | model | gpu
    title: str
    attributes: list[Attribute] = msgspec.field(default_factory=list)


class RelationshipDiagram(msgspec.Struct):
    entities: list[Entity]
    edge_labels: list[str]  # between consecutive entities


class Message(msgspec.Struct):
    number: int
    action: str  # "load data"
    detail: str  # which phases of the Step record it covers
    source: str  # participant key
    target: str
    time_s: float | None  # per step
    share_pct: float | None  # of the step's wall time
    highlighted: bool = False
    caveat: str | None = None  # what the arrow's words do not say, shown even when it is highlighted


class SequenceDiagram(msgspec.Struct):
    participants: list[tuple[str, str]]  # (key, label)
    messages: list[Message]
    step_time_s: float | None
    unattributed_s: float | None  # the "other" part: time no probe attributed to an arrow, per step
    basis: str  # where the numbers come from and which steps they rest on, in one phrase
    unattributed_pct: float | None = None
    unattributed_highlighted: bool = False  # "other" is the largest part of the step


def message_label(message: Message) -> str:
    """'1. load data: 79.2 ms (30.8%)', as every view writes it."""
    share = f" ({fmt.share(message.share_pct)})" if message.share_pct is not None else ""
    return f"{message.number}. {message.action}: {fmt.duration(message.time_s)}{share}"


def footer_text(diagram: SequenceDiagram) -> str:
    """The line under the sequence diagram: the step time, its basis, and the part no arrow carries."""
    text = f"step time {fmt.duration(diagram.step_time_s)} ({diagram.basis})"
    if diagram.unattributed_s is not None:
        share = f" ({fmt.share(diagram.unattributed_pct)})" if diagram.unattributed_pct is not None else ""
        text += f"; other, not attributed to an arrow: {fmt.duration(diagram.unattributed_s)}{share}"
    return text


def _attr(name: str, value: str | None) -> Attribute:
    return Attribute(name, fmt.text(value), value is not None)


def _first_model(run: Run) -> ModelInfo | None:
    if run.placement is None or not run.placement.models:
        return None
    return run.placement.models[0]


def _device_text(model: ModelInfo | None) -> str | None:
    if model is None or not model.devices:
        return None
    total = sum(model.devices.values())
    parts = sorted(model.devices.items(), key=lambda kv: -kv[1])
    if len(parts) == 1 or total <= 0:
        return parts[0][0]
    return ", ".join(f"{dev} {100 * n / total:.0f}%" for dev, n in parts)


def _world_size(run: Run) -> int | None:
    if run.ranks is not None and run.ranks.world_size:
        return run.ranks.world_size
    return run.rank_info.world_size if run.rank_info is not None else None


_WRAPPERS = {"ddp": "DistributedDataParallel", "dataparallel": "DataParallel"}


def _architecture(run: Run, model: ModelInfo | None) -> str | None:
    """The model's class; for a data-parallel job, the wrapped class and its wrapper."""
    info = run.rank_info
    if info is None and run.ranks is not None and run.ranks.ranks:
        info = min(run.ranks.ranks, key=lambda i: i.rank)
    wrap = info.wrap if info is not None else None
    if wrap is not None and wrap.module_class:
        return f"{wrap.module_class} in {_WRAPPERS.get(wrap.kind, wrap.kind)}"
    return model.name if model else None


def build_relationship(run: Run) -> RelationshipDiagram:
    loader = run.steps.loader if run.steps is not None else None
    model = _first_model(run)
    gpu = gpu_summary(run, model_device(model))
    usage = None
    if gpu.util_mean_pct is not None:
        usage = f"{util_text(gpu.util_mean_pct)} mean ({gpu.util_source})"
    memory = None
    if gpu.memory_peak_bytes is not None:
        memory = f"{fmt.size(gpu.memory_peak_bytes)} peak"
        if gpu.memory_total_bytes:
            memory += f" of {fmt.size(gpu.memory_total_bytes)}"
    device = gpu.label
    if device is not None and gpu.other_devices > 0:
        device += f" (+{gpu.other_devices} more)"
    user_attrs = [_attr("command", " ".join(run.argv) if run.argv else None)]
    world = _world_size(run)
    if world is not None:
        user_attrs.append(_attr("world size", str(world)))
    return RelationshipDiagram(
        entities=[
            Entity("user", "User", user_attrs),
            Entity(
                "loader",
                "DataLoader",
                [
                    _attr("dataset", loader.dataset_class if loader else None),
                    _attr("batch_size", str(loader.batch_size) if loader and loader.batch_size is not None else None),
                    _attr(
                        "num_workers", str(loader.num_workers) if loader and loader.num_workers is not None else None
                    ),
                    _attr("load per batch", _load_text(loader)),
                ],
            ),
            Entity(
                "model",
                "Model",
                [
                    _attr("architecture", _architecture(run, model)),
                    _attr("parameters", fmt.count(model.parameter_count) if model else None),
                    _attr("device", _device_text(model)),
                ],
            ),
            _accelerator(run, device, usage, memory),
        ],
        edge_labels=["runs", "feeds batches", "runs on"],
    )


def _accelerator(run: Run, device: str | None, usage: str | None, memory: str | None) -> Entity:
    ranks = run.trace.ranks if run.trace is not None else []
    if ranks and all(r.gpu_events == 0 for r in ranks) and device is None:
        return Entity("gpu", "Accelerator", [_attr("device", "none: the trace holds no device kernel")])
    return Entity("gpu", "GPU", [_attr("device", device), _attr("usage", usage), _attr("memory", memory)])


def _load_text(loader: LoaderInfo | None) -> str | None:
    """LoaderInfo.batch_load_s, the number the worker advice weighs; derived ones say so."""
    if loader is None or loader.batch_load_s is None:
        return None
    derived = " (from the workers' pace)" if loader.batch_load_source == "workers-derived" else ""
    return fmt.duration(loader.batch_load_s) + derived


PARTICIPANTS = [("loader", "DataLoader"), ("host", "Training loop (CPU)"), ("gpu", "GPU")]
# A trace without any device kernel: nothing in the report speaks of a GPU.
CPU_TRACE_PARTICIPANTS = [*PARTICIPANTS[:2], ("gpu", "CPU ops (no accelerator kernel in the trace)")]

# (source, target) of each arrow of record/numbers.py's PARTS, in order; "other" has no arrow.
_ENDS = {
    "data_wait": ("loader", "host"),
    "h2d": ("host", "gpu"),
    "forward": ("gpu", "gpu"),
    "sync": ("gpu", "host"),
    "backprop": ("host", "gpu"),
}
_ARROWS = tuple(p for p in PARTS if p.key in _ENDS)


def build_sequence(run: Run) -> SequenceDiagram:
    rank, steps = primary_steps(run)
    numbers = step_numbers(steps)
    if numbers is not None:
        unit = run.steps.unit_note() if run.steps is not None else None
        return _sequence_from_numbers(rank, numbers, unit)
    if run.trace is not None and run.trace.ranks:
        return _sequence_from_trace(run)
    if steps:
        return _unmeasured(f"not measured: {window_of(steps).describe()} completed after the warm-up step")
    return _unmeasured("no step timing was measured")


def _sequence_from_numbers(rank: int | None, numbers: StepNumbers, unit: str | None = None) -> SequenceDiagram:
    messages = [
        Message(n, part.label, part.detail, *_ENDS[part.key], part.time_s, part.share_pct)
        for n, part in enumerate((numbers.part(spec.key) for spec in _ARROWS), start=1)
    ]
    other = numbers.part("other")
    largest = max(numbers.parts, key=lambda p: p.time_s)
    if largest.key != "other":
        _highlight(messages)
    where = f", rank {rank}" if rank is not None else ""
    basis = f"mean per step over {numbers.window.describe()}{where}"
    if numbers.outlier():
        slowest, median = fmt.duration(numbers.slowest_s), fmt.duration(numbers.median_s)
        basis += f"; the slowest step took {slowest}, against a median of {median}"
    if unit is not None:
        basis += f"; {unit}"
    return SequenceDiagram(
        PARTICIPANTS,
        messages,
        numbers.step_time_s,
        other.time_s,
        basis,
        unattributed_pct=other.share_pct,
        unattributed_highlighted=largest.key == "other" and other.time_s > 0,
    )


def _unmeasured(basis: str) -> SequenceDiagram:
    messages = [
        Message(n, spec.label, spec.detail, *_ENDS[spec.key], None, None) for n, spec in enumerate(_ARROWS, start=1)
    ]
    return SequenceDiagram(PARTICIPANTS, messages, None, None, basis)


# What a profiler trace can put on each arrow, as shares of the step (the TensorBoard plugin's step partition), with
# what the share covers. A trace does not split forward from backward: both are GPU kernels, shown on arrow 3.
_TRACE_DETAILS = (
    "DataLoader share of the step",
    "memcpy share of the step",
    "GPU kernels, forward and backward together",
    "host syncs and device-to-host copies blocking the step; not in the partition: the GPU can work meanwhile (in 3)",
    "in 3: the trace does not split it from forward",
)
_SYNC_ARROW = 3  # the one share that is not a part of the step partition, so the shares can add up to over 100%
# A trace without any device kernel (a CPU run): the computation is the CPU ops, and nothing speaks of a GPU.
_CPU_TRACE_DETAILS = (
    *_TRACE_DETAILS[:2],
    "CPU ops, forward and backward together (no device kernel in the trace)",
    *_TRACE_DETAILS[3:],
)


def _trace_shares_pct(trace: RankTrace) -> list[float | None]:
    breakdown = trace.step_breakdown
    load = breakdown.dataloader_pct if breakdown is not None else trace.dataloader_pct_of_step
    copy = breakdown.memcpy_pct if breakdown is not None else None
    on_device = trace.gpu_events != 0  # None: a record that did not say (older ones); only 0 means a CPU run
    kernels = (breakdown.kernel_pct if on_device else breakdown.cpu_exec_pct) if breakdown is not None else None
    syncs = trace.syncs.blocking_pct_of_steps if trace.syncs is not None else None
    return [load, copy, kernels, syncs, None]


def _trace_details(trace: RankTrace) -> tuple[str, ...]:
    return _TRACE_DETAILS if trace.gpu_events != 0 else _CPU_TRACE_DETAILS


def _sequence_from_trace(run: Run) -> SequenceDiagram:
    """A trace-only run: the step time from the ProfilerStep spans, each arrow's share from the step partition."""
    first = run.trace.ranks[0] if run.trace is not None and run.trace.ranks else None
    if first is None:
        return _unmeasured("no step timing was measured")
    step_time_s = first.step_time_us / 1e6 if first.step_time_us is not None else None
    messages = []
    for n, (spec, detail, share) in enumerate(
        zip(_ARROWS, _trace_details(first), _trace_shares_pct(first), strict=True), start=1
    ):
        time_s = step_time_s * share / 100 if step_time_s is not None and share is not None else None
        messages.append(Message(n, spec.label, detail, *_ENDS[spec.key], time_s, share))
    messages[_KERNEL_ARROW].caveat = _comm_caveat(first)
    # Some arrows may be unknown here: the largest known one is where the time goes only if the unknown rest of the
    # step could not hold a larger one.
    known = [
        m.share_pct
        for i, m in enumerate(messages)
        if i != _SYNC_ARROW and m.share_pct is not None and math.isfinite(m.share_pct)
    ]
    if known and max(known) >= 100 - sum(known):
        _highlight(messages)
    where = f", rank {first.rank}" if first.rank is not None else ""
    basis = f"from the profiler trace{where}: mean ProfilerStep, split by the step partition"
    participants = PARTICIPANTS if first.gpu_events != 0 else CPU_TRACE_PARTICIPANTS
    other_pct = _partition_rest_pct(messages)
    other_s = step_time_s * other_pct / 100 if step_time_s is not None and other_pct is not None else None
    largest = max((m.share_pct or 0.0 for i, m in enumerate(messages) if i != _SYNC_ARROW), default=0.0)
    hot = other_pct is not None and other_pct > largest
    if hot:
        for m in messages:
            m.highlighted = False
    return SequenceDiagram(participants, messages, step_time_s, other_s, basis, other_pct, hot)


def _partition_rest_pct(messages: list[Message]) -> float | None:
    """The step partition's rest, which no arrow carries (memsets, runtime calls, other CPU ops, nothing recorded):
    None when an arrow of the partition is unknown."""
    shares = [m.share_pct for i, m in enumerate(messages[: _KERNEL_ARROW + 1]) if i != _SYNC_ARROW]
    if any(s is None or not math.isfinite(s) for s in shares):
        return None
    return round(max(0.0, 100.0 - sum(s or 0.0 for s in shares)), 3)


_KERNEL_ARROW = 2
_COMM_CAVEAT_MIN_PCT = 1.0


def _comm_caveat(trace: RankTrace) -> str | None:
    """Arrow 3 holds every kernel: say how much of the step is communication with no compute beside it."""
    comm = trace.step_breakdown.comm_pct if trace.step_breakdown is not None else None
    if comm is None or comm < _COMM_CAVEAT_MIN_PCT:
        return None
    return f"of which communication with no compute beside it: {fmt.share(comm)} of the step"


def _highlight(messages: list[Message]) -> None:
    """Mark the arrow that takes the most time per step; none when nothing was timed."""
    timed = [m for m in messages if m.time_s is not None and math.isfinite(m.time_s) and m.time_s > 0]
    if timed:
        max(timed, key=lambda m: m.time_s or 0.0).highlighted = True
