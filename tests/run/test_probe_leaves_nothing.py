"""The probes leave no trace: nothing on the user's objects while they run, nothing of theirs in torch after the probe
window, and the user's own hooks keep their numbers and order (issue #12)."""

from __future__ import annotations

import copy
import pickle
import warnings
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.nn.modules import module as module_mod  # noqa: E402
from torch.optim import optimizer as optimizer_mod  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402
from torch.utils.data import dataloader as dataloader_mod  # noqa: E402
from torch.utils.hooks import RemovableHandle  # noqa: E402

from gputriage.collectors.probe import RunProbe  # noqa: E402
from gputriage.record import Run  # noqa: E402

TENSOR_METHODS = ("to", "cuda", "item", "tolist", "cpu", "numpy", "__repr__")


def torch_state() -> dict[str, Any]:
    """Everything the probes may replace or register, as the job would see it."""
    return {
        "module": {
            name: nn.Module.__dict__.get(name) for name in ("__call__", "__init__", "__setattr__", "to", "cuda")
        },
        "tensor": {name: torch.Tensor.__dict__.get(name) for name in TENSOR_METHODS},
        "backward": torch.autograd.backward,
        "loader": (DataLoader.__dict__.get("__init__"), dataloader_mod._BaseDataLoaderIter.__dict__.get("__next__")),
        "losses": (torch._C._nn.cross_entropy_loss, torch._C._nn.mse_loss, torch.kl_div),
        "warnings": warnings._showwarnmsg,
        "hooks": [
            dict(d)
            for d in (
                module_mod._global_forward_hooks,
                module_mod._global_forward_pre_hooks,
                module_mod._global_module_registration_hooks,
                module_mod._global_parameter_registration_hooks,
                module_mod._global_buffer_registration_hooks,
                optimizer_mod._global_optimizer_pre_hooks,
                optimizer_mod._global_optimizer_post_hooks,
            )
        ],
        "modes": (torch._C._len_torch_dispatch_stack(), torch._C._len_torch_function_stack()),
    }


def train(steps: int, checks: list[Any] | None = None) -> nn.Module:
    loader = DataLoader(TensorDataset(torch.randn(steps * 4, 8), torch.randint(0, 2, (steps * 4,))), batch_size=4)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()
        if checks is not None:
            checks.append(model)
    return model


def test_after_the_window_torch_is_as_it_was_and_the_model_carries_nothing() -> None:
    before = torch_state()
    next_id = RemovableHandle.next_id
    probe = RunProbe("cpu", steps_limit=3)
    run = Run(command="run")
    probe.start(run)
    inside = torch_state()
    assert inside["module"]["__call__"] is not before["module"]["__call__"]  # the probes are in...
    assert RemovableHandle.next_id == next_id  # ...without taking hook numbers the user's code would see
    seen: list[nn.Module] = []
    model = train(8, seen)
    assert probe.window_ended
    assert torch_state() == before  # every wrapper, hook and mode came out at step 3
    probe.finish(run)
    assert torch_state() == before
    assert run.steps is not None and run.steps.steps_observed == 3
    assert run.placement is not None and run.placement.models
    for m in (model, *seen):
        assert not m._forward_hooks and not m._forward_pre_hooks
        assert "gputriage" not in pickle.dumps(m).decode("latin-1")
    copy.deepcopy(model)


def test_inside_the_window_the_model_pickles_copies_and_saves(tmp_path: Any) -> None:
    probe = RunProbe("cpu", steps_limit=None)
    run = Run(command="run")
    probe.start(run)
    try:
        model = train(2)
        torch.save(model, tmp_path / "model.pt")
        torch.save(model.state_dict(), tmp_path / "state.pt")
        blob = pickle.dumps(model)
        clone = copy.deepcopy(model)
        assert "gputriage" not in blob.decode("latin-1")
        assert not model._forward_hooks and not model._forward_pre_hooks
        assert torch.equal(clone[0].weight, model[0].weight)
        pickle.dumps(nn.Module.__call__)  # a wrapper pickles by the name of the attribute it occupies
        pickle.dumps(DataLoader.__init__)
    finally:
        probe.finish(run)


def test_the_users_hooks_keep_their_numbers_and_order() -> None:
    calls: list[str] = []
    first_id = RemovableHandle.next_id  # what the user's first hook would be numbered without gputriage
    probe = RunProbe("cpu", steps_limit=None)
    run = Run(command="run")
    probe.start(run)
    try:
        model = nn.Linear(2, 2)
        model.register_forward_pre_hook(lambda m, a: calls.append("pre"))
        model.register_forward_hook(lambda m, a, o: calls.append("post"))
        model(torch.randn(1, 2))
    finally:
        probe.finish(run)
    assert [*model._forward_pre_hooks, *model._forward_hooks] == [first_id, first_id + 1]
    assert calls == ["pre", "post"]


def test_a_functional_loss_the_script_imported_by_name_is_the_real_one() -> None:
    real = nn.functional.cross_entropy
    probe = RunProbe("cpu", steps_limit=None)
    run = Run(command="run")
    probe.start(run)
    try:
        assert nn.functional.cross_entropy is real  # torch.nn.functional itself is never patched
        scripted = torch.jit.script(nn.CrossEntropyLoss())  # TorchScript still knows the builtin under our wrapper
        assert scripted(torch.randn(3, 4), torch.tensor([0, 1, 2])).dim() == 0
    finally:
        probe.finish(run)
