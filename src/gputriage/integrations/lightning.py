"""Lightning: `TriageCallback` records what `gputriage run` records, over `Trainer.fit`.

    from gputriage.integrations.lightning import TriageCallback
    trainer = L.Trainer(callbacks=[TriageCallback()])
    trainer.fit(model, datamodule)

It replaces two of Lightning's static warnings with measured verdicts: "GPU available but not used" (the ladder's
rungs 1-4 say whether the expected device did the work) and "does not have many workers" (the step's measured data
wait says whether the loader is a bottleneck). Both are filtered from the callback's creation until the fit ends, and
only when `replace_static_warnings` is on (the first is emitted inside `Trainer.__init__`, hence from creation).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback

from gputriage.collectors.session import DEFAULT_STEPS
from gputriage.integrations.common import RecordedResults, TrainingRecorder, key_numbers, measured_verdicts
from gputriage.integrations.warning_filters import WarningFilter, literal_prefix

# The two static warnings (lightning/pytorch/trainer/setup.py and trainer/connectors/data_connector.py) whose
# question the callback answers from measurements.
STATIC_WARNINGS = (
    literal_prefix("GPU available but not used"),
    r"The '\w+' does not have many workers which may be a bottleneck",
)
REPORT_SUBDIR = "gputriage"


class TriageCallback(RecordedResults, Callback):
    """Record rungs 1-5 over `Trainer.fit`, log the key numbers to the trainer's loggers, write the report.

    Args:
        expect_device: the device the training is meant to use; default: the first available accelerator (as
            `gputriage run`), so a Trainer left on the CPU of a GPU machine is reported.
        steps: observe this many optimizer steps, then let the training run untouched.
        out_dir: report folder; default `trainer.default_root_dir/gputriage`.
        replace_static_warnings: filter Lightning's "GPU available but not used" and "few workers" warnings while
            the callback is active; the report answers both from measurements.
        print_report: print the terminal report and the measured verdicts to stderr at the end of the fit.
    """

    def __init__(
        self,
        expect_device: str | None = None,
        steps: int | None = DEFAULT_STEPS,
        out_dir: str | Path | None = None,
        *,
        replace_static_warnings: bool = True,
        print_report: bool = True,
    ) -> None:
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self._recorder = TrainingRecorder(expect_device, steps, print_report)
        self._filter = WarningFilter(STATIC_WARNINGS)
        if replace_static_warnings:
            self._filter.install()

    def report_dir(self, trainer: pl.Trainer) -> Path:
        return self.out_dir if self.out_dir is not None else Path(trainer.default_root_dir) / REPORT_SUBDIR

    # -- Lightning hooks ---------------------------------------------------------------------------------------------

    def on_fit_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._recorder.begin()

    def on_train_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        # here, not at on_fit_end: the strategy's teardown (moving the model back to the CPU) is not the training
        self._finish(trainer, None)

    def on_fit_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._finish(trainer, None)  # a fit that never reached the train loop's end (max_steps=0, a tuner exit)

    def on_exception(self, trainer: pl.Trainer, pl_module: pl.LightningModule, exception: BaseException) -> None:
        self._finish(trainer, exception)
        self._filter.remove()

    def teardown(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        self._filter.remove()

    # -- the end of the fit ------------------------------------------------------------------------------------------

    def _finish(self, trainer: pl.Trainer, exc: BaseException | None) -> None:
        diag = self._recorder.end("lightning Trainer.fit", exc)
        if diag is None:
            return
        log_numbers(trainer, key_numbers(diag))
        if not trainer.is_global_zero:
            return  # every rank records; rank 0 reports, as Lightning's own logging does
        self._recorder.report(self.report_dir(trainer))
        if self._recorder.print_report:
            for line in measured_verdicts(diag):
                print(f"gputriage: {line}", file=sys.stderr)


def log_numbers(trainer: pl.Trainer, numbers: dict[str, Any]) -> None:
    """Through every logger the trainer has (TensorBoard, CSV, W&B, ...), at the last step."""
    for logger in trainer.loggers:
        logger.log_metrics(numbers, step=trainer.global_step)
