"""A preflight's record, as the rules and every renderer read it: the label and scope, the host-side step time,
library-issued syncs, unused plain attributes, placeholder reads. Pure: no torch, no run."""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from gputriage.diagnosis import diagnose
from gputriage.record import Run, run_from_dict, run_to_dict
from gputriage.record.compute import ComputeSection, HostSync
from gputriage.record.placement import ModelInfo, PlacementSection, StrayPart
from gputriage.record.process import ProcessSection
from gputriage.record.stand_in import PREFLIGHT_CANNOT, PREFLIGHT_JUDGES, PREFLIGHT_LABEL, PlaceholderSite
from gputriage.record.stand_in import StandInSection as Section
from gputriage.record.steps import LoaderInfo, Step, StepsSection
from gputriage.report.document import build_document
from gputriage.report.html import render_html
from gputriage.report.markdown import render_markdown
from gputriage.report.terminal import render
from gputriage.report.timeline import build_timeline


def _stand_in(**kwargs: object) -> Section:
    base: dict[str, object] = {
        "preflight": True,
        "label": PREFLIGHT_LABEL,
        "simulated": "cuda",
        "backing": "cpu",
        "judged_rungs": [2, 3, 4, 5],
        "judges": PREFLIGHT_JUDGES,
        "cannot_judge": PREFLIGHT_CANNOT,
        "stopped_after_steps": 10,
    }
    base.update(kwargs)
    return Section(**base)  # type: ignore[arg-type]


def _step(index: int, *, wait_s: float, compute_s: float, stand_in_s: float | None) -> Step:
    """A step of `wait_s` in the DataLoader and `compute_s` of forward, of which `stand_in_s` on the stand-in."""
    return Step(index, index * 1.0, wall_s=wait_s + compute_s + 0.001, data_wait_s=wait_s, forward_s=compute_s,
                other_s=0.001, stand_in_s=stand_in_s)  # fmt: skip


def _run(**sections: object) -> Run:
    run = Run(command="run", expect_device="cuda", process=ProcessSection(exit_code=0, target="train.py"))
    run.placement = PlacementSection()
    for name, value in sections.items():
        setattr(run, name, value)
    return run


def test_every_renderer_shows_the_label_and_what_a_preflight_cannot_judge() -> None:
    diag = diagnose(_run(stand_in=_stand_in()))
    assert diag.verdict.label == PREFLIGHT_LABEL
    assert diag.verdict.scope is not None and "GPU timing" in diag.verdict.scope and "10 steps" in diag.verdict.scope
    console = Console(file=io.StringIO(), width=200, color_system=None)
    render(diag, console)
    texts = {
        "terminal": console.file.getvalue(),  # type: ignore[attr-defined]
        "markdown": render_markdown(diag),
        "html": render_html(diag),
        "json": json.dumps(build_document(diag)),
        "timeline": json.dumps(build_timeline(diag)),
    }
    for name, text in texts.items():
        assert PREFLIGHT_LABEL in text, name
    assert build_document(diag)["verdict"]["label"] == PREFLIGHT_LABEL


def test_a_real_device_run_has_no_label() -> None:
    verdict = diagnose(_run()).verdict
    assert verdict.label is None and verdict.scope is None


def test_the_record_round_trips_with_its_stand_in_section() -> None:
    run = _run(stand_in=_stand_in(placeholder_reads=[PlaceholderSite("scalar", "train.py:9", "x.item()", 3)]))
    again = run_from_dict(json.loads(json.dumps(run_to_dict(run))))
    assert again.stand_in == run.stand_in
    assert again.self_check() == []


