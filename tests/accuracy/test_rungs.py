"""Honest rungs: a rung passes only on evidence that was gathered; otherwise "not measured", with the reason."""

from __future__ import annotations

import io

from records import cpu_only_machine, crash, gpu_machine, meta_run, model_on, placement, steps

from contract import ladder_problems
from gputriage.diagnosis import diagnose
from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.compute import ComputeSection
from gputriage.record.coverage import RUNG_TOPICS, rung_coverage
from gputriage.record.placement import PlacementSection, TensorSeen
from gputriage.report.document import build_document


def _ladder(run: Run) -> dict[int, tuple[str, str | None]]:
    return {r.rung: (r.status, r.reason) for r in diagnose(run).ladder}


def test_a_crash_before_any_model_passes_nothing() -> None:
    run = meta_run(process=crash(), placement=PlacementSection())
    ladder = _ladder(run)
    assert ladder[3][0] == "skipped"
    crashed = "before the script crashed at step 0 (RuntimeError at train.py:237)"
    assert ladder[3] == ("skipped", f"no model ran a forward {crashed}")
    assert ladder[5] == ("skipped", f"no step completed {crashed}")
    assert ladder[4][0] == "skipped"
    verdict = diagnose(run).verdict
    assert verdict.status == "unknown"
    assert "no batch was seen entering a model or a loss" in verdict.summary


def test_what_a_preflight_never_looks_at_is_not_blamed_on_the_crash() -> None:
    from gputriage.record.stand_in import PREFLIGHT_LABEL, StandInSection

    run = meta_run(process=crash(), placement=PlacementSection())
    run.stand_in = StandInSection(preflight=True, label=PREFLIGHT_LABEL, simulated="cuda", backing="cpu")
    ladder = _ladder(run)
    assert ladder[1] == ("skipped", "a preflight does not look at the GPU machine (run `gputriage env` there)")
    assert ladder[3] == ("skipped", "no model ran a forward before the script crashed at step 0 (RuntimeError at "
                                    "train.py:237)")  # fmt: skip


def test_a_preflight_with_loader_workers_does_not_pass_rung_5() -> None:
    """The loader's wait is the one rung-5 question a preflight answers, and not for a loader with workers."""
    from gputriage.record.stand_in import PREFLIGHT_LABEL, StandInSection

    run = meta_run(placement=placement(model_on("meta")), steps=steps([0.001] * 10))
    run.stand_in = StandInSection(preflight=True, label=PREFLIGHT_LABEL, simulated="cuda", backing="cpu")
    status, reason = _ladder(run)[5]
    assert status == "skipped" and reason is not None
    assert reason.startswith("a preflight does not judge a DataLoader with workers")
    assert run.steps is not None and run.steps.loader is not None
    run.steps.loader.num_workers = 0
    assert _ladder(run)[5] == ("pass", None)


def test_rung_5_is_not_measured_on_the_warm_up_step_alone() -> None:
    tensor = TensorSeen(role="input", device="meta", shape=[8, 16], target="Net", argument="args[0]")
    run = meta_run(placement=placement(model_on("meta"), tensor), steps=steps([0.5]))
    ladder = _ladder(run)
    assert ladder[5] == ("skipped", "only the warm-up step completed")
    assert not [f for f in diagnose(run).findings if f.code == "input-pipeline-bound"]  # 0.5 s of 0.55 s: ignored


def test_rung_1_on_a_meta_run_without_a_gpu_is_not_judged_and_its_findings_are_notes() -> None:
    run = meta_run(placement=placement(model_on("meta")))
    status, reason = _ladder(run)[1]
    assert status == "skipped"
    assert reason is not None and reason.startswith("not judged: the run is meant for meta (--expect-device)")


def test_rung_1_passes_where_torch_reaches_the_gpu() -> None:
    run = meta_run(placement=placement(model_on("meta")))
    run.environment = gpu_machine()
    assert _ladder(run)[1] == ("pass", None)


def test_info_findings_are_notes_and_do_not_make_a_rung_pass() -> None:
    from gputriage.diagnosis.ladder import build_ladder

    run = meta_run(process=crash(), placement=PlacementSection())
    note = Finding("cpu-compute-in-step", 4, Severity.INFO, "Borderline: ...")
    view = next(v for v in build_ladder(run, [note]) if v.rung == 4)
    assert view.status == "skipped"
    assert view.note_codes == ["cpu-compute-in-step"] and view.decisive_codes == []


def test_a_cpu_run_does_not_pass_the_accelerator_rungs() -> None:
    run = meta_run(placement=placement(model_on("cpu")), steps=steps([0.001] * 10))
    run.expect_device = "cpu"
    coverage = rung_coverage(run)
    for rung in (2, 3, 4):
        assert not coverage[rung].measured
        assert coverage[rung].reason is not None and coverage[rung].reason.startswith("not judged: no accelerator")
    assert coverage[5].measured


