"""Hugging Face: a tiny real `Trainer.train()` with `TriageCallback`, against `gputriage run` on the same plain loop.

The model is built from a config (one layer, hidden size 16): nothing is downloaded.
"""

from __future__ import annotations

import contextlib
import io
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from integration_helpers import codes, gputriage_run
from transformers import Trainer, TrainingArguments

from gputriage.integrations.hf import TriageCallback


@dataclass
class Training:
    callback: TriageCallback
    trainer: Trainer
    output_dir: Path
    stderr: str


def train(output_dir: Path, **callback_options: object) -> Training:
    from tiny import BATCH_SIZE, SlowTokens, tiny_bert

    callback = TriageCallback(expect_device="cpu", **callback_options)  # type: ignore[arg-type]
    args = TrainingArguments(
        output_dir=str(output_dir),
        per_device_train_batch_size=BATCH_SIZE,
        num_train_epochs=1,
        learning_rate=1e-3,
        use_cpu=True,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    trainer = Trainer(model=tiny_bert(), args=args, train_dataset=SlowTokens(), callbacks=[callback])
    stderr = io.StringIO()
    with contextlib.redirect_stderr(stderr):
        trainer.train()
    return Training(callback, trainer, output_dir, stderr.getvalue())


@pytest.fixture(scope="module")
def training(tmp_path_factory: pytest.TempPathFactory) -> Training:
    return train(tmp_path_factory.mktemp("hf") / "output")


def test_the_callback_finds_what_gputriage_run_finds_on_the_plain_loop(training: Training, tmp_path: Path) -> None:
    exit_code, plain = gputriage_run("plain_bert.py", tmp_path / "plain", "--expect-device", "cpu")
    assert exit_code == 0
    assert "input-pipeline-bound" in codes(plain["findings"])  # the slow dataset, measured in both
    assert sorted(codes(training.callback.findings)) == sorted(codes(plain["findings"]))
    report = json.loads((training.output_dir / "gputriage" / "report.json").read_text())
    assert codes(report["findings"]) == codes(training.callback.findings)
    assert report["steps"]["step_source"] == "optimizer"
    assert len(report["steps"]["steps"]) == len(plain["steps"]["steps"]) == 6  # one step per optimizer step
    assert report["steps"]["loader"]["dataset_class"] == "SlowTokens"
    assert report["process"]["target"] == "transformers Trainer.train"
    for name in ("report.html", "report.md", "timeline.json"):
        assert (training.output_dir / "gputriage" / name).is_file()
    assert "input-pipeline-bound" in training.stderr  # the terminal report, on stderr


def test_the_key_numbers_join_the_log_history(training: Training) -> None:
    entry = training.trainer.state.log_history[-1]
    assert entry["step"] == training.trainer.state.global_step == 6
    assert entry["gputriage/steps_observed"] == 6
    wait = next(f for f in training.callback.findings if f.code == "input-pipeline-bound")
    assert entry["gputriage/data_wait_pct"] == pytest.approx(wait.evidence["data_wait_pct_of_step"], abs=0.01)


def test_out_dir_and_a_quiet_report(tmp_path: Path) -> None:
    quiet = train(tmp_path / "output", out_dir=tmp_path / "elsewhere", print_report=False, steps=2)
    assert (tmp_path / "elsewhere" / "report.json").is_file()
    assert not (tmp_path / "output" / "gputriage").exists()
    assert quiet.stderr.count("gputriage") == 1  # only the line that says where the report went
    doc = json.loads((tmp_path / "elsewhere" / "report.json").read_text())
    assert len(doc["steps"]["steps"]) == 2  # steps=2: the probes let go after two steps
