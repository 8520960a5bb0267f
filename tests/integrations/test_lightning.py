"""Lightning: a tiny real `Trainer.fit` with `TriageCallback`, against `gputriage run` on the same plain loop."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning")

import lightning.pytorch as pl
import torch
from integration_helpers import codes, gputriage_run
from lightning.pytorch.accelerators import CUDAAccelerator
from lightning.pytorch.loggers import CSVLogger
from lightning.pytorch.utilities import rank_zero_warn
from torch import nn

from gputriage.integrations.lightning import TriageCallback

GPU_WARNING = "GPU available but not used. You can set it by doing `Trainer(accelerator='gpu')`."
WORKERS_WARNING = "does not have many workers which may be a bottleneck"


class Classifier(pl.LightningModule):
    """plain_mlp.py as a LightningModule: the same data, model and optimizer."""

    def __init__(self, fail_at_batch: int | None = None) -> None:
        super().__init__()
        from tiny import mlp

        self.net = mlp()
        self.fail_at_batch = fail_at_batch

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if batch_idx == self.fail_at_batch:
            raise RuntimeError("the loss went NaN")
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss)  # creates a torchmetrics Metric: the probe must live with its __hash__
        return loss

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=1e-3)

    def train_dataloader(self) -> Any:
        from tiny import mlp_loader

        return mlp_loader()


class _CudaPresent(CUDAAccelerator):
    """What Lightning's device check sees on a GPU machine; only its warning reads it."""

    @staticmethod
    def is_available() -> bool:
        return True


def trainer(root: Path, callback: TriageCallback, **options: Any) -> pl.Trainer:
    return pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        logger=CSVLogger(root, name="logs"),
        default_root_dir=root,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        log_every_n_steps=1,
        callbacks=[callback],
        **options,
    )


@dataclass
class Fit:
    callback: TriageCallback
    root: Path
    caught: list[str]
    stderr: str


def fit_on_a_gpu_machine(root: Path, callback_options: dict[str, Any], **trainer_options: Any) -> Fit:
    """A real fit where Lightning's static checks see a GPU and more than two cores, so both warnings would fire."""
    stderr = io.StringIO()
    with (
        pytest.MonkeyPatch.context() as mp,
        warnings.catch_warnings(record=True) as caught,
        contextlib.redirect_stderr(stderr),
    ):
        warnings.simplefilter("always")
        mp.setattr("lightning.pytorch.trainer.setup.CUDAAccelerator", _CudaPresent)
        mp.setattr("lightning.pytorch.trainer.connectors.data_connector.suggested_max_num_workers", lambda _: 4)
        callback = TriageCallback(expect_device="cpu", **callback_options)
        trainer(root, callback, **trainer_options).fit(Classifier())
    return Fit(callback, root, [str(w.message) for w in caught], stderr.getvalue())


def static_warnings(fit: Fit) -> list[str]:
    return [m for m in fit.caught if m == GPU_WARNING or WORKERS_WARNING in m]


@pytest.fixture(scope="module")
def fit(tmp_path_factory: pytest.TempPathFactory) -> Fit:
    return fit_on_a_gpu_machine(tmp_path_factory.mktemp("lightning"), {})


def test_the_callback_finds_what_gputriage_run_finds_on_the_plain_loop(fit: Fit, tmp_path: Path) -> None:
    exit_code, plain = gputriage_run("plain_mlp.py", tmp_path / "plain", "--expect-device", "cpu")
    assert exit_code == 0
    assert "input-pipeline-bound" in codes(plain["findings"])  # the slow dataset, measured in both
    assert sorted(codes(fit.callback.findings)) == sorted(codes(plain["findings"]))
    report = json.loads((fit.root / "gputriage" / "report.json").read_text())  # default: default_root_dir/gputriage
    assert codes(report["findings"]) == codes(fit.callback.findings)
    assert report["steps"]["step_source"] == "optimizer"
    assert len(report["steps"]["steps"]) == len(plain["steps"]["steps"]) == 6  # one step per optimizer step
    assert report["steps"]["loader"]["dataset_class"] == "SlowVectors"
    assert report["process"]["target"] == "lightning Trainer.fit"
    assert (fit.root / "gputriage" / "report.html").is_file()


