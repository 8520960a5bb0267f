"""report.html from saved Run records: content, escaping, size, determinism (the browser test opens it for real)."""

from __future__ import annotations

import json
import re
from html import escape

import pytest
from report_records import (
    CREATED_AT_S,
    INJECTION,
    crashed_run,
    diagnosis_with,
    distributed_run,
    healthy_run,
    injected_finding,
    injected_run,
    make_samples,
    make_steps,
    no_gpu_run,
    starvation_finding,
    starved_run,
    trace_only_run,
)

from gputriage.record import Run
from gputriage.record.gpu import GpuSample, GpuSection, GpuSummary, GpuTrack
from gputriage.record.steps import StepsSection
from gputriage.report.html import render_html, script_json

_DATA_SCRIPT = re.compile(r'<script type="application/json" id="gputriage-data">(.*?)</script>', re.S)


def embedded_data(page: str) -> dict[str, object]:
    match = _DATA_SCRIPT.search(page)
    assert match is not None, "the chart data script is missing"
    data: dict[str, object] = json.loads(match.group(1))
    return data


def section(page: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}">(.*?)</section>', page, re.S)
    assert match is not None, f"section {section_id} is missing"
    return match.group(1)


def test_starved_run_shows_verdict_ladder_finding_and_measured_diagrams() -> None:
    page = render_html(diagnosis_with(starved_run(), [starvation_finding()]))

    assert "The step waits for the DataLoader 60% of the time" in page.split("</header>")[0]
    ladder = section(page, "ladder")
    assert ladder.count("<tr class=") == 5
    assert '<tr class="rung-fail"><td class="num">5</td>' in ladder
    findings = section(page, "findings")
    assert "where: <code>train.py:31</code>" in findings
    assert "num_workers=8, pin_memory=True" in findings
    assert "<th>data_wait_pct</th><td>60.3</td>" in findings

    diagrams = section(page, "diagrams")
    for measured in (
        "dataset: ImageFolder",
        "batch_size: 64",
        "architecture: ResNet",
        "parameters: 11.7 M",
        "device: cuda:0",
        "usage: 31% mean (NVML, 60 readings)",
        "memory: 9.0 GiB peak of 80.0 GiB",
    ):
        assert measured in diagrams, measured
    # The arrow where the time goes is the DataLoader wait, and it carries the measured per-step time.
    hot = re.findall(r"<g class='message hot' data-action='([^']+)'>(.*?)</g>", diagrams)
    assert [action for action, _ in hot] == ["load data"]
    assert "1. load data: 60.0 ms (60.0%)" in hot[0][1]
    assert "5. backpropagate: 24.0 ms (24.0%)" in diagrams


def test_chart_data_holds_the_step_phases_and_nvml_series_on_one_time_axis() -> None:
    page = render_html(diagnosis_with(starved_run(step_count=40, sample_count=60), []))
    data = embedded_data(page)
    steps = data["steps"]
    assert isinstance(steps, dict)
    assert len(steps["t_s"]) == 40
    assert steps["phase_ms"]["data_wait"][0] == pytest.approx(60.0)
    assert steps["phase_ms"]["compute"][0] == pytest.approx(34.0)  # forward 10 + backward 20 + optimizer 4
    gpus = data["gpus"]
    assert isinstance(gpus, list) and len(gpus) == 1
    assert gpus[0]["util_pct"][0] == pytest.approx(31.0)
    assert gpus[0]["memory_gib"][0] == pytest.approx(9.0)
    x_min, x_max = data["x_range_s"]
    assert x_min == 0.0 and x_max == pytest.approx(5.9)  # the last NVML sample outlives the last step (5.0 s)
    assert section(page, "steps").count("<tr><td") == 40
    assert "The probes timed" not in page  # every step of the job was timed


def test_a_run_whose_probes_timed_only_some_steps_says_how_many() -> None:
    run = starved_run(step_count=20)
    assert run.steps is not None
    run.steps.steps_total = 5000
    assert "The probes timed 20 of the job's 5000 steps." in section(render_html(diagnosis_with(run, [])), "steps")


def test_the_gpu_box_prefers_the_samplers_whole_window_summary_over_the_kept_samples() -> None:
    run = starved_run()
    assert run.gpu is not None
    track = run.gpu.devices[0]
    track.summary = GpuSummary(util_sample_count=6000, util_mean_pct=47.0, memory_used_max_bytes=12 * 2**30)
    diagrams = section(render_html(diagnosis_with(run, [])), "diagrams")
    assert "usage: 47% mean (NVML, 6000 readings)" in diagrams
    assert "memory: 12.0 GiB peak of 80.0 GiB" in diagrams


