"""`gputriage run --preflight`: the scenario scripts, written for CUDA, run unchanged with CUDA simulated on the
stand-in, through the real CLI. The same roots and lines as on meta (test_run_cli.py) and on a GPU (gpu_check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from run_cases import SCRIPTS, Case, Result, mark_line, run_case, run_many
from scenarios import SCENARIOS

from gputriage.collectors.stack_sampler import FIRST_SAMPLED_STEP

LABEL = "preflight on a stand-in device"
CASES = {s.name: Case(s.argv) for s in SCENARIOS}


@pytest.fixture(scope="module")
def preflights(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    return run_many(CASES, tmp_path_factory.mktemp("preflight"), preflight=True)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.name)
def test_every_scenario_gets_its_root_cause_and_exit_code(preflights: dict[str, Result], scenario: Any) -> None:
    r = preflights[scenario.name]
    assert r.returncode == scenario.exit_code, r.stderr[-2000:]
    assert r.report["verdict"]["root_cause"] == scenario.root_cause


def _root(r: Result) -> str | None:
    return r.report["verdict"]["root_cause"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("name", "code", "script"),
    [
        ("model_not_moved", "model-on-cpu", "model_not_moved.py"),
        ("inputs_not_moved", "data-on-cpu", "inputs_not_moved.py"),
        ("labels_not_moved", "data-on-cpu", "labels_not_moved.py"),
        ("submodule_after_to", "model-partly-on-cpu", "submodule_after_to.py"),
        ("plain_tensor_attribute", "model-partly-on-cpu", "plain_tensor_attribute.py"),
    ],
)
def test_placement_mistakes_crash_as_on_cuda_and_are_named(
    preflights: dict[str, Result], name: str, code: str, script: str
) -> None:
    r = preflights[name]
    assert r.returncode == 1
    assert "Expected all tensors to be on the same device" in r.stderr
    job_stderr = r.stderr.split("gputriage verdict")[0]
    assert "gputriage/collectors" not in job_stderr  # CUDA's traceback, not ours
    # nor torch's path into the stand-in's dispatch: CUDA's ends at the torch line that called the op
    assert "torch/_ops.py" not in job_stderr and "torch/_compile.py" not in job_stderr
    assert _root(r) == code
    assert r.finding(code)["where"] == mark_line(script, code)
    assert r.report["verdict"]["label"] == LABEL


def test_nothing_moved_keeps_the_scripts_exit_code_and_finds_no_device_compute(preflights: dict[str, Result]) -> None:
    r = preflights["nothing_moved"]
    assert r.returncode == 3
    assert {"data-on-cpu", "model-on-cpu", "no-gpu-compute"} <= set(r.codes())


def test_healthy_script_runs_until_its_steps_lasted_long_enough_with_exit_0(preflights: dict[str, Result]) -> None:
    """Ten steps at least; short ones go on, up to 100, until the steps after warm-up lasted a second. The healthy
    scenario's 3 epochs are 36 steps of a few ms: it ends by itself, with its own output, before that."""
    r = preflights["healthy"]
    assert r.returncode == 0, r.stderr
    assert not [f for f in r.report["findings"] if f["severity"] != "info"]
    stand_in = r.report["stand_in"]
    assert stand_in["preflight"] and stand_in["backing"] == "cpu"
    stopped = stand_in["stopped_after_steps"]
    after_warm_up = [s["wall_s"] for s in r.report["steps"]["steps"][1:]]
    if stopped is None:  # the job ended by itself, its steps shorter than the preflight's window
        assert "done" in r.stdout and r.report["steps"]["steps_observed"] == 36
    else:  # a slow machine: the steps lasted a second before the job ended
        assert "done" not in r.stdout and 10 <= stopped < 36 and r.report["steps"]["steps_observed"] == stopped
        assert stopped == 10 or sum(after_warm_up) >= 0.9
    assert all(s["stand_in_s"] is not None for s in r.report["steps"]["steps"])
    assert r.report["compute"]["ops_per_device"]["cuda"] > 0
    assert "environment" not in r.report or r.report["environment"] is None  # rung 1 is the GPU machine's
    verdict = r.report["verdict"]
    assert verdict["label"] == LABEL and "not judged" in verdict["scope"] and "GPU timing" in verdict["scope"]
    assert LABEL in r.stderr


