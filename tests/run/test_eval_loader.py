"""An evaluation run from inside the training loop (minGPT's iteration callback over a test set, under no_grad): its
loader is not the one the steps are fed by, and its wait is no data wait of the step (trial 10: the eval loader was
shown as the job's, and its 8 s made the step "36% waiting for data")."""

from __future__ import annotations

import time
from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, Dataset, TensorDataset  # noqa: E402

from gputriage.collectors.probe import RunProbe  # noqa: E402
from gputriage.record import Run  # noqa: E402


class SlowSet(Dataset[Any]):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(0.005)
        return torch.ones(4)


def test_an_evaluation_inside_the_loop_is_not_the_steps_data_wait() -> None:
    probe = RunProbe("cpu")
    run = Run(command="run")
    probe.start(run)
    try:
        model = nn.Linear(4, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        train = DataLoader(TensorDataset(torch.randn(64, 4)), batch_size=8)
        test = DataLoader(SlowSet(), batch_size=2)
        for (x,) in train:
            model(x).sum().backward()
            opt.step()
            opt.zero_grad()
            with torch.no_grad():  # the callback's evaluation, every step
                for batch in test:
                    model(batch)
    finally:
        probe.finish(run)
    assert run.steps is not None and run.steps.loader is not None
    assert run.steps.loader.dataset_class == "TensorDataset"
    waits = [s.data_wait_s for s in run.steps.steps[1:]]
    assert max(waits) < 0.01  # four slow test batches (20 ms) per step are not the step's data wait
