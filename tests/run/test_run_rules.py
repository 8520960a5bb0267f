"""The run rules on hand-made Run records (no torch, no subprocess), and the probe's clock and window table."""

from __future__ import annotations

import pytest

from gputriage.diagnosis import diagnose
from gputriage.record import Run
from gputriage.record.compute import ComputeSection, HostSync, OpStat
from gputriage.record.placement import ModelInfo, PlacementSection, StrayPart, TensorSeen
from gputriage.record.process import ProcessSection
from gputriage.record.sampler import SampledLine, SamplerSection
from gputriage.record.steps import LoaderInfo, Step, StepsSection
from gputriage.rules.placement import is_device_mismatch, mismatch_devices

CUDA_TEXT = (
    "Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu! "
    "(when checking argument for argument mat1 in method wrapper_CUDA_addmm)"
)
MPS_TEXT = "Placeholder storage has not been allocated on MPS device!"
META_TEXT = "Tensor on device cpu is not on the expected device meta!"


def _run(**sections: object) -> Run:
    run = Run(command="run", expect_device="meta")
    for name, value in sections.items():
        setattr(run, name, value)
    return run


def _codes(run: Run) -> list[str]:
    return [f.code for f in diagnose(run).findings]


def _healthy_placement() -> PlacementSection:
    return PlacementSection(
        models=[ModelInfo(name="Net", parameter_count=10, devices={"meta": 10})],
        tensors=[TensorSeen(role="input", device="meta", shape=[8, 4], target="Net", where="train.py:9")],
    )


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (CUDA_TEXT, True),
        (MPS_TEXT, True),
        (META_TEXT, True),
        ("Input type (torch.FloatTensor) and weight type (torch.cuda.FloatTensor) should be the same", True),
        ("Input type (torch.cuda.HalfTensor) and weight type (torch.cuda.FloatTensor) should be the same", False),
        ("Tensor for argument #2 'mat1' is on CPU, but expected it to be on GPU (while checking arguments)", True),
        ("mat1 and mat2 shapes cannot be multiplied (8x16 and 32x4)", False),
        ("CUDA out of memory. Tried to allocate 2.00 GiB", False),
    ],
)
def test_device_mismatch_texts_of_each_backend(text: str, expected: bool) -> None:
    assert is_device_mismatch(text) is expected


def test_mismatch_devices_are_named_in_order() -> None:
    assert mismatch_devices(CUDA_TEXT) == ["cuda:0", "cpu"]
    assert mismatch_devices(META_TEXT) == ["cpu", "meta"]


def test_generic_mismatch_error_only_when_nothing_more_specific_applies() -> None:
    crash = ProcessSection(
        exit_code=1,
        exception_type="RuntimeError",
        exception_message=CUDA_TEXT,
        crash_where="model.py:31",
        crash_module="Net.attn (Attention)",
    )
    run = _run(placement=_healthy_placement(), process=crash)
    diag = diagnose(run)
    assert diag.verdict.root_cause == "device-mismatch-error"
    finding = diag.findings[0]
    assert finding.where == "model.py:31"
    assert finding.evidence["devices"] == ["cuda:0", "cpu"]
    assert finding.evidence["module"] == "Net.attn (Attention)"

    run.placement.models[0].devices = {"cpu": 10}  # type: ignore[union-attr]
    assert _codes(run)[0] == "model-on-cpu"
    assert "device-mismatch-error" not in _codes(run)


def test_unrelated_crash_is_not_a_placement_finding() -> None:
    crash = ProcessSection(exit_code=1, exception_type="RuntimeError", exception_message="mat1 and mat2 shapes ...")
    assert _codes(_run(placement=_healthy_placement(), process=crash)) == []


def test_partly_on_cpu_names_the_plain_attribute_and_its_line() -> None:
    placement = _healthy_placement()
    placement.models[0].devices = {"meta": 10, "cpu": 8}
    placement.models[0].stray = [StrayPart("enc.mask", "attribute", "cpu", 8, "model.py:12")]
    finding = diagnose(_run(placement=placement)).findings[0]
    assert finding.code == "model-partly-on-cpu"
    assert finding.where == "model.py:12"
    assert 'self.enc.register_buffer("mask"' in finding.fix