def test_the_gpu_boxs_reading_count_is_the_count_its_mean_rests_on() -> None:
    """A kept sample with no finite reading (a NaN in a hand-edited report.json) is left out of the mean, so it is
    left out of the count that the mean is said to rest on."""
    run = starved_run()
    assert run.gpu is not None
    track = run.gpu.devices[0]
    track.summary = GpuSummary()
    track.samples = [GpuSample(t_s=0.0, gpu_util_pct=50.0), GpuSample(t_s=1.0, gpu_util_pct=float("nan")),
                     GpuSample(t_s=2.0), GpuSample(t_s=3.0, gpu_util_pct=30.0)]  # fmt: skip
    assert "usage: 40% mean (NVML, 2 readings)" in section(render_html(diagnosis_with(run, [])), "diagrams")


def test_a_lost_gpu_says_so_in_the_gpu_box() -> None:
    run = starved_run()
    assert run.gpu is not None
    run.gpu.devices[0].lost = True
    assert "device: GPU 0: NVIDIA A100-SXM4-80GB (lost)" in section(render_html(diagnosis_with(run, [])), "diagrams")


def test_healthy_run_highlights_the_computation_not_the_loader() -> None:
    page = render_html(diagnosis_with(healthy_run(), []))
    assert re.findall(r"<g class='message hot' data-action='([^']+)'>", page) == ["backpropagate"]
    assert "HEALTHY" in page.split("</header>")[0]


def test_no_gpu_data_says_not_measured_instead_of_a_number() -> None:
    page = render_html(diagnosis_with(no_gpu_run(), []))
    diagrams = section(page, "diagrams")
    assert "usage: not measured" in diagrams
    assert "memory: not measured" in diagrams
    assert "device: meta" in diagrams
    assert "GPU utilisation and memory (NVML): not measured (NVML Shared Library Not Found)" in page
    assert embedded_data(page)["gpus"] == []
    assert ">None<" not in page and ": None" not in page


def test_crashed_run_shows_the_exception_and_no_step_numbers() -> None:
    page = render_html(diagnosis_with(crashed_run(), []))
    facts = section(page, "run-facts")
    assert "exit code 1" in facts
    assert "<code>RuntimeError</code>" in facts
    assert "cuda:0 and cpu!" in facts
    assert "at <code>train.py:57</code>" in facts
    assert "in <code>Net.head (Linear)</code>" in facts
    assert "Step timing and GPU samples: not measured." in page
    assert "device: cuda:0 94%, cpu 6%" in section(page, "diagrams")
    assert "step time not measured (no step timing was measured)" in page
    assert '<section id="steps">' not in page


def test_distributed_run_has_a_rank_table_and_one_gpu_series_per_device() -> None:
    page = render_html(diagnosis_with(distributed_run(world_size=4), []))
    ranks = section(page, "ranks")
    assert ranks.count("<tr><td") == 4
    assert "80.0 ms" in ranks  # rank 2's mean data wait
    assert [g["label"] for g in embedded_data(page)["gpus"]] == ["GPU 0", "GPU 1", "GPU 2", "GPU 3"]
    assert "(rank 0)" in section(page, "timeline")
    diagrams = section(page, "diagrams")
    assert "mean per step over steps 1-19 (19 steps; warm-up step 0 left out), rank 0" in diagrams
    assert "architecture: ResNet in DistributedDataParallel" in diagrams
    assert "world size: 4" in diagrams
    assert "device: GPU 0: NVIDIA H100 80GB HBM3 (+3 more)" in diagrams


def test_a_rank_that_left_no_record_is_named() -> None:
    page = render_html(diagnosis_with(distributed_run(world_size=4, killed=(3,)), []))
    ranks = section(page, "ranks")
    assert ranks.count("<tr><td") == 3
    assert "<td>node-a</td><td>cuda:1</td>" in ranks
    assert "Rank 3 of 4 left no record" in ranks


