"""An evaluation pass's DataLoader between training steps (a trial: a validation loader with a slow __getitem__ left
the job HEALTHY with 94% of the step time in "other"; HF's Trainer showed its evaluation loader as the training one,
each pass in one step's data wait, and a DataLoader(...) fix its users never write)."""

from __future__ import annotations

import pytest
from run_cases import Case, Result, mark_line, run_many


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    cases = {"plain": Case(["slow_validation.py"]), "hf": Case(["hf_trainer_eval.py"])}
    return run_many(cases, tmp_path_factory.mktemp("eval_loader"))


def test_a_slow_validation_loader_is_named_with_its_fix(runs: dict[str, Result]) -> None:
    r = runs["plain"]
    finding = r.finding("eval-loader-bound")
    assert finding["where"] == mark_line("slow_validation.py", "eval-loader-bound")
    evidence = finding["evidence"]
    assert evidence["dataset"] == "SlowVal" and evidence["eval_wait_pct_of_steps"] >= 20.0
    assert evidence["eval_batches"] >= 3
    assert r.report["verdict"]["status"] != "healthy"
    assert r.report["steps"]["loader"]["dataset_class"] == "TensorDataset"  # the steps' own loader, not the eval's
    assert "val = DataLoader(SlowVal(), batch_size=32, num_workers=" in finding["fix"]


def test_hf_trainers_evaluation_loader_is_told_apart_and_fixed_in_training_arguments(runs: dict[str, Result]) -> None:
    r = runs["hf"]
    steps = r.report["steps"]
    assert steps["loader"]["batch_size"] == 16 and steps["loader"]["built_by"] == "transformers"
    finding = r.finding("eval-loader-bound")
    assert "args = TrainingArguments(..., dataloader_num_workers=" in finding["fix"]
    assert "DataLoader(" not in finding["fix"]