def test_data_wait_is_judged_against_the_hosts_time_not_the_stand_ins_compute() -> None:
    # 5 ms of tokenising per step; 200 ms of forward, of which 195 ms the stand-in computed for the GPU
    steps = [_step(i, wait_s=0.005, compute_s=0.2, stand_in_s=0.195) for i in range(8)]
    run = _run(stand_in=_stand_in(), steps=StepsSection(steps=steps, loader=LoaderInfo(num_workers=0)))
    finding = next(f for f in diagnose(run).findings if f.code == "input-pipeline-bound")
    assert finding.evidence["data_wait_pct_of_step"] > 40
    # the same steps measured on a real device: the forward is the GPU's own time, and the wait is small
    real = _run(steps=StepsSection(steps=[_step(i, wait_s=0.005, compute_s=0.2, stand_in_s=None) for i in range(8)]))
    assert "input-pipeline-bound" not in [f.code for f in diagnose(real).findings]


def test_a_preflights_small_wait_is_a_borderline_note_where_a_gpu_runs_is_a_warning() -> None:
    """A preflight's wait is this machine's, less the stand-in mode's measured cost in it; the mode costs up to twice
    that inside a job, so the GPU host's 2 ms floor is applied to the wait less that cost once more. Under it the
    finding is a note; over it, a warning or critical as on a GPU (60% here)."""
    cases = (
        (0.003, 0.0, "critical"),  # 3 ms of the loading's own work (a tokenizer): judged as on a GPU
        (0.003, 0.0012, "info"),  # 1.2 ms of it the mode's, measured: possibly 2.4 ms, leaving 0.6 ms of own work
    )
    for wait_s, mode_in_wait_s, preflight_severity in cases:
        raw_wait_s = wait_s + mode_in_wait_s
        steps = [_step(i, wait_s=raw_wait_s, compute_s=0.2, stand_in_s=0.198 + mode_in_wait_s) for i in range(12)]
        for step in steps:
            step.stand_in_phases_s = {"data_wait": mode_in_wait_s, "forward": 0.198}
        run = _run(stand_in=_stand_in(), steps=StepsSection(steps=steps, loader=LoaderInfo(num_workers=0)))
        finding = next(f for f in diagnose(run).findings if f.code == "input-pipeline-bound")
        assert finding.severity.value == preflight_severity, (wait_s, mode_in_wait_s)
        assert finding.evidence["data_wait_s_per_step"] == pytest.approx(wait_s)
        assert finding.evidence["preflight_wait_floor_s_per_step"] == 0.002
        assert finding.evidence["preflight_stand_in_wait_s_per_step"] == pytest.approx(mode_in_wait_s)
        assert finding.title.startswith("Borderline") == (preflight_severity == "info")
        assert ("a preflight names it from 2.0 ms a step" in finding.title) == (preflight_severity == "info")
        # the same host time on a real device (a 2 ms compute): judged on the GPU host's floor, a warning
        real_steps = [_step(i, wait_s=wait_s, compute_s=0.002, stand_in_s=None) for i in range(12)]
        real = _run(steps=StepsSection(steps=real_steps, loader=LoaderInfo(num_workers=0)))
        finding = next(f for f in diagnose(real).findings if f.code == "input-pipeline-bound")
        assert finding.severity.value != "info" and "preflight_wait_floor_s_per_step" not in finding.evidence


def test_a_preflight_does_not_judge_loader_workers_that_share_cores_with_the_stand_in() -> None:
    steps = [_step(i, wait_s=0.005, compute_s=0.2, stand_in_s=0.195) for i in range(8)]
    run = _run(stand_in=_stand_in(), steps=StepsSection(steps=steps, loader=LoaderInfo(num_workers=2)))
    assert "input-pipeline-bound" not in [f.code for f in diagnose(run).findings]


def test_a_sync_inside_library_code_is_a_note_at_the_users_calling_line_naming_the_librarys() -> None:
    compute = ComputeSection(ops_per_device={"cuda": 900}, window_steps=3, window_wall_s=0.3)
    library = "site-packages/transformers/masking_utils.py:354"
    compute.syncs = [HostSync("scalar", "train.py:94", "outputs = model(**batch)", 3, 0.0001, "cuda", library)]
    finding = next(f for f in diagnose(_run(compute=compute)).findings if f.code == "host-sync-in-loop")
    assert finding.severity.value == "info" and finding.where == "train.py:94" and library in finding.title
    compute.syncs[0].library_where = None  # the user's own `.item()`: a warning at the user's line
    finding = next(f for f in diagnose(_run(compute=compute)).findings if f.code == "host-sync-in-loop")
    assert finding.severity.value == "warning" and finding.where == "train.py:94"


