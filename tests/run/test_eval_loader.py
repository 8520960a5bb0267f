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
    assert evidence["eval_batches"] >= 3 and evidence["eval_batches"] % 3 == 0  # 3 a pass: the end of a pass is none
    assert r.report["verdict"]["status"] != "healthy"
    assert r.report["steps"]["loader"]["dataset_class"] == "TensorDataset"  # the steps' own loader, not the eval's
    assert "val = DataLoader(SlowVal(), batch_size=32, num_workers=" in finding["fix"]


def test_hf_trainers_evaluation_loader_is_told_apart_and_fixed_in_training_arguments(runs: dict[str, Result]) -> None:
    r = runs["hf"]
    steps = r.report["steps"]
    assert steps["loader"]["batch_size"] == 16 and steps["loader"]["built_by"] == "transformers"
    finding = r.finding("eval-loader-bound")
    # the Trainer builds its evaluation loader anew at each evaluate(): one loader all the same, every pass counted (a
    # trial counted the busiest pass alone, 3 batches of 8); only the first batch of all is fetched before it is known
    assert finding["evidence"]["eval_batches"] >= 19, finding["evidence"]
    assert "args = TrainingArguments(..., dataloader_num_workers=" in finding["fix"]
    assert "DataLoader(" not in finding["fix"]


def test_a_crash_no_finding_explains_is_said_after_the_cause() -> None:
    """A trial: a job that died at step 30 with an evaluation loader's finding lost its crash sentence (it had read
    INCONCLUSIVE, "The script crashed with RuntimeError ...")."""
    from gputriage.diagnosis.verdict import build_verdict
    from gputriage.findings import Finding, Severity
    from gputriage.record import Run
    from gputriage.record.process import ProcessSection

    run = Run(command="run")
    run.process = ProcessSection(exit_code=1, exception_type="RuntimeError", crash_where="train.py:24")
    cause = Finding("eval-loader-bound", 5, Severity.WARNING, "An evaluation DataLoader held the job")
    summary = build_verdict(run, [cause]).summary
    assert summary.startswith("An evaluation DataLoader held the job.")
    assert "The script crashed with RuntimeError at train.py:24 (exit code 1)" in summary
    crash = Finding(
        "device-mismatch-error",
        3,
        Severity.CRITICAL,
        "The script died mixing tensors",
        evidence={"crash_where": "train.py:24"},
    )
    assert "crashed with" not in build_verdict(run, [crash]).summary


def test_the_evaluations_share_rests_on_the_steps_every_number_rests_on(runs: dict[str, Result]) -> None:
    """A trial: the eval finding counted 60 steps, warm-up step 0 among them, beside a report of 59."""
    r = runs["plain"]
    evidence = r.finding("eval-loader-bound")["evidence"]
    assert evidence["steps_measured"] == len(r.report["steps"]["steps"]) - 1
    # judged for meta here, an accelerator: the GPU waits; a CPU-judged run's training waits (no GPU said)
    assert r.finding("eval-loader-bound")["title"].endswith("the GPU waits for it meanwhile")