def test_blocks_that_share_one_attribute_line_get_its_fix_once() -> None:
    """minGPT's blocks each keep `self.bias = torch.tril(...)`: one line of code, fixed once (was: once per block)."""
    placement = _healthy_placement()
    placement.models[0].devices = {"meta": 10, "cpu": 24}
    placement.models[0].stray = [
        StrayPart(f"h.{i}.attn.bias", "attribute", "cpu", 8, "model.py:47") for i in range(3)
    ] + [StrayPart("h.0.attn.scale", "attribute", "cpu", 1, "model.py:48")]
    finding = diagnose(_run(placement=placement)).findings[0]
    assert finding.code == "model-partly-on-cpu"
    assert finding.fix.count("register_buffer(") == 2


def test_cpu_expected_device_describes_a_cpu_run() -> None:
    placement = _healthy_placement()
    placement.models[0].devices = {"cpu": 10}
    run = _run(placement=placement)
    run.expect_device = None
    run.resolved_device = "cpu"  # no --expect-device, and no accelerator at the job's start
    assert _codes(run) == ["cpu-run"]


def _steps(wait_s: float, wall_s: float, loader: LoaderInfo, n: int = 10) -> StepsSection:
    steps = [
        Step(index=i, start_s=i * wall_s, wall_s=wall_s, data_wait_s=wait_s, forward_s=0.0, other_s=wall_s - wait_s)
        for i in range(n)
    ]
    return StepsSection(steps=steps, loader=loader, steps_observed=n, step_source="optimizer", cpu_count=16)


def test_static_loader_settings_alone_never_fire() -> None:
    loader = LoaderInfo(dataset_class="TensorDataset", batch_size=8, num_workers=0, pin_memory=False)
    # num_workers=0 and no pinning, but the wait is 0.2 ms per step: nothing to fix
    assert _codes(_run(steps=_steps(0.0002, 0.0005, loader))) == []


def test_measured_wait_fires_with_evidence_and_a_fix_for_this_machine() -> None:
    loader = LoaderInfo(dataset_class="ImageFolder", batch_size=64, num_workers=0, where="train.py:40")
    run = _run(steps=_steps(0.030, 0.040, loader))
    finding = diagnose(run).findings[0]
    assert finding.code == "input-pipeline-bound"
    assert finding.severity.value == "critical"
    assert finding.evidence["data_wait_pct_of_step"] == 75.0
    assert finding.where == "train.py:40"
    assert "num_workers=8" in finding.fix  # 16 cores: one stays with the loop, capped at 8


def test_the_workers_asked_for_agree_with_the_workers_needed_or_say_why() -> None:
    """Trial 8's spatial transformer: "it takes 12 workers to keep up", then `num_workers=8` with no word of why."""
    loader = LoaderInfo(
        dataset_class="ImageFolder", batch_size=64, num_workers=0, where="train.py:40", batch_load_s=0.120
    )
    hot = SampledLine("data.py:44", "Pixels.__getitem__", 10, 0.9, 0.9, {"data_wait": 0.9}, 0.0, 0.9, 4)
    sampler = SamplerSection(steps=9, samples=200, time_s=1.1, phase_s={"data_wait": 1.0, "forward": 0.1}, lines=[hot])
    fix = diagnose(_run(steps=_steps(0.110, 0.120, loader), sampler=sampler)).findings[0].fix
    assert "it takes 12 workers to keep up" in fix and "num_workers=8," in fix
    assert "# num_workers=8 below: more than 8 workers rarely help one GPU" in fix
    # the line the loading's time goes to, which more workers spread but do not shorten, is in the fix too
    assert "# the loading's time goes to data.py:44 (Pixels.__getitem__), 90.0% of the wait" in fix


