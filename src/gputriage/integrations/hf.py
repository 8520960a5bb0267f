"""Hugging Face `Trainer`: `TriageCallback` records what `gputriage run` records, over `trainer.train()`.

    from gputriage.integrations.hf import TriageCallback
    trainer = Trainer(model=model, args=args, train_dataset=ds, callbacks=[TriageCallback()])
    trainer.train()          # the report lands in args.output_dir/gputriage/

The key numbers also go into `trainer.state.log_history` (and so into trainer_state.json at the next save).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments

from gputriage.collectors.session import DEFAULT_STEPS
from gputriage.integrations.common import RecordedResults, TrainingRecorder, key_numbers

REPORT_SUBDIR = "gputriage"


class TriageCallback(RecordedResults, TrainerCallback):
    """Record rungs 1-5 from `on_train_begin` to `on_train_end` and write the report into the output dir.

    Args:
        expect_device: the device the training is meant to use; default: the first available accelerator (as
            `gputriage run`), so a Trainer that silently fell back to the CPU is reported.
        steps: observe this many optimizer steps, then let the training run untouched.
        out_dir: report folder; default `args.output_dir/gputriage`.
        print_report: print the terminal report to stderr at the end of training.
    """

    def __init__(
        self,
        expect_device: str | None = None,
        steps: int | None = DEFAULT_STEPS,
        out_dir: str | Path | None = None,
        *,
        print_report: bool = True,
    ) -> None:
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self._recorder = TrainingRecorder(expect_device, steps, print_report)

    def report_dir(self, args: TrainingArguments) -> Path:
        return self.out_dir if self.out_dir is not None else Path(args.output_dir or ".") / REPORT_SUBDIR

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        self._recorder.begin()

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **kwargs: Any
    ) -> None:
        diag = self._recorder.end("transformers Trainer.train")
        if diag is None:
            return
        state.log_history.append({**key_numbers(diag), "step": state.global_step})
        if state.is_world_process_zero:  # every process records; the main one reports, as the Trainer saves
            self._recorder.report(self.report_dir(args))
