"""A device-mismatch crash names whose tensor the CPU operand is, and the fix goes where it was made: a layer kept
in a plain list and never moved, a prompt made on the CPU for `generate`, a plain object's tensors. Each of these got
the template `t = t.to(next(model.parameters()).device)` at the line that crashed (the fifth trial's I, J and H)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from run_cases import SCRIPTS, Case, Result, mark_line, patched_findings, run_many

CASES = {
    "listed": Case(["listed_layers_not_moved.py"]),
    "prompt": Case(["prompt_on_cpu.py"]),
    "scheduler": Case(["scheduler_on_cpu.py"]),
    "helper": Case(["hidden_from_helper.py"]),
    "loss": Case(["loss_weight_on_cpu.py"]),
    "setattr": Case(["schedule_setattr.py"]),
    "noise": Case(["noise_made_in_step.py"]),
}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    return run_many(CASES, tmp_path_factory.mktemp("operand"), preflight=True)


def test_a_layer_in_a_plain_list_never_moved_is_the_model_to_move_where_it_is_built(runs: dict[str, Result]) -> None:
    r = runs["listed"]
    assert r.returncode == 1 and r.report["verdict"]["root_cause"] == "model-on-cpu"
    finding = r.finding("model-on-cpu")
    assert finding["where"] == mark_line("listed_layers_not_moved.py", "model-on-cpu")
    assert finding["evidence"]["model"] == "Layer" and finding["evidence"]["held_in"] == "Net.layers"
    fix = finding["fix"].splitlines()
    assert fix[0].startswith("self.layers = self.layers + [Layer(dims[d], dims[d + 1]).to(device)]")
    assert any("nn.ModuleList" in line for line in fix)
    assert not any("every batch" in line for line in fix)  # the batch was on the device: the crash says so
    (edit,) = finding["evidence"]["edits"]
    assert [line.split("  #")[0] for line in edit["new"]] == [
        "            self.layers = self.layers + [Layer(dims[d], dims[d + 1]).to(device)]"
    ]
    operand = r.report["placement"]["crash_operand"]
    assert (operand["kind"], operand["name"], operand["owner"]) == ("parameter", "weight", "Layer")


def test_a_prompt_made_on_the_cpu_is_fixed_where_it_is_made_not_in_forward(runs: dict[str, Result]) -> None:
    r = runs["prompt"]
    where = mark_line("prompt_on_cpu.py", "device-mismatch-error")
    finding = r.finding("device-mismatch-error")
    assert finding["where"] == where
    assert finding["title"].endswith(f"the CPU tensor is context, made at {where}")
    assert finding["evidence"]["host_tensor"] == "context"
    assert "context = torch.zeros((1, 1), dtype=torch.long, device=device)" in finding["fix"].splitlines()
    (edit,) = finding["evidence"]["edits"]
    assert edit["line"] == int(where.rsplit(":", 1)[1])
    assert "t = t.to(next(model.parameters()).device)" not in finding["fix"]


def test_a_plain_objects_tensors_are_moved_once_after_it_is_built_and_the_patch_works(
    runs: dict[str, Result], tmp_path: Path
) -> None:
    r = runs["scheduler"]
    script = "scheduler_on_cpu.py"
    finding = r.finding("device-mismatch-error")
    assert finding["where"] == mark_line(script, "device-mismatch-error")
    evidence = finding["evidence"]
    assert evidence["host_tensor"] == "NoiseScheduler.sqrt_alphas_cumprod"
    assert "for name, value in vars(scheduler).items():" in finding["fix"]
    assert "betas" in finding["fix"]  # the object's other host tensors are named: one move covers them all

    shutil.copy(SCRIPTS / script, tmp_path / script)
    out = tmp_path / "before"
    cmd = [sys.executable, "-m", "gputriage"]
    (tmp_path / "report.json").write_text(json.dumps(r.report))
    subprocess.run([*cmd, "report", "report.json", "--patch", "fix.patch"], cwd=tmp_path, check=True)
    subprocess.run(["git", "apply", "fix.patch"], cwd=tmp_path, check=True, capture_output=True)
    run = [*cmd, "run", "--preflight", "--out", str(out), script]
    after = subprocess.run(run, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert after.returncode == 0, after.stderr[-2000:]
    assert "gputriage verdict: HEALTHY" in after.stdout + after.stderr


def test_a_loss_modules_cpu_buffer_is_moved_where_the_loss_is_built_and_the_patch_works(
    runs: dict[str, Result], tmp_path: Path
) -> None:
    """A trial: the fix named the exact line, `criterion = nn.CrossEntropyLoss(...).to(device)`, said "move the model",
    and the patch had no edit."""
    r = runs["loss"]
    script = "loss_weight_on_cpu.py"
    finding = r.finding("device-mismatch-error")
    where = mark_line(script, "device-mismatch-error")
    assert finding["where"] == where and finding["evidence"]["host_tensor"] == "CrossEntropyLoss.weight"
    fix = finding["fix"]
    assert fix.startswith("criterion = nn.CrossEntropyLoss(weight=torch.ones(5), ignore_index=0).to(device)")
    assert "move the CrossEntropyLoss once" in fix and "model" not in fix
    (edit,) = finding["evidence"]["edits"]
    assert edit["line"] == int(where.rsplit(":", 1)[1])
    assert patched_findings(r.report, script, tmp_path) == []


def test_tensors_set_with_setattr_in_init_are_registered_as_buffers_by_the_patch(
    runs: dict[str, Result], tmp_path: Path
) -> None:
    """A trial: `setattr(self, k, v)` over a schedule's dict got the generic `self.register_buffer("sqrtab", ...)`
    and no edit; the loop's own names are the fix."""
    r = runs["setattr"]
    script = "schedule_setattr.py"
    finding = r.finding("model-partly-on-cpu")
    assert finding["where"] == mark_line(script, "model-partly-on-cpu")
    assert "self.register_buffer(k, v)  # instead of: setattr(self, k, v)" in finding["fix"]
    (edit,) = finding["evidence"]["edits"]
    assert [line.strip() for line in edit["new"]] == ["self.register_buffer(k, v)  # MARK model-partly-on-cpu"]
    assert patched_findings(r.report, script, tmp_path) == []


