"""Everything the preflight patches is torch's again after it, and nothing is left on the job's thread."""

from __future__ import annotations

import torch
from preflight_session import FakeProbe

from gputriage.collectors.preflight import MetaStandIn, Preflight
from gputriage.record import Run


def _snapshot() -> dict[str, object]:
    return {
        "cuda.is_available": torch.cuda.is_available,
        "cuda.synchronize": torch.cuda.synchronize,
        "cuda.Stream": torch.cuda.Stream,
        "accelerator.is_available": torch.accelerator.is_available,
        "Tensor.pin_memory": torch.Tensor.pin_memory,
        "load": torch.load,
        "autocast.__init__": torch.amp.autocast_mode.autocast.__init__,
        "is_autocast_enabled": torch.is_autocast_enabled,
        "group": torch._C._group_tensors_by_device_and_dtype,
        "cudnn.is_available": torch.backends.cudnn.is_available,
    }


def test_preflight_restores_torch_and_pops_its_mode() -> None:
    before = _snapshot()
    modes = torch._C._len_torch_function_stack()
    available = torch.cuda.is_available()
    probe = FakeProbe()
    run = Run(command="run")
    preflight = Preflight(probe, stop_after_steps=None)
    preflight.start(run)
    assert torch.cuda.is_available() and torch._C._len_torch_function_stack() == modes + 1
    assert probe.state.stand_in_clock is not None and probe.step_listeners
    preflight.finish(run)
    assert _snapshot() == before
    assert torch._C._len_torch_function_stack() == modes
    assert torch.cuda.is_available() == available
    assert probe.state.stand_in_clock is None and not probe.step_listeners
    assert run.stand_in is not None and run.stand_in.preflight and run.stand_in.label


def test_meta_stand_in_makes_meta_readable_only_while_it_runs() -> None:
    run = Run(command="run")
    observer = MetaStandIn()
    observer.start(run)
    try:
        assert torch.ones(2, device="meta").sum().item() == 1.0
    finally:
        observer.finish(run)
    assert run.stand_in is not None and not run.stand_in.preflight and run.stand_in.placeholder_reads
    try:
        torch.ones(2, device="meta").sum().item()
    except RuntimeError as exc:
        assert "meta" in str(exc)
    else:
        raise AssertionError("meta .item() should raise again after the run")


def test_meta_tensors_copied_to_the_host_with_a_dtype_get_placeholders() -> None:
    run = Run(command="run")
    observer = MetaStandIn()
    observer.start(run)
    try:
        host = torch.ones(2, 3, device="meta").to("cpu", dtype=torch.float64)
        assert host.dtype == torch.float64 and host.tolist() == [[1.0] * 3] * 2
    finally:
        observer.finish(run)