def test_on_a_stand_in_a_rare_sync_is_judged_by_its_count_not_its_time() -> None:
    """A loss.item() every 100 batches met once in 3 census steps: on a stand-in its 4.4 ms are the host's own first
    call (no device to wait for), so the time share says nothing of a GPU run; on a real device it would."""
    compute = ComputeSection(ops_per_device={"cuda": 900}, window_steps=3, window_wall_s=0.077)
    compute.syncs = [HostSync("item", "train.py:157", "loss, current = loss.item(), batch * len(X)", 1, 0.0044)]
    preflight = _run(stand_in=_stand_in(), compute=compute)
    assert "host-sync-in-loop" not in [f.code for f in diagnose(preflight).findings]
    on_gpu = _run(compute=compute)
    on_gpu.stand_in = None
    finding = next(f for f in diagnose(on_gpu).findings if f.code == "host-sync-in-loop")
    assert finding.evidence["sync_pct_of_step"] == 5.7


def test_plain_attributes_the_completed_steps_never_mixed_in_are_a_note() -> None:
    model = ModelInfo(name="GAN", parameter_count=100, devices={"cuda:0": 100, "cpu": 8})
    model.stray = [StrayPart("validation_z", "attribute", "cpu", 8, "gan.py:40")]
    steps = StepsSection(steps=[_step(0, wait_s=0.0, compute_s=0.01, stand_in_s=0.0)], steps_total=10)
    run = _run(steps=steps)
    assert run.placement is not None
    run.placement.models = [model]
    finding = next(f for f in diagnose(run).findings if f.code == "model-partly-on-cpu")
    assert finding.severity.value == "info"
    run.process = ProcessSection(exit_code=1, exception_type="RuntimeError",
                                 exception_message="Expected all tensors to be on the same device")  # fmt: skip
    finding = next(f for f in diagnose(run).findings if f.code == "model-partly-on-cpu")
    assert finding.severity.value == "critical"  # it crashed, and no batch finding explains it: the attribute does


def test_placeholder_reads_are_a_note_with_their_lines() -> None:
    sites = [PlaceholderSite("scalar", "train.py:88", "if loss.item() < best:", 5)]
    run = _run(stand_in=Section(preflight=False, backing="meta", placeholder_reads=sites))
    finding = next(f for f in diagnose(run).findings if f.code == "placeholder-values")
    assert finding.severity.value == "info" and finding.where == "train.py:88"
    assert "if loss.item() < best:" in finding.evidence["sites"][0]  # type: ignore[index]
    assert diagnose(run).verdict.label is None  # the meta stand-in is not a preflight


def test_on_a_stand_in_a_syncs_time_is_not_shown_as_a_share_of_the_step() -> None:
    """A read on the stand-in waits for no device: "sync_pct_of_step 0.4" under a preflight measured the host's own
    call, not what a GPU run waits, and read as "negligible" (a new user's trial: vae, makemore, gcn)."""
    compute = ComputeSection(ops_per_device={"cuda": 900}, window_steps=3, window_wall_s=0.077)
    compute.syncs = [HostSync("item", "train.py:157", "total += loss.item()", 3, 0.0003, steps=3)]
    finding = next(f for f in diagnose(_run(stand_in=_stand_in(), compute=compute)).findings)
    assert finding.code == "host-sync-in-loop" and finding.evidence["syncs_per_step"] == 1.0
    assert "sync_pct_of_step" not in finding.evidence and "sync_time_per_step_s" not in finding.evidence
