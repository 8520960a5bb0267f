"""On a real NVIDIA GPU: the Lightning and Hugging Face callbacks judge the trainer's device from measurements.

A Trainer on the GPU passes rungs 2-4; a Trainer left on the CPU of a GPU machine (Lightning's "GPU available but
not used") is reported as model and data on the CPU, by the measured verdict rather than the static warning.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

pytest.importorskip("lightning")
pytest.importorskip("transformers")

import lightning.pytorch as pl
import torch
from integration_helpers import codes
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from gputriage.integrations.lightning import TriageCallback

pytestmark = pytest.mark.gpu
PLACEMENT = {"data-on-cpu", "model-on-cpu", "model-partly-on-cpu", "no-gpu-compute", "device-mismatch-error"}


@pytest.fixture(autouse=True)
def _cuda_build() -> None:
    if not torch.cuda.is_available():
        pytest.skip("this torch build cannot reach the GPU (a +cpu wheel?)")


class Fast(pl.LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-3)

    def train_dataloader(self) -> DataLoader[tuple[torch.Tensor, ...]]:
        data = TensorDataset(torch.randn(512, 64), torch.randint(0, 4, (512,)))
        return DataLoader(data, batch_size=32)


def fit(tmp_path: Path, accelerator: str) -> TriageCallback:
    callback = TriageCallback(print_report=False)  # expect the first accelerator: cuda
    pl.Trainer(
        accelerator=accelerator,
        devices=1,
        max_epochs=1,
        default_root_dir=tmp_path,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        callbacks=[callback],
    ).fit(Fast())
    return callback


def test_lightning_on_the_gpu_passes_the_placement_rungs(tmp_path: Path) -> None:
    callback = fit(tmp_path, "gpu")
    assert callback.diagnosis is not None
    assert callback.diagnosis.run.expect_device == "cuda"
    assert not PLACEMENT & set(codes(callback.findings))


def test_lightning_left_on_the_cpu_is_measured_not_guessed(tmp_path: Path) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        callback = fit(tmp_path, "cpu")
    assert not [w for w in caught if "GPU available but not used" in str(w.message)]
    assert {"model-on-cpu", "data-on-cpu"} <= set(codes(callback.findings))
