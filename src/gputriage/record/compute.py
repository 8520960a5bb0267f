"""Rung 4: where the computation ran (op census) and where the step blocked on the device (host syncs)."""

from __future__ import annotations

import msgspec

from gputriage.record.steps import stand_in_within


class OpStat(msgspec.Struct):
    """One operator on one device inside the probe window, with the user line that issued most of it."""

    name: str  # aten op, e.g. "aten.addmm"
    device: str  # device type
    count: int = 0
    # host wall time inside the op (for cuda: launch time, the kernel runs asynchronously); for cpu, the calling
    # thread's CPU time where that is less (the OS took the core away mid-op on a loaded machine)
    time_s: float = 0.0
    where: str | None = None
    max_s: float = 0.0  # the longest single call

    def steady_s(self) -> float:
        """The op's time with its longest call counted as one of its typical ones: a call the OS preempted on a loaded
        host (one repeat of 1 MB took 22 ms once, 0.1 ms the other times) is not what the op costs the step."""
        if self.count < 2 or self.max_s <= 0:
            return self.time_s
        return (self.time_s - self.max_s) * self.count / (self.count - 1)


class HostSync(msgspec.Struct):
    """A place in the user's code where the host waited for the device."""

    # item | cpu | tolist | print | to-cpu | scalar (bool()/int()/float() of a tensor) | nonzero | cuda-sync |
    # cpu-index (a device tensor indexed by a host index tensor: CUDA copies it over, waiting for the stream)
    kind: str
    where: str | None = None
    code: str | None = None  # the source line, stripped
    count: int = 0  # inside the probe window
    time_s: float = 0.0  # inside the probe window
    device: str | None = None
    # file:line in a library (not torch, save torch's reads by design: GradScaler's found_inf) that issued the read,
    # when the user's line only called into it (transformers' BERT reads `padding_mask.all()` inside forward); None
    # when the user's own line reads the value
    library_where: str | None = None
    # file:line of the user's code that called the function holding `where` (`action = select_action(state)` for a
    # read in `return action.item()`); None at the top level
    caller_where: str | None = None
    # census steps in which it happened: a read every step is in all of them, a periodic log or a sample drawn every
    # 500 iterations in one (0: not counted, a record from before the count)
    steps: int = 0


class MixedDeviceOp(msgspec.Struct):
    """An op that met a CPU tensor (not a 0-d scalar) next to tensors on the expected device: on CUDA, a crash."""

    name: str  # aten op, e.g. "aten.embedding"
    device: str  # the device of the other operands
    cpu_shape: list[int] = msgspec.field(default_factory=list)
    count: int = 0  # inside the probe window
    where: str | None = None  # the user's line that called the op
    cpu_tensor_where: str | None = None  # the user's line that made the CPU tensor inside a forward, when seen


class ComputeSection(msgspec.Struct):
    # device type -> ops counted in the probe window
    ops_per_device: dict[str, int] = msgspec.field(default_factory=dict)
    # device type -> host time spent inside those ops; ops whose tensors are all 0-d scalars are counted apart,
    # because optimizers keep their step counters as CPU scalars on purpose
    op_time_s_per_device: dict[str, float] = msgspec.field(default_factory=dict)
    scalar_cpu_ops: int = 0
    window_steps: int = 0  # steps the census covered
    window_wall_s: float = 0.0  # wall time of those steps
    # On a stand-in device: the part of window_wall_s spent computing its ops (see Step.stand_in_s); None otherwise
    window_stand_in_s: float | None = None
    top_cpu_ops: list[OpStat] = msgspec.field(default_factory=list)
    # The CPU ops' time in the window, each op's at its steady rate (OpStat.steady_s): what the CPU share of the step
    # is judged on. None: a record that did not measure it (op_time_s_per_device["cpu"] is then the time).
    cpu_op_steady_s: float | None = None
    syncs: list[HostSync] = msgspec.field(default_factory=list)
    mixed_device_ops: list[MixedDeviceOp] = msgspec.field(default_factory=list)
    sync_debug_mode: bool = False  # torch.cuda.set_sync_debug_mode("warn") was on during the window
    # CUDA_LAUNCH_BLOCKING in the job's environment during the window, when set (probe/debugenv.py): its value, who
    # set it ("job": it differs from what the process started with; "environment": it came with it), and the user's
    # line that sets it, when the job did and the line was found
    launch_blocking: str | None = None
    launch_blocking_set_by: str | None = None
    launch_blocking_where: str | None = None
    # Convolutions on the device in the census window, and how many distinct input shapes they had (capped): shapes
    # that repeat from step to step are fixed, ones that grow with the steps vary (causes.md J.27-28).
    conv_calls: int = 0
    conv_input_shapes: int = 0
    # cuDNN's settings while those convolutions ran (None: not read, no convolution ran), and the user's line that
    # set them, where one did.
    cudnn_benchmark: bool | None = None
    cudnn_deterministic: bool | None = None
    cudnn_set_where: str | None = None

    def measured_rungs(self) -> set[int]:
        return {4} if self.window_steps > 0 else set()

    def unmeasured_rungs(self) -> dict[int, str]:
        return {} if self.window_steps > 0 else {4: "the op census covered no complete step"}

    def window_host_s(self) -> float:
        """The window's host time: its wall time without the stand-in's compute (all of it on a real device)."""
        return self.window_wall_s - stand_in_within(self.window_stand_in_s, self.window_wall_s)

    def self_check(self) -> list[str]:
        problems = []
        if any(n < 0 for n in self.ops_per_device.values()):
            problems.append("compute: negative op count")
        if self.window_steps < 0 or self.window_wall_s < 0:
            problems.append("compute: negative window")
        return problems