def test_a_tensor_made_on_the_line_that_crashed_gets_the_device_of_what_it_meets(
    runs: dict[str, Result], tmp_path: Path
) -> None:
    """A trial (a Lightning training_step, a speech tutorial's loop): the template `t = t.to(next(model.parameters())
    .device)` with names the line does not have, and no patch."""
    r = runs["noise"]
    script = "noise_made_in_step.py"
    finding = r.finding("device-mismatch-error")
    assert finding["where"] == mark_line(script, "device-mismatch-error")
    assert "y_hat = y_hat + 0.01 * torch.randn(y_hat.shape[0], 1, device=y_hat.device)" in finding["fix"]
    assert "next(model.parameters())" not in finding["fix"]
    assert patched_findings(r.report, script, tmp_path) == []


def test_a_state_made_by_a_method_of_the_model_is_fixed_in_that_method(runs: dict[str, Result]) -> None:
    """The char-RNN tutorial's `initHidden` without device=: the crash is inside forward, the variable is bound at
    `hidden = rnn.initHidden()`, and the factory that made it is in the method (a trial: the fix was the template at
    the crash's line)."""
    r = runs["helper"]
    # the model's call was seen in the window with the state on the CPU: data-on-cpu, fixed where the state is made
    finding = r.finding("data-on-cpu")
    assert finding["where"] == mark_line("hidden_from_helper.py", "made-on-cpu")
    assert "return torch.zeros(1, self.hidden_size, device=next(self.parameters()).device)" in finding["fix"]
    (edit,) = finding["evidence"]["edits"]
    assert edit["line"] == int(finding["where"].rsplit(":", 1)[1])
