"""A step boundary inside `with torch.inference_mode():` (an inference loop's steps are its batches) that takes a
dispatch mode out: the block's exit restored torch's Python dispatch key onto an empty mode stack, and the job's next
`torch.randn(...)` died of an INTERNAL ASSERT (trial 10). The mode goes dormant there, and comes out after."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from gputriage.collectors.probe import RunProbe  # noqa: E402
from gputriage.record import Run  # noqa: E402

JOB = """
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset
model = nn.Linear(4, 4).eval()
with torch.inference_mode():
    for (x,) in DataLoader(TensorDataset(torch.randn(20, 4)), batch_size=3):
        model(x)
p = torch.randn(3, requires_grad=True)
(p ** 2).sum().backward()
print("grad", [round(v, 3) for v in p.grad.tolist()] == [round(2 * v, 3) for v in p.tolist()])
"""


def test_an_inference_loop_then_a_factory_runs_as_under_python(tmp_path: Path) -> None:
    job = tmp_path / "job.py"
    job.write_text(JOB)
    plain = subprocess.run([sys.executable, str(job)], capture_output=True, text=True, check=False)
    ours = subprocess.run(
        [sys.executable, "-m", "gputriage", "run", "--out", str(tmp_path / "out"), str(job)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert plain.returncode == 0 and plain.stdout == "grad True\n"
    assert ours.returncode == 0, ours.stderr[-1500:]
    assert ours.stdout == plain.stdout


def test_the_dormant_mode_comes_off_the_stack_once_the_block_is_left() -> None:
    depth = torch._C._len_torch_dispatch_stack()
    probe = RunProbe("cpu")
    run = Run(command="run")
    probe.start(run)
    try:
        model = nn.Linear(4, 4).eval()
        model(torch.randn(2, 4))  # step 0 begins here, outside the block: its mode is entered outside
        with torch.inference_mode():
            for (x,) in DataLoader(TensorDataset(torch.randn(30, 4)), batch_size=3):
                model(x)
            dormant = torch._C._len_torch_dispatch_stack()
        assert dormant == depth + 1  # taken out inside the block in name only
        torch.randn(3)  # the factory call that died
        model(torch.randn(2, 4))  # a probe call outside the block takes the dormant mode off
        assert torch._C._len_torch_dispatch_stack() == depth
    finally:
        probe.finish(run)
    assert torch._C._len_torch_dispatch_stack() == depth
    assert not torch._C._dispatch_tls_is_dispatch_key_included(torch._C.DispatchKey.Python) or depth