def test_trace_only_run_uses_the_trace_numbers_and_says_how_to_open_the_trace() -> None:
    page = render_html(diagnosis_with(trace_only_run(), []))
    trace = section(page, "trace")
    for value in ("NVIDIA A100-SXM4-40GB", "38%", "70%", "102.4 ms", "62%"):
        assert value in trace, value
    diagrams = section(page, "diagrams")
    assert "usage: 38% mean (profiler trace, busy time)" in diagrams
    assert "1. load data: 63.5 ms (62.0%)" in diagrams
    assert "2. send data: not measured" in diagrams
    # 62% is known to be the largest share even with the other arrows unknown.
    assert re.findall(r"<g class='message hot' data-action='([^']+)'>", diagrams) == ["load data"]
    assert "traces/rank0.pt.trace.json" in section(page, "timeline")
    assert "ui.perfetto.dev" in section(page, "timeline")


def test_trace_step_partition_fills_every_arrow_it_can() -> None:
    diagrams = section(render_html(diagnosis_with(trace_only_run(partition=True), [])), "diagrams")
    assert "2. send data: 3.1 ms (3.0%)" in diagrams
    assert "3. perform computation: 30.7 ms (30.0%)" in diagrams
    assert "GPU kernels, forward and backward together" in diagrams
    assert "4. return results: 410 µs (0.4%)" in diagrams
    assert "5. backpropagate: not measured" in diagrams


def test_a_small_known_share_is_not_called_where_the_time_goes() -> None:
    run = trace_only_run()
    assert run.trace is not None
    run.trace.ranks[0].dataloader_pct_of_step = 20.0
    page = render_html(diagnosis_with(run, []))
    assert "1. load data: 20.5 ms (20.0%)" in page
    assert "message hot" not in page


def test_everything_from_the_run_is_escaped() -> None:
    page = render_html(diagnosis_with(injected_run(), [injected_finding()]))
    assert INJECTION not in page
    assert "<img" not in page
    assert page.count("</script>") == 4  # the error catcher, the data, uPlot, the charts: no more
    assert escape(INJECTION, quote=False) in page
    # The data script holds no markup-significant character; the JSON still decodes to the same values.
    raw = _DATA_SCRIPT.search(page)
    assert raw is not None and "<" not in raw.group(1) and ">" not in raw.group(1)


def test_script_json_escapes_the_characters_that_can_break_a_script_element() -> None:
    value = {"name": INJECTION, "sep": "a\u2028b\u2029c", "amp": "x & y <!-- z"}
    text = str(script_json(value))
    for bad in ("<", ">", "&", "\u2028", "\u2029"):
        assert bad not in text
    assert json.loads(text) == value


def test_a_10000_step_run_stays_under_one_megabyte() -> None:
    run = starved_run()
    run.steps = StepsSection(steps=make_steps(10_000, 0.030), steps_observed=10_000)
    duration_s = sum(s.wall_s for s in run.steps.steps) + 1
    samples = make_samples(int(duration_s * 10), 0.1, 55.0, 12 * 2**30)
    run.gpu = GpuSection(available=True, devices=[GpuTrack(index=i, samples=samples) for i in range(2)])

    page = render_html(diagnosis_with(run, [starvation_finding()]))

    assert len(page.encode("utf-8")) < 1_000_000
    data = embedded_data(page)
    assert len(data["steps"]["t_s"]) == 1000  # type: ignore[index]
    assert data["steps"]["count"][0] == 10  # type: ignore[index]
    assert "10000 steps, shown as 100 rows" in page
    assert "0–99" in section(page, "steps")


def test_rendering_is_deterministic() -> None:
    diag = diagnosis_with(distributed_run(), [starvation_finding()])
    assert render_html(diag) == render_html(diag)


def test_an_empty_record_renders_with_an_unknown_verdict() -> None:
    page = render_html(diagnosis_with(Run(command="report", created_at_s=CREATED_AT_S), []))
    assert "UNKNOWN" in page.split("</header>")[0]
    assert "Step timing and GPU samples: not measured." in page


def test_control_characters_from_the_run_are_made_visible_in_the_page() -> None:
    """A file name with an ESC sequence (`train\\x1b[1mX.py`): HTML-escaping leaves the ESC as it is, and `cat
    report.html` would run it. The page shows it as report.md and the terminal do."""
    run = starved_run()
    run.argv = ["train\x1b[1mX.py"]
    page = render_html(diagnosis_with(run, [starvation_finding(where="train\x1b[1mX.py:31")]))
    assert "\x1b" not in page
    assert "train\\x1b[1mX.py:31" in page