def test_the_cap_is_said_beside_the_cores_too() -> None:
    """A trial (2 cores, 2 workers): "use at least 12", the cores named, then `num_workers=max(NW, 8)` with no word
    of the cap that made 12 into 8."""
    from gputriage.rules.steps import WorkerSizing, sizing_comments

    loader = LoaderInfo(dataset_class="SlowDS", batch_size=32, num_workers=2)
    sizing = WorkerSizing(load_s=0.0204, work_s=0.0018, needed=12, usable=1, cpu_share=None)
    lines = "\n".join(sizing_comments(loader, sizing, 2))
    assert "use at least 12" in lines and "this machine has 2 cores" in lines
    assert "# num_workers=8 below: more than 8 workers rarely help one GPU" in lines


def test_short_waits_on_a_device_with_free_compute_do_not_fire() -> None:
    # meta: compute costs nothing, so 1 ms of collation is a large share of a 1.5 ms step, but not worth a finding
    loader = LoaderInfo(dataset_class="TensorDataset", batch_size=8, num_workers=0)
    assert _codes(_run(steps=_steps(0.001, 0.0015, loader))) == []


def _compute(ops: dict[str, int], times: dict[str, float], wall_s: float, steps: int = 3) -> ComputeSection:
    return ComputeSection(
        ops_per_device=ops,
        op_time_s_per_device=times,
        window_steps=steps,
        window_wall_s=wall_s,
        top_cpu_ops=[OpStat("aten.topk", "cpu", 3, times.get("cpu", 0.0), "metrics.py:7")],
    )


def test_no_gpu_compute_when_every_op_ran_on_the_cpu() -> None:
    finding = diagnose(_run(compute=_compute({"cpu": 120}, {"cpu": 0.2}, 0.3))).findings[0]
    assert finding.code == "no-gpu-compute"
    assert finding.evidence["ops_per_device"] == {"cpu": 120}


def test_cpu_compute_in_step_needs_share_and_absolute_time() -> None:
    assert _codes(_run(compute=_compute({"meta": 90, "cpu": 9}, {"meta": 0.001, "cpu": 0.03}, 0.06))) == [
        "cpu-compute-in-step"
    ]
    # a large share of a tiny step (meta) is not worth a finding
    assert _codes(_run(compute=_compute({"meta": 90, "cpu": 9}, {"meta": 0.001, "cpu": 0.0009}, 0.002))) == []


def test_a_share_of_the_step_is_never_above_all_of_it() -> None:
    """Trial 8's spatial transformer: "2293.7% of the step's time is spent in ops on the CPU" (the ops' own clocks
    added up to more than the window's host time)."""
    finding = diagnose(_run(compute=_compute({"meta": 90, "cpu": 9}, {"meta": 0.001, "cpu": 0.09}, 0.06))).findings[0]
    assert finding.code == "cpu-compute-in-step"
    assert finding.evidence["cpu_op_pct_of_step"] == 100.0 and finding.title.startswith("100.0% of the step")


def test_one_preempted_call_does_not_make_cpu_work_of_the_step() -> None:
    """Trial 9's WGAN-GP: `torch.rand(...).repeat(...)` took 0.37 ms in one run and 22.8 ms in another (one call
    preempted on a loaded host): 21.6% of the step, a warning on a healthy upstream script. Each op counts at its
    steady rate, its longest call as one of its typical ones."""
    op = OpStat("aten.repeat", "cpu", 3, 0.0228, "utils.py:9", max_s=0.022)
    assert op.steady_s() == pytest.approx(0.0012)
    compute = _compute({"meta": 90, "cpu": 3}, {"meta": 0.001, "cpu": 0.0228}, 0.06)
    compute.top_cpu_ops, compute.cpu_op_steady_s = [op], op.steady_s()
    assert _codes(_run(compute=compute)) == []
    steady = OpStat("aten.repeat", "cpu", 3, 0.0228, "utils.py:9", max_s=0.0077)  # every call slow: real CPU work
    compute.top_cpu_ops, compute.cpu_op_steady_s = [steady], steady.steady_s()
    assert _codes(_run(compute=compute)) == ["cpu-compute-in-step"]