def test_healthy_names_what_was_measured_and_why_the_rest_was_not() -> None:
    tensor = TensorSeen(role="input", device="meta", shape=[8, 16], target="Net", argument="args[0]")
    run = meta_run(
        placement=placement(model_on("meta"), tensor),
        compute=ComputeSection(ops_per_device={"meta": 100}, window_steps=3, window_wall_s=0.1),
        steps=steps([0.001] * 10),
    )
    verdict = diagnose(run).verdict
    assert verdict.status == "healthy"
    for rung in (2, 3, 4, 5):
        assert RUNG_TOPICS[rung] in verdict.summary
    assert "Not measured: rung 1, not judged" in verdict.summary


def test_the_json_ladder_carries_the_reason() -> None:
    run = meta_run(process=crash(), placement=PlacementSection())
    ladder = build_document(diagnose(run))["ladder"]
    assert [entry["status"] for entry in ladder] == ["skipped"] * 5
    assert ladder_problems(ladder) == []
    measured = meta_run(placement=placement(model_on("meta")))
    measured.environment = gpu_machine()
    ladder = build_document(diagnose(measured))["ladder"]
    assert ladder[0]["reason"] is None
    assert ladder_problems(ladder) == []


def test_the_terminal_says_not_measured_and_why() -> None:
    from rich.console import Console

    from gputriage.report.terminal import render

    out = io.StringIO()
    render(diagnose(meta_run(process=crash(), placement=PlacementSection())), Console(file=out, width=300))
    text = out.getvalue()
    assert "- not measured" in text and "skipped" not in text
    assert "no model ran a forward before the script crashed at step 0" in text


def test_an_environment_only_record_keeps_rung_1() -> None:
    run = Run(command="env", environment=cpu_only_machine())
    assert rung_coverage(run)[1].measured
    assert not rung_coverage(run)[3].measured


def test_rung_5_on_a_gpu_job_does_not_pass_on_the_steps_waits_alone() -> None:
    """ "How busy is the GPU" needs a reading of the GPU: a job meant for cuda that never reached one (no NVML, no
    trace) measured what its steps wait for, not how busy its GPU was. With a GPU's readings the rung passes."""
    from gputriage.record.gpu import GpuSample, GpuSection, GpuTrack

    run = meta_run(environment=cpu_only_machine(), placement=placement(model_on("cuda:0")), steps=steps([0.001] * 10))
    run.expect_device = "cuda"
    run.gpu = GpuSection(available=False, unavailable_reason="NVML Shared Library Not Found")
    status, reason = _ladder(run)[5]
    assert status == "skipped"
    assert reason == (
        "how busy the cuda device is was not measured: NVML gave no utilisation reading (NVML Shared Library Not "
        "Found); what the step waits for was, with no finding"
    )
    run.environment, run.gpu = gpu_machine(), None
    assert _ladder(run)[5][1] == (
        "how busy the cuda device is was not measured: the GPU was not sampled; what the step waits for was, with no "
        "finding"
    )
    samples = [GpuSample(t_s=0.1 * i, gpu_util_pct=90.0) for i in range(20)]
    run.gpu = GpuSection(available=True, devices=[GpuTrack(index=0, name="NVIDIA A100", cuda_index=0, samples=samples)])
    assert _ladder(run)[5] == ("pass", None)
    run.steps = steps([0.02] * 10, compute_s=0.01)  # the wait still decides where it is a finding
    assert _ladder(run)[5][0] in ("warn", "fail")
    run.gpu = None
    assert _ladder(run)[5][0] in ("warn", "fail")


def test_no_gpu_compute_points_at_the_models_forward_call_not_at_the_op_that_took_longest() -> None:
    """Which op took the most time (a matmul in forward, the loss, backward) changes from run to run: the same job was
    pointed at three lines. The model's forward call in the loop is the one line that issues the step's compute."""
    from gputriage.record.compute import OpStat

    model = model_on("cpu", where="train.py:28")
    model.called_where = "train.py:32"
    for slowest in ("train.py:22", "train.py:34"):
        compute = ComputeSection(
            ops_per_device={"cpu": 108},
            window_steps=3,
            window_wall_s=0.03,
            top_cpu_ops=[OpStat("aten.addmm", "cpu", 9, 0.002, slowest), OpStat("aten.mm", "cpu", 6, 0.001)],
        )
        run = meta_run(placement=placement(model), compute=compute, steps=steps([0.001] * 10))
        run.expect_device = "cuda"
        (finding,) = [f for f in diagnose(run).findings if f.code == "no-gpu-compute"]
        assert finding.where == "train.py:32"
    run.placement = PlacementSection()
    (finding,) = [f for f in diagnose(run).findings if f.code == "no-gpu-compute"]
    assert finding.where == "train.py:34"  # no model seen: the op is all there is
