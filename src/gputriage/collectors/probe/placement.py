"""Rungs 2-3: where the model's tensors and the data entering the model and the loss really are.

For the first steps, placement watches the outermost module calls (through `calls.ModuleCalls`, with their keyword
arguments: a Hugging Face model is called with `input_ids=...`), the loss modules at any depth, and the functional
losses. Before that, light patches of torch's `nn.Module` remember where modules, parameters and plain tensor
attributes were created or attached, so a finding can point at the line to change.

Nothing is registered on the user's modules, and `torch.nn.functional` is left alone: a script that keeps a reference
to `F.cross_entropy` (`from torch.nn.functional import cross_entropy`, `self.loss = F.mse_loss`) must hold the real
function, during the window and after it. A functional loss is seen through the builtin it calls
(`torch._C._nn.cross_entropy_loss`), which nobody imports by name; TorchScript knows our wrapper as that builtin.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from types import FrameType, TracebackType
from typing import Any

import torch
from torch import nn
from torch.compiler import is_dynamo_compiling
from torch.nn.modules import module as module_mod
from torch.utils.hooks import RemovableHandle

from gputriage.collectors.identity import IdentityMap
from gputriage.collectors.patching import Patches, quiet_hook
from gputriage.collectors.probe import operand
from gputriage.collectors.probe.state import ProbeState, capturing, own_reads
from gputriage.collectors.usercode import frame_where, is_own_file, user_frame, where_now
from gputriage.record.placement import CrashOperand, ModelInfo, PlacementSection, StrayPart, TensorSeen

# Losses people call as functions (the module losses, nn.CrossEntropyLoss..., are seen as module calls): the name
# people know, and the builtin `torch.nn.functional` calls for it with (prediction, target, ...) first.
FUNCTIONAL_LOSSES = (
    ("cross_entropy", "torch._C._nn", "cross_entropy_loss"),
    ("nll_loss", "torch._C._nn", "nll_loss_nd"),
    ("mse_loss", "torch._C._nn", "mse_loss"),
    ("l1_loss", "torch._C._nn", "l1_loss"),
    ("smooth_l1_loss", "torch._C._nn", "smooth_l1_loss"),
    ("huber_loss", "torch._C._nn", "huber_loss"),
    ("binary_cross_entropy", "torch._C._nn", "binary_cross_entropy"),
    ("soft_margin_loss", "torch._C._nn", "soft_margin_loss"),
    ("binary_cross_entropy_with_logits", "torch", "binary_cross_entropy_with_logits"),
    ("kl_div", "torch", "kl_div"),
    ("poisson_nll_loss", "torch", "poisson_nll_loss"),
    ("ctc_loss", "torch", "ctc_loss"),
    ("margin_ranking_loss", "torch", "margin_ranking_loss"),
    ("hinge_embedding_loss", "torch", "hinge_embedding_loss"),
    ("cosine_embedding_loss", "torch", "cosine_embedding_loss"),
    ("triplet_margin_loss", "torch", "triplet_margin_loss"),
)
MAX_STRAY_PARTS = 24
MAX_TENSORS_PER_CALL = 8
CALLS_RECORDED_PER_TARGET = 2


def device_name(t: torch.Tensor) -> str:
    return str(t.device)


def iter_tensors(value: Any, depth: int = 0) -> Iterator[tuple[str, torch.Tensor]]:
    """Tensors in a call's arguments: directly, or one or two levels inside tuples, lists and dicts. A container is
    read through its base type's own methods: a batch class's `items()` or `__iter__` (one that loads lazily, or
    counts) runs only when the job calls it."""
    if isinstance(value, torch.Tensor):
        yield "", value
    elif depth < 2 and isinstance(value, (tuple, list)):
        for i, item in enumerate(_own_items(value)):
            for path, t in iter_tensors(item, depth + 1):
                yield f"[{i}]{path}", t
    elif depth < 2 and isinstance(value, dict):
        for key, item in dict.items(value):
            for path, t in iter_tensors(item, depth + 1):
                yield f"[{key!r}]{path}", t


def _own_items(value: tuple[Any, ...] | list[Any]) -> Iterator[Any]:
    """The elements by the base type's own iterator: a subclass's `__iter__` is the job's code."""
    return tuple.__iter__(value) if isinstance(value, tuple) else list.__iter__(value)