def test_cpu_compute_fix_quotes_the_users_line() -> None:
    """A mixup done on the batch before `.to(device)` (facebookresearch/mixup-cifar10 in an MNIST loop)."""
    from gputriage.record.source import SourceSection, SourceSnippet

    compute = _compute({"meta": 90, "cpu": 9}, {"meta": 0.001, "cpu": 0.03}, 0.06)
    compute.top_cpu_ops = [OpStat("aten.mul", "cpu", 6, 0.03, "main.py:50")]
    text = "    index = torch.randperm(8)\n    mixed_x = lam * x + (1 - lam) * x[index, :]"
    snippet = SourceSnippet("main.py", 49, text, "window", None)
    finding = diagnose(_run(compute=compute, source=SourceSection([snippet]))).findings[0]
    assert finding.code == "cpu-compute-in-step" and finding.where == "main.py:50"
    assert "mixed_x = lam * x + (1 - lam) * x[index, :]" in finding.fix
    assert "t = t.to(" not in finding.fix


def test_a_read_in_one_census_step_is_not_a_sync_every_step() -> None:
    """minGPT samples text every 500 iterations (in iteration 0's callback): 513 reads in one step of three are not
    "171 syncs per step"; the per-step synchronize() that the same window holds is the finding."""
    compute = _compute({"meta": 90}, {"meta": 0.001}, 0.03)
    sample = HostSync(kind="scalar", where="chargpt.py:122", code="completion = ...", count=513, time_s=0.01, steps=1)
    compute.syncs = [sample]
    assert _codes(_run(compute=compute)) == []
    each_step = HostSync(kind="cuda-sync", where="chargpt.py:110", code="torch.cuda.synchronize()", count=3, steps=3)
    compute.syncs = [sample, each_step]
    finding = diagnose(_run(compute=compute)).findings[0]
    assert finding.code == "host-sync-in-loop" and finding.where == "chargpt.py:110"
    assert finding.evidence["syncs_per_step"] == 1.0
    assert finding.evidence["sites"][1].startswith("scalar ×513 in 1 of 3 steps at chargpt.py:122")


def test_the_users_own_read_is_named_before_one_inside_a_library() -> None:
    """language_translation: nn.Transformer checks its mask on the host twice per step (inside torch), and the loop
    reads `losses += loss.item()` once: the line and the fix go to the loop's read."""
    compute = _compute({"meta": 90}, {"meta": 0.001}, 0.03)
    inside = HostSync("scalar", "src/model.py:71", "outs = self.transformer(", 6, 0.001, "meta", "torch/nn/x.py:9", 3)
    own = HostSync("item", "main.py:144", "losses += loss.item()", 3, 0.001, "meta", None, 3)
    compute.syncs = [inside, own]
    finding = diagnose(_run(compute=compute)).findings[0]
    assert finding.where == "main.py:144"


def test_a_library_that_reads_nearly_every_value_makes_the_waits_its_own() -> None:
    """time_sequence_prediction with LBFGS: 1279 of 1303 reads a step inside `optimizer.step(closure)`, 20 from the
    closure's `print(loss.item())` (was: a warning at the print, whose fix removes 20 of 1303)."""
    compute = _compute({"meta": 90}, {"meta": 0.001}, 0.03, steps=1)
    inside = HostSync(
        "scalar", "train.py:72", "optimizer.step(closure)", 1279, 0.001, "meta", "torch/optim/lbfgs.py:358", 1
    )
    own = HostSync("item", "train.py:69", "print('loss:', loss.item())", 20, 0.001, "meta", None, 1)
    compute.syncs = [inside, own]
    finding = diagnose(_run(compute=compute)).findings[0]
    assert finding.code == "host-sync-in-loop" and finding.severity.value == "info"
    assert finding.where == "train.py:72"
    assert "torch/optim/lbfgs.py:358" in finding.title