def test_short_steps_go_on_until_a_second_of_steps_after_warm_up_then_end(tmp_path: Path) -> None:
    """20 epochs of 12 steps of a few ms: ten steps would give the stack sampler some 20 samples. The job goes on
    past 10, and ends once the steps after warm-up lasted a second (or at 100 on a very fast machine). The second
    counts from the first sampled step, after the op census's steps (which a busy machine made last 0.1 s)."""
    r = run_case(Case(["healthy.py", "--epochs", "20"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    stopped = r.report["stand_in"]["stopped_after_steps"]
    after_warm_up = [s["wall_s"] for s in r.report["steps"]["steps"][FIRST_SAMPLED_STEP:]]
    assert "done" not in r.stdout and r.report["steps"]["steps_observed"] == stopped
    assert 10 < stopped <= 100
    assert stopped == 100 or sum(after_warm_up) >= 0.9
    assert sum(after_warm_up[:-1]) < 1.0  # it did not go on once a second had passed
    assert r.report["sampler"]["steps"] > 10


def test_item_every_step_is_a_host_sync_at_its_line(preflights: dict[str, Result]) -> None:
    r = preflights["item_each_step"]
    assert _root(r) == "host-sync-in-loop"
    finding = r.finding("host-sync-in-loop")
    assert finding["where"] == mark_line("item_each_step.py", "host-sync-in-loop")
    assert finding["evidence"]["syncs_per_step"] >= 1


def test_a_loop_without_optimizer_or_dataloader_is_cut_into_steps_at_each_backward(tmp_path: Path) -> None:
    """word_language_model's loop: batches sliced from a tensor and a hand-written update. Without steps the preflight
    never ended, and the census never ran."""
    r = run_case(Case(["manual_sgd_no_loader.py"]), tmp_path, preflight=True, steps=10)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.report["steps"]["step_source"] == "backward" and r.report["steps"]["steps_observed"] == 10
    assert "reloaded on" not in r.stdout  # ended by the preflight after 10 steps
    assert _root(r) == "host-sync-in-loop"
    finding = r.finding("host-sync-in-loop")
    assert finding["where"] == mark_line("manual_sgd_no_loader.py", "host-sync-in-loop")
    assert "total_loss += loss.detach()" in finding["fix"]  # the script's own accumulator, kept on the device


def test_gradient_accumulation_without_a_dataloader_steps_with_the_optimizer(tmp_path: Path) -> None:
    """Backwards cut steps only where no optimizer exists: nanoGPT's 40 micro-steps are one step, and the preflight
    still ends after 10 optimizer steps, not 10 backwards."""
    r = run_case(Case(["accumulate_no_loader.py"]), tmp_path, preflight=True, steps=10)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.report["steps"]["step_source"] == "optimizer" and r.report["steps"]["steps_observed"] == 10
    assert "optimizer step 8" in r.stdout and "optimizer step 10" not in r.stdout


def test_grad_scalers_own_read_is_the_librarys_not_the_users_line(tmp_path: Path) -> None:
    """The AMP recipe: `scaler.step(opt)` reads found_inf once per step inside torch; the user's line cannot drop it."""
    r = run_case(Case(["amp_grad_scaler.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not [f for f in r.report["findings"] if f["severity"] != "info"]
    sync = r.finding("host-sync-in-loop")
    assert sync["severity"] == "info" and "grad_scaler.py" in sync["where"]


def test_a_second_loop_with_a_new_optimizer_keeps_counting_steps(tmp_path: Path) -> None:
    """The first optimizer drove the count; once it is gone, the new one does (the AMP recipe's second loop was never
    observed, and nothing said so)."""
    r = run_case(Case(["two_loops_new_optimizer.py"]), tmp_path, preflight=True, steps=9)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "first loop done" in r.stdout and "second loop done" not in r.stdout  # ended at step 9, in the second
    assert r.report["steps"]["steps_observed"] == 9


def test_a_tensor_put_on_the_gpu_in_a_loader_worker_dies_as_on_cuda_and_is_named(tmp_path: Path) -> None:
    """`.to(device)` in __getitem__ with worker processes: CUDA's own error, and the dataset's line, not "a crash
    that is not a placement problem" (karpathy/minGPT's CharDataset with device='cuda')."""
    r = run_case(Case(["device_in_worker.py"]), tmp_path, preflight=True)
    assert r.returncode == 1
    assert "RuntimeError: Cannot re-initialize CUDA in forked subprocess" in r.stderr
    assert _root(r) == "device-in-loader-worker"
    finding = r.finding("device-in-loader-worker")
    assert finding["where"] == mark_line("device_in_worker.py", "device-in-loader-worker")
    assert "return (features, i % 2)" in finding["fix"]
    assert "features = features.to(device, non_blocking=True)" in finding["fix"]
    assert "labels = labels.to(device, non_blocking=True)" in finding["fix"]


def test_unused_modules_in_a_plain_dict_are_not_a_stray_part(tmp_path: Path) -> None:
    """Only a module that ran counts: SimCLR keeps both backbones in a plain dict and uses one (a false critical)."""
    r = run_case(Case(["backbone_choices.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not [f for f in r.report["findings"] if f["severity"] != "info"], r.codes()


def test_a_device_flag_left_at_cpu_is_named_instead_of_more_moves(tmp_path: Path) -> None:
    """Everything is moved with .to(DEVICE) and DEVICE is the CPU: the fix is where DEVICE is chosen."""
    r = run_case(Case(["device_flag_cpu.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    root = r.finding(_root(r) or "")
    assert root["where"] == mark_line("device_flag_cpu.py", "data-on-cpu")  # the line to change, not a batch's
    fix = root["fix"]
    assert "DEVICE was the CPU when this ran" in fix
    assert 'DEVICE = torch.device("cuda" if args.backend == "gpu" and torch.cuda.is_available() else "cpu")' in fix
    assert ".to(DEVICE, non_blocking=True)" not in fix
    assert not [f for f in r.report["findings"] if f["evidence"].get("edits")]  # no patch of moves that change nothing


@pytest.mark.parametrize("peek", [False, True])
def test_an_evaluation_before_training_is_not_the_training_steps(tmp_path: Path, peek: bool) -> None:
    """llama2.c evaluates under no_grad before its first optimizer step: its batches were counted as steps, the
    preflight ended inside the evaluation and its once-per-batch .item() became a false host-sync warning."""
    r = run_case(Case(["eval_before_training.py", *(["--peek"] if peek else [])]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "training" in r.stdout  # the job got past the evaluation into its training loop
    assert not [f for f in r.report["findings"] if f["severity"] != "info"], r.codes()
    assert r.report["steps"]["step_source"] == "optimizer"


def test_a_batch_built_on_the_device_gets_workers_only_after_it_moves_out(tmp_path: Path) -> None:
    """collate_fn builds the batch on the GPU: num_workers alone would die with "Cannot re-initialize CUDA in forked
    subprocess", and the stand-in's compute inside the wait made the wait 104% of the step."""
    r = run_case(Case(["collate_on_device.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    finding = r.finding("input-pipeline-bound")
    assert finding["where"] == mark_line("collate_on_device.py", "input-pipeline-bound")
    assert finding["evidence"]["batch_device"] == "cuda:0"
    assert "Worker processes cannot use CUDA" in finding["fix"]
    assert 0 < finding["evidence"]["data_wait_pct_of_step"] <= 100
    assert finding["evidence"]["data_wait_pct_interval_90"][1] <= 100


def test_legacy_cuda_tensor_classes_build_tensors_on_the_stand_in(tmp_path: Path) -> None:
    """torch.cuda.FloatTensor(n, 1), t.type(torch.cuda.FloatTensor), FloatTensor(np_array) and isinstance checks ran
    on a GPU machine, and died under the preflight: a healthy job must behave as it would there."""
    r = run_case(Case(["legacy_cuda_tensors.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "built on cuda:0 cuda:0 cuda:0" in r.stdout
    assert not [f for f in r.report["findings"] if f["severity"] != "info"], r.codes()


def test_a_scalar_written_through_a_mask_is_not_a_sync_but_values_are(tmp_path: Path) -> None:
    """`x[dones] = 0.0` goes to masked_fill_ on CUDA (no count of the mask on the host): a healthy DQN step got a
    host-sync warning. `x[dones] = r[dones]` does sync, and is named at its line."""
    healthy = run_case(Case(["mask_fill_write.py"]), tmp_path / "scalar", preflight=True)
    assert healthy.returncode == 0, healthy.stderr[-2000:]
    assert "host-sync-in-loop" not in healthy.codes()
    values = run_case(Case(["mask_fill_write.py", "--write-values"]), tmp_path / "values", preflight=True)
    assert values.finding("host-sync-in-loop")["where"] == mark_line("mask_fill_write.py", "host-sync-in-loop")


def test_submodules_called_on_their_own_inherit_the_device_choice_of_their_holder(tmp_path: Path) -> None:
    """cleanrl run with --cuda False: only agent.actor / agent.critic are called, the agent was moved to the CPU by a
    flag; every finding points at the device choice, and the models are named by their place in the agent."""
    r = run_case(Case(["flag_off_submodules.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    where = mark_line("flag_off_submodules.py", "data-on-cpu")
    assert r.finding("data-on-cpu")["where"] == where
    models = [f for f in r.report["findings"] if f["code"] == "model-on-cpu"]
    assert {f["evidence"]["model"] for f in models} == {"Agent.actor (Sequential)", "Agent.critic (Sequential)"}
    assert all(f["where"] == where and "device was the CPU when this ran" in f["fix"] for f in models)


def test_a_framework_told_to_use_the_cpu_is_named_at_its_call(tmp_path: Path) -> None:
    """Lightning's Trainer(accelerator="cpu") places the model and the batches: the fix is that keyword at the Trainer
    line, not .to() lines the script does not have."""
    r = run_case(Case(["lightning_cpu_accelerator.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    where = mark_line("lightning_cpu_accelerator.py", "data-on-cpu")
    for code in ("data-on-cpu", "model-on-cpu", "no-gpu-compute"):
        finding = r.finding(code)
        assert finding["where"] == where, code
        assert 'trainer = L.Trainer(\n    accelerator="gpu", devices=1, max_epochs=1' in finding["fix"]
        assert ".to(" not in finding["fix"].replace("no .to() in the script", "")
    assert r.finding("model-on-cpu")["evidence"]["device_chosen_by"] == 'accelerator="cpu"'


def test_boolean_mask_indexing_every_step_is_a_host_sync(tmp_path: Path) -> None:
    """SimCLR's negatives `sim[~mask]`: CUDA counts the mask on the host; rung 4 said pass."""
    r = run_case(Case(["mask_indexing.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    finding = r.finding("host-sync-in-loop")
    assert finding["where"] == mark_line("mask_indexing.py", "host-sync-in-loop")
    assert "torch.where(mask, x, fill)" in finding["fix"]


def test_the_best_model_saved_and_reloaded_in_the_run_stays_on_the_device(tmp_path: Path) -> None:
    """torch.load without map_location puts a GPU run's cuda tensors back on cuda: under the preflight the reloaded
    model was on the CPU, the evaluation after it crashed, and model-on-cpu was blamed on correct code."""
    r = run_case(Case(["manual_sgd_no_loader.py"]), tmp_path, preflight=True, steps=1000)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "reloaded on cuda:0" in r.stdout
    assert not {"model-on-cpu", "device-mismatch-error"} & set(r.codes())


def test_slow_main_process_pipeline_is_judged_on_the_hosts_time(preflights: dict[str, Result]) -> None:
    r = preflights["slow_pipeline"]
    assert _root(r) == "input-pipeline-bound"
    finding = r.finding("input-pipeline-bound")
    assert finding["where"] == mark_line("slow_pipeline.py", "input-pipeline-bound")
    # the fix shows the script's own DataLoader call as the patch rewrites it, not a generic one
    assert "loader = DataLoader(SlowImages(), batch_size=4, num_workers=" in finding["fix"]


def test_unrelated_crash_is_not_blamed_on_placement(preflights: dict[str, Result]) -> None:
    r = preflights["unrelated_crash"]
    assert r.returncode == 1
    assert _root(r) is None
    assert "ValueError: learning-rate schedule ended early" in r.stderr


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--preflight", "--trace"], "--trace records GPU kernels"),
        (["--preflight", "--expect-device", "meta"], "--preflight simulates a CUDA device"),
    ],
)
def test_preflight_refuses_what_it_cannot_do(tmp_path: Path, options: list[str], message: str) -> None:
    cmd = [sys.executable, "-m", "gputriage", "run", *options, "--out", str(tmp_path), str(SCRIPTS / "healthy.py")]
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert not (tmp_path / "report.json").exists()


def test_a_crash_on_a_cpu_tensor_made_in_forward_points_at_the_line_that_made_it(tmp_path: Path) -> None:
    """CUDA (here the stand-in) refuses the embedding at step 0; the probes saw where its CPU operand was made."""
    out = tmp_path / "out"
    done = subprocess.run(
        [sys.executable, "-m", "gputriage", "run", "--preflight", "--out", str(out), "pos_arange_in_forward.py"],
        cwd=SCRIPTS, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    (finding,) = [f for f in json.loads((out / "report.json").read_text())["findings"] if f["severity"] == "critical"]
    assert finding["code"] == "device-mismatch-error"
    assert Path(finding["where"]).name == mark_line("pos_arange_in_forward.py", "device-mismatch-error")
    assert "device=idx.device" in finding["fix"]


def test_a_grid_built_by_torchs_own_backward_is_not_a_device_mismatch_and_warnings_keep_their_place(
    tmp_path: Path,
) -> None:
    """PyTorch's spatial transformer tutorial: affine_grid's backward makes its base grid from the operand's C++
    options, the stand-in's "cpu"; on a GPU it is on the GPU. The preflight called it a CPU tensor meeting cuda ones
    (critical), and placed torch's own warnings on torch/overrides.py (two of them then printed as one), with a
    FutureWarning of torch.distributed that a plain run never prints."""
    r = run_case(Case(["spatial_transformer_grid.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert not [f for f in r.report["findings"] if f["severity"] != "info"]
    for mark in ("affine_grid", "grid_sample"):
        assert f"{mark_line('spatial_transformer_grid.py', mark)}: UserWarning: Default grid_sample" in r.stderr
    assert "overrides.py" not in r.stderr and "FutureWarning" not in r.stderr


def test_labels_passed_to_a_model_that_computes_its_loss_are_fixed_once_in_the_scripts_names(tmp_path: Path) -> None:
    """makemore: the loop, at the module's top level, moves X with `args.device` and passes Y to a model whose forward
    computes the loss from `targets.view(-1)`. The fix named `device` (another function's local) and moved the
    loss's view as well, and the patch made the script raise NameError."""
    r = run_case(Case(["labels_into_model_loss.py"]), tmp_path, preflight=True)
    finding = r.finding("data-on-cpu")
    where = mark_line("labels_into_model_loss.py", "data-on-cpu")
    line = int(where.rsplit(":", 1)[1])
    assert finding["where"] == where
    assert finding["title"] == "The labels reach the loss on cpu, not on cuda"
    assert finding["fix"].splitlines() == [
        f"# before line {line}: logits, loss = model(X, Y)",
        "Y = Y.to(args.device, non_blocking=True)",
    ]
    assert [e["line"] for e in finding["evidence"]["edits"]] == [line]


def test_cuda_launch_blocking_set_by_the_script_is_named_at_its_line_and_patched_out(tmp_path: Path) -> None:
    """causes.md F.17: `os.environ["CUDA_LAUNCH_BLOCKING"] = "1"` at a script's top makes every launch synchronous.
    Nothing said so: the report was the healthy one's."""
    r = run_case(Case(["launch_blocking.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert _root(r) == "launch-blocking"
    finding = r.finding("launch-blocking")
    where = mark_line("launch_blocking.py", "launch-blocking")
    assert finding["where"] == where
    assert finding["evidence"]["set_by"] == "job" and finding["evidence"]["launch_blocking"] == "1"
    assert '# os.environ["CUDA_LAUNCH_BLOCKING"] = "1"' in finding["fix"]
    (edit,) = finding["evidence"]["edits"]
    assert edit["line"] == int(where.rsplit(":", 1)[1]) and all(line.startswith("#") for line in edit["new"])


def test_cuda_launch_blocking_from_the_environment_is_to_be_unset_there(tmp_path: Path) -> None:
    r = run_case(Case(["healthy.py"]), tmp_path, preflight=True, env={"CUDA_LAUNCH_BLOCKING": "1"})
    finding = r.finding("launch-blocking")
    assert finding["evidence"]["set_by"] == "environment" and finding["where"] is None
    assert finding["fix"].startswith("unset CUDA_LAUNCH_BLOCKING")
    assert "launch-blocking" not in {
        f["code"] for f in run_case(Case(["healthy.py"]), tmp_path / "off", preflight=True).report["findings"]
    }


def test_a_shape_check_on_the_cpu_before_the_move_is_not_the_training(tmp_path: Path) -> None:
    """d2l's shape check before `net.to(device)`, the keyword form of .to() and F.one_hot on the device: a healthy
    script that once crashed under the preflight and drew false criticals."""
    r = run_case(Case(["shape_check_before_move.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "trained on cuda:0" in r.stdout
    assert not [f for f in r.report["findings"] if f["severity"] != "info"], r.codes()


@pytest.mark.parametrize(
    ("flag", "said", "mark"),
    [
        ((), "held to deterministic algorithms", "cudnn-deterministic"),
        (("--default",), "autotuner is off while", None),
        (("--variable",), "autotuner is on while the convolutions' input shapes change", "cudnn-benchmark-on"),
    ],
)
def test_cudnn_settings_that_do_not_fit_the_convolutions_are_a_note_at_their_line(
    tmp_path: Path, flag: tuple[str, ...], said: str, mark: str | None
) -> None:
    """causes.md J.27-28, and fast_neural_style's `cudnn.deterministic = True`, which a user trial found unmentioned."""
    r = run_case(Case(["cudnn_settings.py", *flag]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    found = r.finding("cudnn-autotuner")
    assert found["severity"] == "info" and said in found["title"]
    assert found["where"] == (mark_line("cudnn_settings.py", mark) if mark else None)


def test_a_policys_distribution_checks_get_validate_args_off_and_an_environments_action_read_is_inherent(
    tmp_path: Path,
) -> None:
    """A user trial: `env.step(action.item())` got "compute it with torch ops on the device", and the reads inside
    torch.distributions' argument checks (`if not valid.all()`) the same; they are switched off on the user's line."""
    r = run_case(Case(["rl_policy_gradient.py"]), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    found = r.finding("host-sync-in-loop")
    assert found["severity"] == "warning"
    fix = found["fix"]
    assert "Categorical(logits=logits, validate_args=False).sample()" in fix
    assert "torch.distributions.Distribution.set_default_validate_args(False)" in fix
    assert "envs.worlds[0].step(action.item()) runs on the host and takes the action there" in fix
    assert "gymnasium.vector.SyncVectorEnv" in fix
    assert "compute it with torch ops" not in fix
    edits = {(e["line"], e["kind"]) for e in found["evidence"]["edits"]}
    line = int(mark_line("rl_policy_gradient.py", "distribution-check").rsplit(":", 1)[1])
    assert (line, "validate-args") in edits
    assert all(kind == "validate-args" for _, kind in edits)  # the environment's read is not patched away


@pytest.mark.parametrize(
    ("mode", "said", "mark"),
    [
        ("", "envs.worlds[0].step(action.item())", "env-step"),
        ("--vector", "envs.step(actions)", "vector-read"),
        # a trial: `return action.item()` in select_action, the caller's loop steps the environment with it (was: a
        # warning, "read it once every 100 steps", which an environment that needs every action cannot do)
        ("--select-action", None, "returned-read"),
    ],
)
def test_once_the_checks_are_off_an_environments_action_read_alone_is_a_note(
    tmp_path: Path, mode: str, said: str | None, mark: str
) -> None:
    """That read stays, one per step, whatever the user changes (the vectorised loop reads all the actions with one
    `.cpu()` for `envs.step(actions)`): a note, not a warning that a loop already fixed would keep."""
    argv = ["rl_policy_gradient.py", "--checks-off", *([mode] if mode else [])]
    r = run_case(Case(argv), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    found = r.finding("host-sync-in-loop")
    assert found["severity"] == "info"
    assert found["title"].endswith(": the action an environment on the host steps with")
    if said is not None:
        assert f"{said} runs on the host and takes the action there" in found["fix"]
    assert found["where"] == mark_line("rl_policy_gradient.py", mark)


def test_a_host_tensor_indexed_with_device_indices_crashes_as_on_cuda_and_the_fix_moves_it(tmp_path: Path) -> None:
    """A trial: the stand-in computed `target[mask]` (target on the CPU, mask on the device) and the run looked
    healthy; CUDA raises. The fix moves the indexed tensor, not the step's own output."""
    r = run_case(Case(["host_labels_device_mask.py"]), tmp_path, preflight=True)
    assert r.returncode == 1
    assert "IndexError: indices should be either on cpu or on the same device as the indexed tensor (cpu)" in r.stderr
    found = r.finding("device-mismatch-error")
    # the indexed tensor is known by name (stop 40): the fix makes it on the device where it is made, once
    where = mark_line("host_labels_device_mask.py", "labels-on-cpu")
    assert found["where"] == where
    assert found["title"].startswith("The script died indexing a tensor on the CPU with indices on the device")
    assert found["title"].endswith(f"the CPU tensor is target, made at {where}")
    assert "target = torch.randint(0, 3, (50,), device=device)" in found["fix"]
    assert "output = output.to" not in found["fix"]


def test_a_script_that_dies_before_importing_torch_is_still_a_preflight_that_judges_no_machine(tmp_path: Path) -> None:
    """The stand-in starts at the job's own `import torch`: a script that died before it got a report of this
    machine instead, critical no-gpu-visible with "run on a machine that has an NVIDIA GPU"."""
    r = run_case(Case(["import_error_first.py"]), tmp_path, preflight=True)
    assert r.returncode == 1 and "ModuleNotFoundError" in r.stderr
    assert r.report["stand_in"]["preflight"] is True
    assert r.report["verdict"]["label"] == LABEL and r.report["verdict"]["status"] == "unknown"
    assert not [f for f in r.report["findings"] if f["rung"] == 1]


@pytest.mark.parametrize("outputs_cpu", [False, True])
def test_a_loss_shown_on_made_up_cpu_numbers_before_training_is_not_the_training(
    tmp_path: Path, outputs_cpu: bool
) -> None:
    """A trial (the "Training with PyTorch" tutorial): the demo `loss_fn(dummy_outputs, dummy_labels)`, all on the
    CPU with no gradient, was critical data-on-cpu, and its patch crashed the script. A model's output brought back
    with `.cpu()` keeps its gradient, and its labels are still judged."""
    argv = ["loss_demo_before_training.py", *(["--outputs-cpu"] if outputs_cpu else [])]
    r = run_case(Case(argv), tmp_path, preflight=True)
    assert r.returncode == 0, r.stderr[-2000:]
    if outputs_cpu:
        assert r.finding("data-on-cpu")["where"] == mark_line("loss_demo_before_training.py", "data-on-cpu")
    else:
        assert "data-on-cpu" not in r.codes()


def test_a_device_tensor_sent_to_a_spawned_process_is_the_stand_ins_limit_not_the_scripts_fault(
    tmp_path: Path,
) -> None:
    """A trial (mnist_hogwild --cuda): the job died in multiprocessing ("bad value(s) in fds_to_keep": the stand-in's
    pickled copy was freed before the fork), and the verdict said the script was at fault."""
    r = run_case(Case(["spawn_cuda_model.py"]), tmp_path, preflight=True)
    assert r.returncode == 1
    assert "gputriage --preflight: a tensor on the simulated CUDA device cannot be sent to another process" in r.stderr
    summary = r.report["verdict"]["summary"]
    assert "The preflight could not go on at spawn_cuda_model.py:" in summary and "not at fault" in summary


def test_a_returned_action_beside_the_distributions_checks_is_said_inherent_in_the_fix(tmp_path: Path) -> None:
    """A trial (actor_critic): the warning for the argument checks also told `return action.item()` to read "every
    100 steps", which an environment that needs each action cannot do."""
    r = run_case(Case(["rl_policy_gradient.py", "--select-action"]), tmp_path, preflight=True)
    fix = r.finding("host-sync-in-loop")["fix"]
    assert "validate_args=False" in fix
    assert "envs.worlds[0].step(chosen) runs on the host and takes the action there" in fix
    assert "every 100 steps" not in fix