MAX_HOST_SEEN = 256  # host tensors remembered for same_as (a few per call, a few calls per target)


_MAX_HOLDER_DEPTH = 32  # module nesting walked up to find the holder
_MAX_UNMOVED = 4  # unmoved modules kept at a crash
_MAX_OWNER_MODULES = 2_000  # modules searched for the owner of a host tensor at a device mismatch


class PlacementProbe:
    """Records ModelInfo and TensorSeen into a PlacementSection."""

    def __init__(self, state: ProbeState, section: PlacementSection) -> None:
        self._state = state
        self.section = section
        self._site_patches = Patches()
        self._hook_handles: list[RemovableHandle] = []
        self._loss_patches = Patches()
        self.watching = False  # the first steps: module calls and losses are recorded
        # Keyed by identity, never by the module's own __hash__/__eq__: a subclass may override them and read
        # attributes its __init__ has not set yet (torchmetrics' Metric, which Lightning's self.log creates).
        self._created: IdentityMap[nn.Module, str] = IdentityMap()  # module -> file:line
        self._attached: IdentityMap[Any, str] = IdentityMap()  # submodule -> file:line
        self._parent: IdentityMap[nn.Module, weakref.ref[nn.Module]] = IdentityMap()  # submodule -> its holder
        # module -> {name: file:line} for parameters, buffers and plain tensor attributes set on it
        self._member_sites: IdentityMap[nn.Module, dict[str, str]] = IdentityMap()
        # module -> names of the members above that were set inside a forward (a mask or cache made on the fly)
        self._set_in_forward: IdentityMap[nn.Module, set[str]] = IdentityMap()
        self._moved: IdentityMap[nn.Module, tuple[str, str | None]] = IdentityMap()  # module -> (device, file:line)
        # modules known to have run (the one a crash was inside): a module in a plain container counts only if the
        # model runs it (a dict of candidate backbones keeps the unused ones on the CPU, harmlessly)
        self._called: IdentityMap[nn.Module, bool] = IdentityMap()
        self._models: dict[int, tuple[weakref.ref[nn.Module], ModelInfo]] = {}
        self._calls_recorded: dict[str, int] = {}
        # Host tensors already seen, by their storage's address (no reference to the user's tensor is kept): a loss
        # called inside the model's forward gets a view of a tensor that entered the model at the loop's line.
        self._host_seen: dict[int, tuple[int, int, str]] = {}  # data_ptr -> (step, numel, "Net args[1] at f.py:9")

    # -- sites: always on until the placement window ends ---------------------------------------------------------

    def start_sites(self) -> None:
        self._site_patches.wrap(nn.Module, "__init__", self._init)
        self._site_patches.wrap(nn.Module, "__setattr__", self._setattr)
        self._site_patches.wrap(nn.Module, "to", self._move)
        self._site_patches.wrap(nn.Module, "cuda", self._move_cuda)
        self._site_patches.wrap(nn.Module, "cpu", self._move_cpu)
        for register, hook in (
            (module_mod.register_module_module_registration_hook, self._on_register_module),
            (module_mod.register_module_parameter_registration_hook, self._on_register_member),
            (module_mod.register_module_buffer_registration_hook, self._on_register_member),
        ):
            self._hook_handles.append(quiet_hook(register, hook))

    def _init(self, original: Any, module: nn.Module, /, *args: Any, **kwargs: Any) -> None:
        original(module, *args, **kwargs)
        if not self._state.in_child:
            self._created[module] = creation_site(module) or "?"

    def _setattr(self, original: Any, module: nn.Module, name: str, value: Any) -> None:
        original(module, name, value)
        if is_dynamo_compiling():  # a compiled forward's `self.cache = ...`: nothing of ours goes into its graph
            return
        # Parameters and buffers have registration hooks; a plain tensor attribute has only this.
        plain = isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)
        if (plain and name not in module.__dict__.get("_buffers", {})) or _listed_modules(value):
            self._remember_member(module, name)

    def _move(self, original: Any, module: nn.Module, /, *args: Any, **kwargs: Any) -> Any:
        out = original(module, *args, **kwargs)
        self._remember_move(module, _move_target(args, kwargs))
        return out

    def _move_cuda(self, original: Any, module: nn.Module, /, *args: Any, **kwargs: Any) -> Any:
        out = original(module, *args, **kwargs)
        self._remember_move(module, "cuda")
        return out

    def _move_cpu(self, original: Any, module: nn.Module, /, *args: Any, **kwargs: Any) -> Any:
        out = original(module, *args, **kwargs)
        self._remember_move(module, "cpu")
        return out

    def _remember_move(self, module: nn.Module, target: str | None) -> None:
        if target is not None and not self._state.in_child:
            self._moved[module] = (target, where_now())
            if target.split(":", 1)[0] == self._state.expected_device:
                self._forget_forwards_before(module)

    def _forget_forwards_before(self, moved: nn.Module) -> None:
        """The models inside `moved` that ran wholly off the device before this move (d2l runs the net on the CPU to
        print its shapes, then trains it on the GPU): those forwards were not the job's steps. Their record, and the
        inputs they took, go; the next forward describes the model again."""
        inside = {id(m) for _, m in walk_modules(moved)}
        for key, (ref, info) in list(self._models.items()):
            model = ref()
            off = not any(d.split(":", 1)[0] == self._state.expected_device for d in info.devices)
            if model is None or key not in inside or not off:
                continue
            del self._models[key]
            self.section.models = [m for m in self.section.models if m is not info]
            name = type(model).__name__
            self.section.tensors = [t for t in self.section.tensors if not (t.role == "input" and t.target == name)]
            self._calls_recorded.pop(name, None)

    def _on_register_module(self, parent: nn.Module, name: str, sub: nn.Module | None) -> None:
        if sub is not None and not self._state.in_child:
            self._attached[sub] = where_now() or "?"
            self._parent[sub] = weakref.ref(parent)

    def _on_register_member(self, module: nn.Module, name: str, value: torch.Tensor | None) -> None:
        if value is not None:
            self._remember_member(module, name)

    def _remember_member(self, module: nn.Module, name: str) -> None:
        if self._state.in_child:
            return
        site = where_now()
        if site is not None:
            self._member_sites.setdefault(module, {})[name] = site
            if self.watching and self._state.clock.phase == "forward":
                self._set_in_forward.setdefault(module, set()).add(name)

    # -- watching: the first steps -------------------------------------------------------------------------------------

    def start_watching(self) -> None:
        if self.watching:
            return
        self.watching = True
        for name, owner_name, attr in FUNCTIONAL_LOSSES:
            owner = sys.modules.get(owner_name)
            if owner is not None:
                make = functools.partial(self._functional_loss, name)
                self._loss_patches.wrap(owner, attr, make, same_builtin=True)

    def stop(self) -> None:
        self.rescan_models()
        self.watching = False
        self._loss_patches.restore()
        for handle in self._hook_handles:
            handle.remove()
        self._hook_handles.clear()
        self._site_patches.restore()
        self.section.steps_watched = max(self.section.steps_watched, self._state.step)

    def see_call(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], outer: bool) -> None:
        """A module call while placement watches: every outermost call, and the loss modules inside others."""
        try:
            if isinstance(module, nn.modules.loss._Loss):
                self._record_call(type(module).__name__, "loss", args, kwargs)
            elif outer:
                self._see_top_level(module, args, kwargs)
        except Exception:
            return

    def _functional_loss(self, name: str, original: Any, /, *args: Any, **kwargs: Any) -> Any:
        state = self._state
        # inside a loss module (seen as such), not the training loop, or a graph being captured: just the loss
        if not (state.in_loss or state.in_child or threading.get_ident() != state.owner_thread or capturing()):
            with contextlib.suppress(Exception):  # never break the user's loss
                self._record_call(name, "loss", args[:2], {})  # (prediction, target); the rest is not data
        return original(*args, **kwargs)

    def _see_top_level(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        key = id(module)
        known = self._models.get(key)
        if known is None or known[0]() is not module:
            if not has_tensors(module):
                return  # a parameter-free module (Flatten, a metric) is not "the model"
            info = self._describe_model(module)
            self._models[key] = (weakref.ref(module), info)
            self.section.models.append(info)
        self._record_call(type(module).__name__, "input", args, kwargs)

    def _record_call(self, target: str, kind: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        done = self._calls_recorded.get(target, 0)
        if done >= CALLS_RECORDED_PER_TARGET:
            return
        self._calls_recorded[target] = done + 1
        where = where_now()
        seen = 0
        for index, value in enumerate(args):
            role = "input" if kind == "input" else ("prediction" if index == 0 else "label")
            for path, t in iter_tensors(value):
                seen += self._add_tensor(role, t, target, f"args[{index}]{path}", where)
        for key, value in kwargs.items():
            role = "input" if kind == "input" else ("prediction" if key == "input" else "label")
            for path, t in iter_tensors(value):
                seen += self._add_tensor(role, t, target, f"{key}{path}", where)
            if seen >= MAX_TENSORS_PER_CALL:
                break

    def _add_tensor(self, role: str, t: torch.Tensor, target: str, argument: str, where: str | None) -> int:
        with own_reads():  # a Tensor subclass's __torch_function__ sees none of these reads
            return self._add_plain_tensor(role, t, target, argument, where)

    def _add_plain_tensor(self, role: str, t: torch.Tensor, target: str, argument: str, where: str | None) -> int:
        entry = TensorSeen(
            role=role,
            device=device_name(t),
            shape=[int(d) for d in t.shape],
            dtype=str(t.dtype).removeprefix("torch."),
            target=target,
            argument=argument,
            where=where,
            requires_grad=bool(t.requires_grad) if role == "prediction" else None,
        )
        entry.same_as = self._same_host_tensor(t, entry.described())
        if entry not in self.section.tensors:
            self.section.tensors.append(entry)
        return 1

    def _same_host_tensor(self, t: torch.Tensor, described: str) -> str | None:
        """The earlier entry (this step) whose storage this host tensor shares, e.g. a loss's `targets.view(-1)` of
        the labels the loop passed to the model; or None. Remembers this one for the next."""
        if t.device.type != "cpu" or type(t) is not torch.Tensor:
            return None
        with contextlib.suppress(Exception):
            address = t.untyped_storage().data_ptr()
            if not address:
                return None
            step, numel = self._state.step, t.numel()
            earlier = self._host_seen.get(address)
            if earlier is not None and earlier[0] == step and earlier[1] == numel:
                return earlier[2]
            if address in self._host_seen or len(self._host_seen) < MAX_HOST_SEEN:
                self._host_seen[address] = (step, numel, described)
        return None

    # -- describing a model -----------------------------------------------------------------------------------------

    def _describe_model(self, model: nn.Module) -> ModelInfo:
        expected = self._state.expected_device
        members = list(named_members(model, self._was_called))
        devices: dict[str, int] = {}
        for _, _, t in members:
            devices[device_name(t)] = devices.get(device_name(t), 0) + t.numel()
        moved = self._moved.get(model)
        name = type(model).__name__
        where = self._created.get(model)
        if moved is None:
            # A submodule called on its own (cleanrl's agent.actor(x), agent.critic(x)): the module that was moved
            # holds it, so its move (and the device expression behind it) is this model's, and so is its name.
            held = self._moved_holder(model)
            if held is not None:
                holder, path, moved = held
                name = f"{type(holder).__name__}.{path} ({name})"
            elif (owner := self._outermost_holder(model)) is not None:
                # moved by no one: the module the script made and holds it (`agent = Agent(envs)`) is the one to
                # move, not the submodule its __init__ builds
                root, path = owner
                name, where = f"{type(root).__name__}.{path} ({name})", self._created.get(root)
        info = ModelInfo(
            name=name,
            parameter_count=sum(p.numel() for _, p in walk_tensors(model, "_parameters")),
            devices=devices,
            where=where,
            moved_to=moved[0] if moved else None,
            moved_where=moved[1] if moved else None,
            called_where=where_now(),
        )
        off = [(path, kind, t) for path, kind, t in members if t.device.type != expected]
        # modules in a plain list are stray parts even when they are all the model has (a model of listed layers)
        if off and (len(off) < len(members) or any(kind == "listed" for _, kind, _ in off)):
            info.stray = self._stray_parts(model, members, off)
        return info

    def _outermost_holder(self, model: nn.Module) -> tuple[nn.Module, str] | None:
        """(the outermost module that holds `model` through registered submodules, made where gputriage saw it, and
        the path of `model` in it), or None when nothing holds it."""
        root, path = model, ""
        for _ in range(_MAX_HOLDER_DEPTH):
            ref = self._parent.get(root)
            holder = ref() if ref is not None else None
            name = next((n for n, sub in holder.named_children() if sub is root), None) if holder is not None else None
            if holder is None or name is None:
                break
            root, path = holder, f"{name}.{path}" if path else name
        if root is model or self._created.get(root) in (None, "?"):
            return None
        return root, path

    def _moved_holder(self, model: nn.Module) -> tuple[nn.Module, str, tuple[str, str | None]] | None:
        """(the moved module that holds `model`, the path of `model` in it, that module's move), the innermost one."""
        found = None
        for holder, move in self._moved.items():
            if holder is model:
                continue
            path = next((p for p, sub in walk_modules(holder) if sub is model), None)
            if path is not None and (found is None or len(path) < len(found[1])):
                found = (holder, path, move)
        return found

    def _stray_parts(
        self,
        model: nn.Module,
        members: list[tuple[str, str, torch.Tensor]],
        off: list[tuple[str, str, torch.Tensor]],
    ) -> list[StrayPart]:
        """Collapse the off-device tensors to the largest submodules that are entirely off-device."""
        total: dict[str, int] = {}
        off_count: dict[str, int] = {}
        registered: set[str] = set()  # submodules with a parameter or a buffer of their own
        for path, kind, t in members:
            for prefix in _module_prefixes(path):
                total[prefix] = total.get(prefix, 0) + 1
                if t.device.type != self._state.expected_device:
                    off_count[prefix] = off_count.get(prefix, 0) + 1
                if kind not in ("attribute", "listed"):
                    registered.add(prefix)
        modules = dict(walk_modules(model))
        parts: list[StrayPart] = []
        covered: set[str] = set()
        for path, kind, t in off:
            if kind == "listed":  # `self.blocks = [nn.Linear(...), ...]`: the list is what to name and change
                if path not in covered:
                    covered.add(path)
                    part = self._member_part(modules, path, kind, t)
                    part.numel = _listed_numel(off, path)
                    parts.append(part)
                continue
            # A submodule whose only tensors are plain attributes (a positional encoding's `pe`) is not "a module
            # attached after .to()": the attribute itself is what never follows .to(), so it is named.
            whole = next(
                (p for p in _module_prefixes(path) if p in registered and off_count.get(p) == total.get(p)), None
            )
            if whole is not None:
                if whole in covered:
                    continue
                covered.add(whole)
                sub = modules.get(whole)
                numel = sum(m.numel() for p, _, m in members if p.startswith(whole + "."))
                where = (self._attached.get(sub) or self._created.get(sub)) if sub is not None else None
                parts.append(StrayPart(whole, "module", device_name(t), numel, where))
            else:
                parts.append(self._member_part(modules, path, kind, t))
            if len(parts) >= MAX_STRAY_PARTS:
                break
        return parts

    def _member_part(self, modules: dict[str, nn.Module], path: str, kind: str, t: torch.Tensor) -> StrayPart:
        owner_path, _, leaf = path.rpartition(".")
        owner = modules.get(owner_path)
        sites = (self._member_sites.get(owner) or {}) if owner is not None else {}
        in_forward = owner is not None and leaf in (self._set_in_forward.get(owner) or set())
        return StrayPart(path, kind, device_name(t), t.numel(), sites.get(leaf), in_forward)

    def adopt_owner(self, module: nn.Module) -> None:
        """A module that crashed outside every model seen so far, its forward called directly (`self.forward(x)`,
        `layer.train(...)`), so no hook saw a model: the module moved to the device whose plain list or dict holds it
        is the model, and that container is why its .to() left the module behind (mnist_forward_forward's `Net`)."""
        expected = self._state.expected_device
        if any(self._holds(ref(), module) for ref, _ in self._models.values()):
            return
        for owner, (target, _) in self._moved.items():
            if target.split(":", 1)[0] != expected or not any(module is m for m in _contained(owner)):
                continue
            self._called[module] = True
            info = self._describe_model(owner)
            info.called_where = None  # never called: where_now() would be the crash handler's line
            self._models[id(owner)] = (weakref.ref(owner), info)
            self.section.models.append(info)
            return

    @staticmethod
    def _holds(model: nn.Module | None, module: nn.Module) -> bool:
        if model is None:
            return False
        return any(sub is module for _, sub in walk_modules(model)) or any(m is module for m in _contained(model))

    def note_unmoved(self) -> None:
        """At a crash: the modules the script made that nothing moved, wholly on the CPU, while another module was
        moved to the expected device (PlacementSection.unmoved_at_crash)."""
        expected = self._state.expected_device
        if expected == "cpu" or not any(t.split(":", 1)[0] == expected for _, (t, _) in self._moved.items()):
            return
        with contextlib.suppress(Exception):  # never break the user's job for a second look
            for module, where in self._created.items()[:_MAX_OWNER_MODULES]:
                if where == "?" or self._parent.get(module) is not None:
                    continue
                if any(self._holds(ref(), module) for ref, _ in self._models.values()):
                    continue
                sizes = self._left_on_cpu(module)
                if sizes is None:
                    continue
                self.section.unmoved_at_crash.append(
                    ModelInfo(
                        name=type(module).__name__, parameter_count=sum(sizes), devices={"cpu": sum(sizes)}, where=where
                    )
                )
                if len(self.section.unmoved_at_crash) >= _MAX_UNMOVED:
                    return

    def explain_operand(
        self, tensors: list[torch.Tensor], shape: list[int], storage: int | None, tb: TracebackType | None
    ) -> None:
        """At a device-mismatch crash: whose tensor the host operand is (`tensors`: it, and the one it is a view of;
        PlacementSection.crash_operand). A module of the script's that holds it, wholly on the CPU and never moved,
        is the one module left behind (unmoved_at_crash), even when nothing else was moved with .to(): the crash
        shows the other operand was."""
        frames = operand.user_frames(tb)
        holder = operand.find_holder(tensors, frames, (m for m, _ in self._created.items())) if tensors else None
        if holder is None and storage is not None:
            holder = operand.variable_sharing_storage(storage, frames)  # `rewards.detach()`: the temporary is gone
        if holder is None:
            return
        found = CrashOperand(kind=holder.kind, name=holder.name, shape=shape)
        if holder.frame is not None:
            line = operand.assignment_line(holder.frame, holder.name, holder.line)
            found.where = operand.frame_where(holder.frame, line or holder.line)
            found.made_where = operand.producer_line(holder.frame, line) if line else None
        elif isinstance(holder.owner, nn.Module):
            self._module_operand(found, holder.owner)
        else:
            self._object_operand(found, holder.owner, frames)
        self.section.crash_operand = found

    def _module_operand(self, found: CrashOperand, module: nn.Module) -> None:
        found.owner, found.owner_is_module = type(module).__name__, True
        found.where = (self._member_sites.get(module) or {}).get(found.name)
        found.owner_where = self._created.get(module)
        if self._left_on_cpu(module) is None:
            return
        info = self._describe_model(module)
        info.called_where = None  # the crash handler's line, not a call of the model's
        info.held_in = self._plain_holder(module)
        self.section.unmoved_at_crash = [info]

    def _object_operand(self, found: CrashOperand, obj: Any, frames: list[tuple[FrameType, int]]) -> None:
        found.owner = type(obj).__name__
        found.where = operand.attribute_line(type(obj), found.name)
        found.others = operand.host_tensors(obj, found.name)
        built = operand.outermost_variable([obj], frames)
        if built is not None and built.frame is not None:
            found.owner_variable = built.name
            line = operand.assignment_line(built.frame, built.name, built.line)
            found.owner_where = operand.frame_where(built.frame, line or built.line)

    def _left_on_cpu(self, module: nn.Module) -> list[int] | None:
        """The sizes of the parameters of a module nothing moved, when it has some and all are on the CPU."""
        if self._moved.get(module) is not None:
            return None
        params = [p for _, p in walk_tensors(module, "_parameters")]
        if not params or any(p.device.type != "cpu" for p in params):
            return None
        return [p.numel() for p in params]

    def _plain_holder(self, module: nn.Module) -> str | None:
        """'Net.layers' when a module gputriage saw built keeps `module` in a plain list, tuple or dict attribute."""
        for holder, _ in self._created.items()[:_MAX_OWNER_MODULES]:
            for name, value in vars(holder).items():
                if any(m is module for m in _listed_modules(value)):
                    return f"{type(holder).__name__}.{name}"
        return None

    def rescan_models(self, ran: nn.Module | None = None) -> None:
        """Look at the models again after their first forward (at the window's end, or at a crash): a buffer or a
        plain tensor attribute made inside forward (a cached causal mask) did not exist at the first pre-hook."""
        expected = self._state.expected_device
        if ran is not None:
            self._called[ran] = True
        for ref, info in list(self._models.values()):
            model = ref()
            on_expected = any(d.split(":", 1)[0] == expected for d in info.devices)
            if model is None or not on_expected or len(info.stray) >= MAX_STRAY_PARTS:
                continue  # a model wholly off the device is model-on-cpu already
            with contextlib.suppress(Exception), own_reads():  # never break the job for a second look, nor show it
                self._add_late_strays(model, info, expected)

    def _add_late_strays(self, model: nn.Module, info: ModelInfo, expected: str) -> None:
        last_move = self._moved.get(model)
        moved_off = last_move is not None and last_move[0].split(":", 1)[0] != expected
        if moved_off or any(p.device.type != expected for _, p in walk_tensors(model, "_parameters")):
            # The whole model left the device after its steps (Lightning's teardown calls .cpu(), so does a job that
            # saves a CPU copy): its buffers follow, and nothing here was left behind by .to().
            return
        known = [p.path for p in info.stray]
        modules = dict(walk_modules(model))
        members = list(named_members(model, self._was_called))
        for path, kind, t in members:
            if kind == "parameter" or t.device.type == expected or t.dim() == 0:
                continue
            if any(path == k or path.startswith(k + ".") for k in known):
                continue
            part = self._member_part(modules, path, kind, t)
            if kind == "listed":
                part.numel = _listed_numel(members, path)
            if part.where is None:
                continue  # not set while gputriage watched: it was there (and counted) at the first forward
            info.stray.append(part)
            info.devices[part.device] = info.devices.get(part.device, 0) + part.numel
            known.append(path)
            if len(info.stray) >= MAX_STRAY_PARTS:
                return

    def _was_called(self, module: nn.Module) -> bool:
        """The module ran: the crash was inside it, or a backward reached its parameters. Inner module calls are not
        watched (one wrapper sees only the outermost call), so a module that ran without either is not known."""
        if self._called.get(module) is not None:
            return True
        with own_reads():
            return any(p.grad is not None for _, p in walk_tensors(module, "_parameters"))

    def describe_module(self, module: nn.Module) -> str | None:
        """'Net.head (Linear)' for a module inside a model seen so far."""
        for ref, info in self._models.values():
            model = ref()
            if model is None:
                continue
            if model is module:
                return info.name
            for name, sub in walk_modules(model):
                if sub is module:
                    return f"{info.name}.{name} ({type(module).__name__})"
        return type(module).__name__


# The parameters a reparametrisation keeps, from which a forward pre-hook recomputes the plain attribute on the
# parameters' device at every call: weight_norm's weight from weight_g and weight_v, spectral_norm's from weight_orig.
_REPARAMETRISED_FROM = (("_g", "_v"), ("_orig",))


def _derived_from_parameters(module: nn.Module, name: str) -> bool:
    """`conv.weight` under torch.nn.utils.weight_norm / spectral_norm: a plain tensor attribute that .to() leaves
    behind, and the next forward replaces with one computed on the device (a trial's TCN called it "off cuda")."""
    params = module._parameters  # the module's own table: a job's overrides of named_parameters() are not called
    return any(all(f"{name}{suffix}" in params for suffix in suffixes) for suffixes in _REPARAMETRISED_FROM)


def named_members(
    model: nn.Module, called: Callable[[nn.Module], bool] | None = None
) -> Iterator[tuple[str, str, torch.Tensor]]:
    """(path, kind, tensor) for every parameter, buffer and plain tensor attribute of the model, and the tensors of
    the modules in its plain containers that `called` says ran (none without it)."""
    for path, p in walk_tensors(model, "_parameters"):
        yield path, "parameter", p
    for path, b in walk_tensors(model, "_buffers"):
        yield path, "buffer", b
    for mod_path, sub in walk_modules(model):
        for name, value in vars(sub).items():
            if isinstance(value, torch.Tensor) and not _derived_from_parameters(sub, name):
                yield (f"{mod_path}.{name}" if mod_path else name), "attribute", value
            # modules kept in a plain list, tuple or dict: model.to() and model.parameters() never see them
            ran = [m for m in _listed_modules(value) if called(m)] if called is not None else []
            for listed in ran:
                for t in (
                    *(p for _, p in walk_tensors(listed, "_parameters")),
                    *(b for _, b in walk_tensors(listed, "_buffers")),
                ):
                    yield (f"{mod_path}.{name}" if mod_path else name), "listed", t


def walk_modules(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(path, module) of the model and every submodule, each once, as named_modules() gives them, read from the
    modules' own `_modules` dicts: a model that overrides named_modules() / parameters() (to hide or add some) had
    its overrides called by the probe each step, where python calls them never (a trial)."""
    out: list[tuple[str, nn.Module]] = []
    seen: set[int] = set()
    pending: list[tuple[str, nn.Module]] = [("", model)]
    while pending:
        path, module = pending.pop()
        if id(module) in seen:
            continue
        seen.add(id(module))
        out.append((path, module))
        children = vars(module).get("_modules") or {}
        pending.extend(
            (f"{path}.{name}" if path else name, child)
            for name, child in reversed(list(children.items()))
            if isinstance(child, nn.Module)
        )
    return out


def walk_tensors(model: nn.Module, kind: str) -> list[tuple[str, torch.Tensor]]:
    """(path, tensor) of the model's parameters (`kind` "_parameters") or buffers ("_buffers"), each once, read from
    the modules' own dicts (see walk_modules)."""
    out: list[tuple[str, torch.Tensor]] = []
    seen: set[int] = set()
    for path, module in walk_modules(model):
        for name, tensor in (vars(module).get(kind) or {}).items():
            if tensor is not None and id(tensor) not in seen:
                seen.add(id(tensor))
                out.append((f"{path}.{name}" if path else name, tensor))
    return out


def _contained(model: nn.Module) -> Iterator[nn.Module]:
    """The modules kept in plain containers anywhere in the model."""
    for _, sub in walk_modules(model):
        for value in vars(sub).values():
            yield from _listed_modules(value)


def _listed_numel(members: list[tuple[str, str, torch.Tensor]], path: str) -> int:
    """Elements of every tensor of the modules in the plain container at `path` (one stray part, many tensors)."""
    return sum(t.numel() for p, kind, t in members if kind == "listed" and p == path)


def _listed_modules(value: Any) -> list[nn.Module]:
    """The nn.Modules inside a plain list, tuple or dict attribute (not an nn.ModuleList / ModuleDict)."""
    if isinstance(value, dict):
        items = list(dict.values(value))[:_MAX_LISTED]
    elif isinstance(value, (list, tuple)):
        items = list(_own_items(value))[:_MAX_LISTED]
    else:
        return []
    return [item for item in items if isinstance(item, nn.Module)]


def has_tensors(module: nn.Module) -> bool:
    return next(iter(named_members(module)), None) is not None


_MAX_LISTED = 256  # elements of one plain container looked at


def _module_prefixes(path: str) -> list[str]:
    """'a.b.w' -> ['a', 'a.b'] (outermost first): the submodules that contain the tensor."""
    parts = path.split(".")[:-1]
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


def _move_target(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    candidates = [*args[:1], kwargs.get("device")]
    for value in candidates:
        if isinstance(value, (str, torch.device)):
            return str(value)
        if isinstance(value, int) and not isinstance(value, bool):
            return f"cuda:{value}"
        if isinstance(value, torch.Tensor):
            return str(value.device)
    return None


def creation_site(module: nn.Module) -> str | None:
    """file:line of the code that built this module, past gputriage's frames and the module's own (and its base
    classes') __init__ lines."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and is_own_file(frame.f_code.co_filename):
        frame = frame.f_back
    while frame is not None and frame.f_code.co_name == "__init__" and frame.f_locals.get("self") is module:
        frame = frame.f_back
    return frame_where(user_frame(frame)) if frame is not None else None
