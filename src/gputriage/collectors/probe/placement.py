"""Rungs 2-3: where the model's tensors and the data entering the model and the loss really are.

Global module forward pre-hooks run for the first steps only (they take every module call off PyTorch's fast path).
Before that, light patches remember where modules, parameters and plain tensor attributes were created or attached,
so a finding can point at the line to change.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import weakref
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import torch
from torch import nn
from torch.nn.modules import module as module_mod
from torch.utils.hooks import RemovableHandle

from gputriage.collectors.identity import IdentityMap
from gputriage.collectors.patching import Patches
from gputriage.collectors.probe.state import ProbeState
from gputriage.collectors.usercode import frame_where, user_frame, where_now
from gputriage.record.placement import ModelInfo, PlacementSection, StrayPart, TensorSeen

# Losses people call as functions; the module losses (nn.CrossEntropyLoss, ...) are seen by the forward pre-hook.
FUNCTIONAL_LOSSES = (
    "cross_entropy",
    "nll_loss",
    "mse_loss",
    "l1_loss",
    "smooth_l1_loss",
    "huber_loss",
    "binary_cross_entropy",
    "binary_cross_entropy_with_logits",
    "kl_div",
    "poisson_nll_loss",
    "gaussian_nll_loss",
    "ctc_loss",
    "margin_ranking_loss",
    "hinge_embedding_loss",
    "soft_margin_loss",
    "multilabel_soft_margin_loss",
    "cosine_embedding_loss",
    "triplet_margin_loss",
)
MAX_STRAY_PARTS = 24
MAX_TENSORS_PER_CALL = 8
CALLS_RECORDED_PER_TARGET = 2


def device_name(t: torch.Tensor) -> str:
    return str(t.device)


def iter_tensors(value: Any, depth: int = 0) -> Iterator[tuple[str, torch.Tensor]]:
    """Tensors in a call's arguments: directly, or one or two levels inside tuples, lists and dicts."""
    if isinstance(value, torch.Tensor):
        yield "", value
    elif depth < 2 and isinstance(value, (tuple, list)):
        for i, item in enumerate(value):
            for path, t in iter_tensors(item, depth + 1):
                yield f"[{i}]{path}", t
    elif depth < 2 and isinstance(value, dict):
        for key, item in value.items():
            for path, t in iter_tensors(item, depth + 1):
                yield f"[{key!r}]{path}", t