def test_the_key_numbers_go_through_the_trainers_logger(fit: Fit) -> None:
    (metrics_csv,) = (fit.root / "logs").glob("version_*/metrics.csv")
    rows = [row for row in csv.DictReader(metrics_csv.open()) if row.get("gputriage/data_wait_pct")]
    assert len(rows) == 1
    assert float(rows[0]["gputriage/steps_observed"]) == 6
    assert float(rows[0]["gputriage/findings_critical"]) + float(rows[0]["gputriage/findings_warning"]) >= 1
    wait = next(f for f in fit.callback.findings if f.code == "input-pipeline-bound")
    assert float(rows[0]["gputriage/data_wait_pct"]) == pytest.approx(wait.evidence["data_wait_pct_of_step"], abs=0.01)


def test_static_warnings_give_way_to_measured_verdicts(fit: Fit) -> None:
    assert static_warnings(fit) == []
    # a CPU run has no accelerator to place things on: nothing "measured on the accelerator" (a trial read that as
    # a pass on a machine without one)
    assert "gputriage: device: the run is judged for cpu, with no accelerator: placement not measured" in fit.stderr
    assert "gputriage: DataLoader num_workers=0: the steps waited" in fit.stderr
    assert "a bottleneck (input-pipeline-bound" in fit.stderr
    # after the fit, Lightning's warnings are the user's again
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rank_zero_warn(GPU_WARNING)
    assert [str(w.message) for w in caught] == [GPU_WARNING]


def test_static_warnings_stay_when_asked(tmp_path: Path) -> None:
    control = fit_on_a_gpu_machine(
        tmp_path, {"replace_static_warnings": False, "print_report": False}, limit_train_batches=1
    )
    assert len(static_warnings(control)) == 2  # the same fit shows both of Lightning's static warnings
    assert "gputriage: DataLoader" not in control.stderr


def test_a_crashing_fit_still_writes_its_report(tmp_path: Path) -> None:
    callback = TriageCallback(expect_device="cpu", out_dir=tmp_path / "triage", print_report=False)
    with pytest.raises(RuntimeError, match="went NaN"):
        trainer(tmp_path, callback).fit(Classifier(fail_at_batch=2))
    report = json.loads((tmp_path / "triage" / "report.json").read_text())
    assert report["process"]["exception_type"] == "RuntimeError"
    assert report["process"]["crash_where"].endswith(f"test_lightning.py:{_line_of('went NaN')}")
    assert len(report["steps"]["steps"]) == 2
    with warnings.catch_warnings(record=True) as caught:  # the filter came off with the exception
        warnings.simplefilter("always")
        rank_zero_warn(GPU_WARNING)
    assert len(caught) == 1


def _line_of(text: str) -> int:
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line and "raise" in line)


def test_a_trainer_that_misses_the_expected_device_is_told_so(tmp_path: Path) -> None:
    """Lightning's "GPU available but not used", measured: the Trainer runs on the CPU, the job expects `meta`."""
    stderr = io.StringIO()
    callback = TriageCallback(expect_device="meta", out_dir=tmp_path / "triage")
    with contextlib.redirect_stderr(stderr):
        trainer(tmp_path, callback, limit_train_batches=3).fit(Classifier())
    found = codes(callback.findings)
    assert {"data-on-cpu", "model-on-cpu"} <= set(found)
    assert found[0] in ("data-on-cpu", "model-on-cpu")
    assert f"gputriage: device: expected meta, measured: {callback.findings[0].title} ({found[0]})" in stderr.getvalue()