def test_host_sync_per_step_points_at_the_line() -> None:
    compute = _compute({"meta": 90}, {"meta": 0.001}, 0.03)
    compute.syncs = [HostSync(kind="item", where="train.py:52", code="total += loss.item()", count=3, time_s=0.003)]
    finding = diagnose(_run(compute=compute)).findings[0]
    assert finding.code == "host-sync-in-loop"
    assert finding.where == "train.py:52"
    assert finding.evidence["syncs_per_step"] == 1.0


def test_every_line_of_the_users_that_reads_each_step_gets_its_fix() -> None:
    """pytorch/examples super_resolution reads the loss twice per step: `epoch_loss += loss.item()` and a print. The
    fix rewrote the accumulator and left the print, one sync per step still."""
    from gputriage.record.source import SourceSection, SourceSnippet

    compute = _compute({"meta": 90}, {"meta": 0.001}, 0.03)
    text = (
        "def train(epoch):\n"
        "    for iteration, batch in enumerate(loader, 1):\n"
        "        loss = criterion(model(batch[0]), batch[1])\n"
        "        epoch_loss += loss.item()\n"
        "        loss.backward()\n"
        "        print('Loss: {:.4f}'.format(loss.item()))"
    )
    source = SourceSection([SourceSnippet("main.py", 50, text, "function", "train")])
    compute.syncs = [
        HostSync("item", "main.py:53", "epoch_loss += loss.item()", 3, 0.001, "meta", None, 3),
        HostSync("item", "main.py:55", "print('Loss: {:.4f}'.format(loss.item()))", 3, 0.001, "meta", None, 3),
    ]
    run = _run(compute=compute)
    run.source = source
    finding = diagnose(run).findings[0]

    assert finding.code == "host-sync-in-loop" and finding.where == "main.py:53"
    assert "epoch_loss += loss.detach()" in finding.fix
    assert "if iteration % 100 == 0:\n    print('Loss: {:.4f}'.format(loss.item()))" in finding.fix
    assert [e["line"] for e in finding.evidence["edits"]] == [55]  # the print moves under the test; the += is advice


def test_launch_blocking_outranks_a_read_once_per_step() -> None:
    """The transformer tutorial with CUDA_LAUNCH_BLOCKING=1 at its top: every launch waits, which no `.item()` per step
    explains; the verdict named the `.item()` first."""
    compute = _compute({"meta": 90}, {"meta": 0.001}, 0.03)
    compute.syncs = [HostSync("item", "main.py:163", "total_loss += loss.item()", 3, 0.001, "meta", None, 3)]
    compute.launch_blocking, compute.launch_blocking_set_by = "1", "environment"
    diag = diagnose(_run(compute=compute))
    assert diag.verdict.root_cause == "launch-blocking"
    assert [f.code for f in diag.findings][:2] == ["launch-blocking", "host-sync-in-loop"]


def test_one_multi_line_print_gets_one_fix_on_the_functions_own_counter() -> None:
    """pygcn's `def train(epoch):` prints four `.item()`s in one call over six lines: the same fix came three times,
    each with a `step` counter to add, where the function takes `epoch` from its caller's loop (trial 10)."""
    from gputriage.record.source import SourceSection, SourceSnippet

    text = (
        "def train(epoch):\n"
        "    loss_train = model(x).sum()\n"
        "    print('Epoch: {:04d}'.format(epoch+1),\n"
        "          'loss_train: {:.4f}'.format(loss_train.item()),\n"
        "          'acc_train: {:.4f}'.format(acc_train.item()),\n"
        "          'loss_val: {:.4f}'.format(loss_val.item()))\n"
    )
    compute = _compute({"meta": 90}, {"meta": 0.001}, 0.03)
    compute.syncs = [
        HostSync(kind="item", where=f"train.py:{line}", code="...", count=3, steps=3) for line in (64, 65, 66)
    ]
    snippet = SourceSnippet("train.py", 61, text, "function", "train")
    finding = diagnose(_run(compute=compute, source=SourceSection([snippet]))).findings[0]
    assert finding.code == "host-sync-in-loop"
    assert finding.fix.count("print(") == 1
    assert "if epoch % 100 == 0:" in finding.fix and "step = 0" not in finding.fix