class PlacementProbe:
    """Records ModelInfo and TensorSeen into a PlacementSection."""

    def __init__(self, state: ProbeState, section: PlacementSection) -> None:
        self._state = state
        self.section = section
        self._site_patches = Patches()
        self._hook_handles: list[RemovableHandle] = []
        self._fn_patches = Patches()
        self._depth = 0
        self._in_loss = 0
        self._hooks_on = False
        # Keyed by identity, never by the module's own __hash__/__eq__: a subclass may override them and read
        # attributes its __init__ has not set yet (torchmetrics' Metric, which Lightning's self.log creates).
        self._created: IdentityMap[nn.Module, str] = IdentityMap()  # module -> file:line
        self._attached: IdentityMap[Any, str] = IdentityMap()  # submodule -> file:line
        # module -> {name: file:line} for parameters, buffers and plain tensor attributes set on it
        self._member_sites: IdentityMap[nn.Module, dict[str, str]] = IdentityMap()
        # module -> names of the members above that were set inside a forward (a mask or cache made on the fly)
        self._set_in_forward: IdentityMap[nn.Module, set[str]] = IdentityMap()
        self._moved: IdentityMap[nn.Module, tuple[str, str | None]] = IdentityMap()  # module -> (device, file:line)
        self._models: dict[int, tuple[weakref.ref[nn.Module], ModelInfo]] = {}
        self._calls_recorded: dict[str, int] = {}
        self._timed_losses: set[int] = set()
        self.on_new_model: Callable[[nn.Module], None] | None = None

    # -- sites: always on until the placement window ends ---------------------------------------------------------

    def start_sites(self) -> None:
        self._site_patches.set(nn.Module, "__init__", self._wrap_init(nn.Module.__init__))
        self._site_patches.set(nn.Module, "__setattr__", self._wrap_setattr(nn.Module.__setattr__))
        self._site_patches.set(nn.Module, "to", self._wrap_move(nn.Module.to))
        self._site_patches.set(nn.Module, "cuda", self._wrap_move(nn.Module.cuda, "cuda"))
        self._site_patches.set(nn.Module, "cpu", self._wrap_move(nn.Module.cpu, "cpu"))
        self._hook_handles.append(module_mod.register_module_module_registration_hook(self._on_register_module))
        self._hook_handles.append(module_mod.register_module_parameter_registration_hook(self._on_register_member))
        self._hook_handles.append(module_mod.register_module_buffer_registration_hook(self._on_register_member))

    def _wrap_init(self, orig: Callable[..., None]) -> Callable[..., None]:
        probe = self

        @functools.wraps(orig)
        def __init__(module: nn.Module, *args: Any, **kwargs: Any) -> None:
            orig(module, *args, **kwargs)
            if not probe._state.in_child:
                probe._created[module] = creation_site(module) or "?"

        return __init__

    def _wrap_setattr(self, orig: Callable[..., None]) -> Callable[..., None]:
        probe = self

        @functools.wraps(orig)
        def __setattr__(module: nn.Module, name: str, value: Any) -> None:
            orig(module, name, value)
            # Parameters and buffers have registration hooks; a plain tensor attribute has only this.
            plain = isinstance(value, torch.Tensor) and not isinstance(value, nn.Parameter)
            if plain and name not in module.__dict__.get("_buffers", {}):
                probe._remember_member(module, name)

        return __setattr__

    def _wrap_move(self, orig: Callable[..., Any], fixed_device: str | None = None) -> Callable[..., Any]:
        probe = self

        @functools.wraps(orig)
        def move(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
            out = orig(module, *args, **kwargs)
            if not probe._state.in_child:
                target = fixed_device or _move_target(args, kwargs)
                if target is not None:
                    probe._moved[module] = (target, where_now())
            return out

        return move

    def _on_register_module(self, parent: nn.Module, name: str, sub: nn.Module | None) -> None:
        if sub is not None and not self._state.in_child:
            self._attached[sub] = where_now() or "?"

    def _on_register_member(self, module: nn.Module, name: str, value: torch.Tensor | None) -> None:
        if value is not None:
            self._remember_member(module, name)

    def _remember_member(self, module: nn.Module, name: str) -> None:
        if self._state.in_child:
            return
        site = where_now()
        if site is not None:
            self._member_sites.setdefault(module, {})[name] = site
            if self._hooks_on and self._depth > 0:
                self._set_in_forward.setdefault(module, set()).add(name)

    # -- hooks: the first steps -------------------------------------------------------------------------------------

    def start_hooks(self) -> None:
        if self._hooks_on:
            return
        self._hooks_on = True
        self._hook_handles.append(module_mod.register_module_forward_pre_hook(self._pre_hook))
        self._hook_handles.append(module_mod.register_module_forward_hook(self._post_hook, always_call=True))
        functional = torch.nn.functional
        for name in FUNCTIONAL_LOSSES:
            orig = getattr(functional, name, None)
            if orig is not None:
                self._fn_patches.set(functional, name, self._wrap_loss_fn(name, orig))

    def stop(self) -> None:
        self.rescan_models()
        self._hooks_on = False
        for handle in self._hook_handles:
            handle.remove()
        self._hook_handles.clear()
        self._fn_patches.restore()
        self._site_patches.restore()
        self.section.steps_watched = max(self.section.steps_watched, self._state.step)

    def _pre_hook(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        depth = self._depth
        self._depth += 1
        if self._state.in_loader or self._state.in_child or not self._hooks_on:
            return
        try:
            if isinstance(module, nn.modules.loss._Loss):
                self._in_loss += 1
                self._record_loss_args(type(module).__name__, args, {})
                if depth == 0 and id(module) not in self._timed_losses and self.on_new_model is not None:
                    # not a model, but its forward is part of "perform computation" in the step phases
                    self._timed_losses.add(id(module))
                    self.on_new_model(module)
            elif depth == 0:
                self._see_top_level(module, args, _caller_kwargs(sys._getframe(1)))
        except Exception:
            return

    def _post_hook(self, module: nn.Module, args: tuple[Any, ...], output: Any) -> None:
        self._depth = max(0, self._depth - 1)
        if isinstance(module, nn.modules.loss._Loss) and self._in_loss > 0:
            self._in_loss -= 1

    def _wrap_loss_fn(self, name: str, orig: Callable[..., Any]) -> Callable[..., Any]:
        probe = self

        @functools.wraps(orig)
        def loss_fn(*args: Any, **kwargs: Any) -> Any:
            if probe._hooks_on and not probe._in_loss and not probe._state.in_child:
                with contextlib.suppress(Exception):  # never break the user's loss
                    probe._record_loss_args(name, args, kwargs)
            return orig(*args, **kwargs)

        return loss_fn

    def _see_top_level(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        key = id(module)
        if key not in self._models:
            if not _has_tensors(module):
                return  # a parameter-free module (Flatten, a metric) is not "the model"
            info = self._describe_model(module)
            self._models[key] = (weakref.ref(module), info)
            self.section.models.append(info)
            if self.on_new_model is not None:
                self.on_new_model(module)
        name = type(module).__name__
        self._record_call(name, "input", args, kwargs)

    def _record_loss_args(self, target: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._record_call(target, "loss", args, kwargs)

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
        entry = TensorSeen(
            role=role,
            device=device_name(t),
            shape=list(t.shape),
            dtype=str(t.dtype).removeprefix("torch."),
            target=target,
            argument=argument,
            where=where,
        )
        if entry not in self.section.tensors:
            self.section.tensors.append(entry)
        return 1

    # -- describing a model -----------------------------------------------------------------------------------------

    def _describe_model(self, model: nn.Module) -> ModelInfo:
        expected = self._state.expected_device
        members = list(named_members(model))
        devices: dict[str, int] = {}
        for _, _, t in members:
            devices[device_name(t)] = devices.get(device_name(t), 0) + t.numel()
        moved = self._moved.get(model)
        info = ModelInfo(
            name=type(model).__name__,
            parameter_count=sum(p.numel() for p in model.parameters()),
            devices=devices,
            where=self._created.get(model),
            moved_to=moved[0] if moved else None,
            moved_where=moved[1] if moved else None,
            called_where=where_now(),
        )
        off = [(path, kind, t) for path, kind, t in members if t.device.type != expected]
        if off and len(off) < len(members):
            info.stray = self._stray_parts(model, members, off)
        return info

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
                if kind != "attribute":
                    registered.add(prefix)
        modules = dict(model.named_modules())
        parts: list[StrayPart] = []
        covered: set[str] = set()
        for path, kind, t in off:
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

    def rescan_models(self) -> None:
        """Look at the models again after their first forward (at the window's end, or at a crash): a buffer or a
        plain tensor attribute made inside forward (a cached causal mask) did not exist at the first pre-hook."""
        expected = self._state.expected_device
        for ref, info in list(self._models.values()):
            model = ref()
            on_expected = any(d.split(":", 1)[0] == expected for d in info.devices)
            if model is None or not on_expected or len(info.stray) >= MAX_STRAY_PARTS:
                continue  # a model wholly off the device is model-on-cpu already
            with contextlib.suppress(Exception):  # never break the user's job for a second look
                self._add_late_strays(model, info, expected)

    def _add_late_strays(self, model: nn.Module, info: ModelInfo, expected: str) -> None:
        last_move = self._moved.get(model)
        moved_off = last_move is not None and last_move[0].split(":", 1)[0] != expected
        if moved_off or any(p.device.type != expected for p in model.parameters()):
            # The whole model left the device after its steps (Lightning's teardown calls .cpu(), so does a job that
            # saves a CPU copy): its buffers follow, and nothing here was left behind by .to().
            return
        known = [p.path for p in info.stray]
        modules = dict(model.named_modules())
        for path, kind, t in named_members(model):
            if kind == "parameter" or t.device.type == expected or t.dim() == 0:
                continue
            if any(path == k or path.startswith(k + ".") for k in known):
                continue
            part = self._member_part(modules, path, kind, t)
            if part.where is None:
                continue  # not set while gputriage watched: it was there (and counted) at the first forward
            info.stray.append(part)
            info.devices[part.device] = info.devices.get(part.device, 0) + part.numel
            known.append(path)
            if len(info.stray) >= MAX_STRAY_PARTS:
                return

    def describe_module(self, module: nn.Module) -> str | None:
        """'Net.head (Linear)' for a module inside a model seen so far."""
        for ref, info in self._models.values():
            model = ref()
            if model is None:
                continue
            if model is module:
                return info.name
            for name, sub in model.named_modules():
                if sub is module:
                    return f"{info.name}.{name} ({type(module).__name__})"
        return type(module).__name__


def named_members(model: nn.Module) -> Iterator[tuple[str, str, torch.Tensor]]:
    """(path, kind, tensor) for every parameter, buffer and plain tensor attribute of the model."""
    for path, p in model.named_parameters():
        yield path, "parameter", p
    for path, b in model.named_buffers():
        yield path, "buffer", b
    for mod_path, sub in model.named_modules():
        for name, value in vars(sub).items():
            if isinstance(value, torch.Tensor):
                yield (f"{mod_path}.{name}" if mod_path else name), "attribute", value


def _caller_kwargs(frame: FrameType | None) -> dict[str, Any]:
    """The keyword arguments of the module call that runs this global pre-hook.

    Global forward pre-hooks receive only the positional arguments; a Hugging Face model is called with keywords
    (`model(input_ids=..., labels=...)`), and they sit in the calling `_call_impl` frame.
    """
    # torch runs the hooks in `_call_impl`, or in its `inner` closure when some hook needs the slow path
    if frame is None or frame.f_code.co_name not in ("_call_impl", "inner"):
        return {}
    if frame.f_code.co_filename != module_mod.__file__:
        return {}
    kwargs = frame.f_locals.get("kwargs")
    return kwargs if isinstance(kwargs, dict) else {}


def _has_tensors(module: nn.Module) -> bool:
    return next(iter(named_members(module)), None) is not None


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
    """file:line of the code that built this module, past its own (and its base classes') __init__ lines."""
    frame = sys._getframe(2)
    while frame is not None and frame.f_code.co_name == "__init__" and frame.f_locals.get("self") is module:
        frame = frame.f_back  # type: ignore[assignment]
    return frame_where(user_frame(frame)) if frame is not None else None
