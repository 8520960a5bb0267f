"""Patches that a twelfth trial found breaking a job that ran: each patched script must run, and its mistake go."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_cases import Case, Result, mark_line, patched_findings, run_many

GLOBAL, LOSS, BATCH = "global_input_not_moved.py", "loss_on_cpu.py", "batch_indexed_not_moved.py"
BESIDE, SLICED = "read_beside_a_return.py", "sliced_dataset_not_moved.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    scripts = {"global": GLOBAL, "loss": LOSS, "batch": BATCH, "beside": BESIDE, "sliced": SLICED}
    cases = {name: Case([script]) for name, script in scripts.items()}
    return run_many(cases, tmp_path_factory.mktemp("patches"), preflight=True)


def test_a_module_global_moves_in_the_scripts_block_not_inside_the_function(
    runs: dict[str, Result], tmp_path: Path
) -> None:
    """pyGAT: the patch put `adj = adj.to(...)` inside `train()`, and the patched script died (UnboundLocalError)."""
    finding = runs["global"].finding("data-on-cpu")
    assert finding["where"] == mark_line(GLOBAL, "data-on-cpu")
    assert finding["fix"].splitlines()[-1] == "features = features.cuda()"
    assert "module global" in finding["fix"]
    (edit,) = finding["evidence"]["edits"]
    assert f"{GLOBAL}:{edit['line']}" == mark_line(GLOBAL, "last-move")
    assert edit["new"][-1] == "    features = features.cuda()"
    assert patched_findings(runs["global"].report, GLOBAL, tmp_path) == []


def test_a_loss_the_script_moves_to_the_cpu_drops_every_cpu_call(runs: dict[str, Result], tmp_path: Path) -> None:
    """TCN: `criterion(out.cpu(), y.cpu())` got `.to(device)` on the labels alone (a crash on a GPU); and
    weight_norm's `weight` was "a plain tensor attribute off cuda" with a register_buffer fix that raised."""
    r = runs["loss"]
    finding = r.finding("data-on-cpu")
    assert finding["where"] == mark_line(LOSS, "data-on-cpu")
    assert finding["fix"].splitlines()[-1] == "loss = criterion(out, y)"
    assert finding["title"].startswith("CrossEntropyLoss runs on cpu, not on cuda: the script moves its operands")
    (edit,) = finding["evidence"]["edits"]
    assert edit["new"] == ["    loss = criterion(out, y)  # MARK data-on-cpu"]
    assert "model-partly-on-cpu" not in r.codes()
    assert patched_findings(r.report, LOSS, tmp_path) == []


def test_a_batch_indexed_in_the_calls_moves_whole(runs: dict[str, Result], tmp_path: Path) -> None:
    """accelerate's loop: `model(data[0])` then `criterion(out, data[1])`; the patch moved `data[0]` alone and the
    patched job crashed at the next line, on the labels."""
    finding = runs["batch"].finding("data-on-cpu")
    assert finding["where"] == mark_line(BATCH, "data-on-cpu")
    line = "data = [t.to(device, non_blocking=True) if torch.is_tensor(t) else t for t in data]"
    assert finding["fix"].splitlines()[-1] == line
    assert "accelerator.prepare" not in finding["fix"]  # not an accelerate script: no word of it
    (edit,) = finding["evidence"]["edits"]
    assert edit["new"][0].strip() == line
    assert patched_findings(runs["batch"].report, BATCH, tmp_path) == []


def test_a_log_beside_a_read_left_every_step_is_not_gated(runs: dict[str, Result]) -> None:
    """pyGAT: the patch spaced the epoch's print out to every 100 epochs while `return loss_val.item()` still read
    every step: no wait saved, and the job printed 1 epoch line of 12."""
    finding = runs["beside"].finding("host-sync-in-loop")
    assert finding["where"] == mark_line(BESIDE, "print")
    assert not [e for e in finding["evidence"].get("edits", []) if e["kind"] == "read-rarely"]
    assert "still reads a device value every step, right beside these" in finding["fix"]


def test_a_batch_sliced_from_a_global_dataset_moves_the_dataset_once(runs: dict[str, Result], tmp_path: Path) -> None:
    """TCN: `x = train_x[start:end]` in the step, `train_x = train_x.cuda()` dropped from `if args.cuda:`; the patch
    copied every slice to the device inside the step."""
    finding = runs["sliced"].finding("data-on-cpu")
    assert finding["where"] == mark_line(SLICED, "data-on-cpu")
    assert finding["fix"].splitlines()[-1] == "train_x = train_x.cuda()"
    (edit,) = finding["evidence"]["edits"]
    assert f"{SLICED}:{edit['line']}" == mark_line(SLICED, "last-move")
    assert patched_findings(runs["sliced"].report, SLICED, tmp_path) == []
