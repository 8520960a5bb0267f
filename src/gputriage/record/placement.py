"""Rungs 2 and 3: where the model's parameters and the data entering it actually were."""

from __future__ import annotations

import msgspec


class StrayPart(msgspec.Struct):
    """A piece of a model that sits on another device than the rest of the job expects.

    `path` is the qualified name inside the model ("head", "encoder.mask"); `kind` says what it is, because the fix
    differs: a submodule or parameter follows `.to()` when it exists before the call, a plain tensor attribute never
    does (it must become a registered buffer).
    """

    path: str
    # module | parameter | buffer | attribute (a plain tensor attribute, not a registered buffer) | listed (modules in
    # a plain list, tuple or dict attribute: neither .to() nor .parameters() sees them)
    kind: str
    device: str  # "cpu", "cuda:0", "meta"
    numel: int = 0
    where: str | None = None  # file:line where it was created or attached to the model
    # Set inside a forward (a mask or cache made on the fly), seen after the first forward or at the crash.
    created_in_forward: bool = False


class ModelInfo(msgspec.Struct):
    """The top-level model, as seen by the first forward pre-hook."""

    name: str  # class name, e.g. "ResNet"
    parameter_count: int = 0
    # device -> number of parameter and buffer elements there
    devices: dict[str, int] = msgspec.field(default_factory=dict)
    where: str | None = None  # file:line where the model was built or moved
    moved_to: str | None = None  # the device of the last `.to()` / `.cuda()` on the model, if any
    moved_where: str | None = None  # file:line of that call
    called_where: str | None = None  # file:line of the first forward call
    # Submodules, parameters, buffers and plain tensor attributes away from the expected device (at most a few dozen)
    stray: list[StrayPart] = msgspec.field(default_factory=list)
    # The plain list, tuple or dict attribute that holds this module ("Net.layers"): the holder's .to() and
    # .parameters() never reach it, so moving the holder cannot fix it
    held_in: str | None = None


class TensorSeen(msgspec.Struct):
    """A tensor entering the model or the loss at the first steps."""

    role: str  # input (into the model) | prediction (first loss argument) | label (other loss arguments)
    device: str
    shape: list[int] = msgspec.field(default_factory=list)
    dtype: str | None = None
    target: str | None = None  # the module class or loss function it entered, e.g. "Net", "cross_entropy"
    argument: str | None = None  # "args[0]", "target"
    where: str | None = None  # file:line of the call in the user's code
    # The earlier entry this host tensor shares its storage with, in the same step ("Transformer args[1] at
    # makemore.py:680"): a loss inside the model's forward gets a view of the labels the loop passed in.
    same_as: str | None = None
    # For a prediction: whether gradients flow through it. A loss of CPU tensors none of which does (a tutorial's demo
    # of the loss on made-up numbers, before training) is not the training's, and runs on the CPU on a GPU machine too.
    requires_grad: bool | None = None

    def described(self) -> str:
        """How same_as names an entry: "Transformer args[1] at makemore.py:680"."""
        return f"{self.target} {self.argument} at {self.where}"


class CrashOperand(msgspec.Struct):
    """The host tensor of the op a device-mismatch crash refused, and whose it is: the fix goes where it was made, which
    is rarely the line that crashed (a layer built and never moved, a scheduler's tensors, a prompt made on the CPU)."""

    # parameter | buffer | attribute (a plain tensor attribute of a module or of a plain object) | variable
    kind: str
    name: str  # "weight", "sqrt_alphas_cumprod", "context"
    shape: list[int] = msgspec.field(default_factory=list)
    owner: str | None = None  # the class that holds it ("Layer", "NoiseScheduler"); None for a variable
    owner_is_module: bool = False
    # file:line that made it: the variable's assignment, the attribute's set; for a parameter, where it was registered
    where: str | None = None
    # a variable assigned from a call of the user's own function (`hidden = rnn.initHidden()`): the factory in it that
    # made the tensor (`return torch.zeros(1, self.hidden_size)`), where `device=` goes
    made_where: str | None = None
    # the owner: where the module or the object was built, and the name the script holds it by ("noise_scheduler")
    owner_where: str | None = None
    owner_variable: str | None = None
    # the owner's other host tensors (a plain object's: nothing moves any of them), at most a few
    others: list[str] = msgspec.field(default_factory=list)


class PlacementSection(msgspec.Struct):
    models: list[ModelInfo] = msgspec.field(default_factory=list)
    tensors: list[TensorSeen] = msgspec.field(default_factory=list)
    steps_watched: int = 0  # how many steps the placement hooks watched
    # At a crash that mixes devices: modules the script made and never moved, wholly on the CPU, while another was
    # moved to the device (the DQN tutorial's target_net, its weights blended with the policy's). No forward ran
    # them, so they are not among `models`; they name what the crash's host tensor most likely came from.
    unmoved_at_crash: list[ModelInfo] = msgspec.field(default_factory=list)
    crash_operand: CrashOperand | None = None  # at a device-mismatch crash: the host tensor, and whose it is
    # The last batch a DataLoader handed the loop, when it is a tuple or list (`data, target`): which of its elements
    # are tensors, in order. A fix that moves one name the loop unpacks moves the batch's other tensors with it: the
    # script dies at the model's call, before the loss would show the labels off the device. None: not seen, or the
    # batch is not a tuple or list.
    batch_tensors: list[bool] | None = None

    def measured_rungs(self) -> set[int]:
        """Rung 2 when a batch was seen entering a model or a loss; rung 3 when a model ran a forward."""
        rungs = set()
        if any(t.shape for t in self.tensors):
            rungs.add(2)
        if self.models:
            rungs.add(3)
        return rungs

    def unmeasured_rungs(self) -> dict[int, str]:
        reasons = {}
        if 2 not in self.measured_rungs():
            reasons[2] = "no batch was seen entering a model or a loss"
        if not self.models:
            reasons[3] = "no model ran a forward"
        return reasons

    def self_check(self) -> list[str]:
        problems = []
        for model in self.models:
            if any(n < 0 for n in model.devices.values()):
                problems.append(f"placement: model {model.name} has a negative element count")
        return problems