def test_the_device_comparison_is_read_back_past_another_string_test() -> None:
    """`if mode == "eval" and device == "cuda":`: the collector found `device == "cuda"` by its AST; the rule quotes
    and patches that comparison, not the string test before it on the same line."""
    from gputriage.record.source import SourceSection, SourceSnippet
    from gputriage.rules.placement import device_compared_to_string

    text = 'if mode == "eval" and device == "cuda":'
    run = _run(source=SourceSection([SourceSnippet("train.py", 12, text, "device-compare")]))
    (finding,) = device_compared_to_string(run)
    assert finding.evidence["device_variable"] == "device" and finding.where == "train.py:12"
    assert finding.fix.startswith('if mode == "eval" and device.type == "cuda":')


def test_a_reversed_device_comparison_is_read_back_and_patched() -> None:
    """`if "cuda" == device:` (the string first): the collector takes either order, so the rule reads and patches it
    too (it skipped it: no finding where the branch for cuda never ran)."""
    from gputriage.record.source import SourceSection, SourceSnippet
    from gputriage.rules.placement import device_compared_to_string

    text = "    if 'cuda' != args.device:"
    run = _run(source=SourceSection([SourceSnippet("train.py", 30, text, "device-compare")]))
    (finding,) = device_compared_to_string(run)
    assert finding.evidence["device_variable"] == "args.device" and finding.where == "train.py:30"
    assert finding.fix.startswith("if 'cuda' != args.device.type:")
    assert finding.title.startswith("`'cuda' != args.device` is always true")


def test_a_line_that_assigns_the_module_holding_the_attribute_is_not_made_a_buffer() -> None:
    """`self.conv1 = weight_norm(nn.Conv1d(...))` for the attribute `conv1.weight`: register_buffer("conv1", ...)
    raises TypeError (a module is no buffer); only the attribute's own assignment becomes one."""
    from gputriage.record.source import SourceSection, SourceSnippet
    from gputriage.rules import codefix, edits

    text = (
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.conv1 = weight_norm(nn.Conv1d(1, 4, 3))\n"
        "        self.pe = torch.zeros(4)\n"
    )
    source = SourceSection([SourceSnippet("tcn.py", 10, text, "function", "Block.__init__")])
    module_line = codefix.statement_at(source, "tcn.py:12")
    assert module_line is not None
    assert edits.register_buffer(module_line, "weight") is None
    assert codefix.register_buffer_fix(module_line, "weight") is None
    own = codefix.statement_at(source, "tcn.py:13")
    assert own is not None
    edit = edits.register_buffer(own, "pe")
    assert edit is not None and edit.new == ('        self.register_buffer("pe", torch.zeros(4))',)


def test_an_accumulator_shown_every_step_is_said_to_be_read_there() -> None:
    """kuangliu/pytorch-cifar: `train_loss += loss.item()` and a progress print of `train_loss` every batch; the advice
    "read it once where it is shown" missed that it is shown every step (a trial)."""
    from gputriage.record.source import SourceSection, SourceSnippet

    compute = _compute({"meta": 90}, {"meta": 0.001}, 0.03)
    text = (
        "def train(epoch):\n"
        "    for batch_idx, (inputs, targets) in enumerate(loader):\n"
        "        loss = criterion(model(inputs), targets)\n"
        "        loss.backward()\n"
        "        train_loss += loss.item()\n"
        "        print(batch_idx, 'Loss: %.3f' % (train_loss / (batch_idx + 1)))\n"
    )
    source = SourceSection([SourceSnippet("main.py", 70, text, "function", "train")])
    compute.syncs = [HostSync("item", "main.py:74", "train_loss += loss.item()", 3, 0.001, "meta", None, 3)]
    run = _run(compute=compute)
    run.source = source
    finding = diagnose(run).findings[0]
    assert finding.code == "host-sync-in-loop" and "train_loss += loss.detach()" in finding.fix
    assert "# it is shown every step, at line 75: print(batch_idx" in finding.fix
