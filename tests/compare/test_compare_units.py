"""The comparison on hand-built runs (no torch), and `gputriage compare` on hostile input."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

import pytest

from corpus_path import CORPUS
from gputriage.cli import main
from gputriage.compare import compare
from gputriage.compare.stats import BETTER, NOISE, UNMEASURED, WORSE, judge
from gputriage.diagnosis import Diagnosis, diagnose
from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.record.gpu import GpuSample, GpuSection, GpuTrack
from gputriage.record.steps import LoaderInfo, Step, StepsSection
from gputriage.report.compare import compare_document, render_html
from gputriage.report.document import build_document, encode_document


def _steps(step_s: float, n: int = 20, jitter: float = 0.02, seed: int = 1) -> list[Step]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for i in range(n):
        wall = step_s * (1 + rng.uniform(-jitter, jitter))
        data = wall * 0.4
        out.append(Step(i, t, wall, data_wait_s=data, forward_s=wall - data))
        t += wall
    return out


def _run(step_s: float, *, seed: int = 1, util: float | None = None, batch: int | None = 32) -> Run:
    run = Run(command="run")
    run.steps = StepsSection(steps=_steps(step_s, seed=seed), loader=LoaderInfo(batch_size=batch))
    if util is not None:
        samples = [GpuSample(t_s=i * 0.1, gpu_util_pct=util + (i % 3)) for i in range(30)]
        run.gpu = GpuSection(available=True, devices=[GpuTrack(index=0, cuda_index=0, samples=samples)])
    return run


def _diag(run: Run, findings: list[Finding] | None = None) -> Diagnosis:
    diag = diagnose(run)
    if findings is not None:
        diag.findings = findings
    return diag


def test_the_noise_test() -> None:
    assert judge([1.0] * 10, [0.5] * 10, 0.1, higher_is_better=False, what="t").direction == BETTER
    assert judge([1.0] * 10, [1.5] * 10, 0.1, higher_is_better=False, what="t").direction == WORSE
    assert judge([1.0, 1.2] * 5, [1.2, 1.0] * 5, 0.0, higher_is_better=False, what="t").direction == NOISE
    assert judge([1.0] * 10, [1.05] * 10, 0.1, higher_is_better=False, what="t").direction == NOISE  # under floor
    assert judge([1.0] * 3, [0.1] * 3, 0.1, higher_is_better=False, what="t").direction == NOISE  # too few
    assert judge([], [1.0] * 10, 0.1, higher_is_better=False, what="t").direction == UNMEASURED


def test_a_few_stalled_steps_are_no_regression_and_a_slower_typical_step_is() -> None:
    """A trial: two runs of one unchanged script on a loaded machine, medians 1.04 and 1.11 ms, and a mean carried by
    a handful of descheduled steps of 170-200 ms: "regressed 0.18x" (and `--fail-on regression` exited 1)."""
    rng = random.Random(7)
    before = [0.00104 + rng.uniform(-1e-4, 1e-4) for _ in range(79)]
    after = [0.00111 + rng.uniform(-1e-4, 1e-4) for _ in range(79)]
    after[70:75] = [0.17, 0.2, 0.18, 0.19, 0.02]
    stalled = judge(before, after, 0.1 * 0.00104, higher_is_better=False, what="step time")
    assert (
        stalled.direction == NOISE and "the median did not" in stalled.reason and "5 slow steps of 79" in stalled.reason
    )
    slower = [v * 1.5 for v in before]
    assert judge(before, slower, 0.1 * 0.00104, higher_is_better=False, what="step time").direction == WORSE


def test_fixed_with_gpu_busy_step_time_and_throughput() -> None:
    cause = Finding("input-pipeline-bound", 5, Severity.WARNING, "waits", where="train.py:10")
    result = compare(
        _diag(_run(0.154, util=31.0), [cause]), _diag(_run(0.097, seed=2, util=88.0), []), "before", "after"
    )
    assert result.status == "fixed"
    assert result.summary.startswith("fixed: GPU busy 32% -> 89%, step 154.1 -> 97.2 ms")
    assert "(1.59x), input-pipeline-bound resolved" in result.summary
    assert [r.code for r in result.findings.resolved] == ["input-pipeline-bound"]
    assert result.throughput is not None and result.throughput.judgement.direction == BETTER
    data = next(p for p in result.parts if p.key == "data_wait")
    assert data.judgement.direction == BETTER
    assert not result.regressed_timing()


def test_faster_with_the_same_causes_says_they_are_still_there() -> None:
    """A trial: "fixed: step 24 -> 8.03 ms (3.00x)" for a run still IDLE with both critical findings."""
    causes = [Finding("no-gpu-compute", 4, Severity.CRITICAL, "cpu", where="t.py:3")]
    result = compare(_diag(_run(0.024), causes), _diag(_run(0.008, seed=2), list(causes)), "before", "after")
    assert result.status == "fixed"
    assert result.summary.endswith("; still there: no-gpu-compute (critical)")


def test_no_change_and_regressed() -> None:
    same = compare(_diag(_run(0.1)), _diag(_run(0.1, seed=2)), "a", "b")
    assert same.status == "no change"
    assert "within the noise" in same.summary
    slower = compare(_diag(_run(0.1)), _diag(_run(0.2, seed=2)), "a", "b")
    assert slower.status == "regressed"
    assert slower.regressed_timing()
    assert slower.summary.startswith("regressed: step 100.0 -> 200.4 ms (0.50x)")


def test_a_new_cause_alone_is_a_regression() -> None:
    new = Finding("host-sync-in-loop", 4, Severity.WARNING, "syncs", where="train.py:30")
    result = compare(_diag(_run(0.1), []), _diag(_run(0.1, seed=2), [new]), "a", "b")
    assert result.status == "regressed"
    assert [r.code for r in result.findings.new] == ["host-sync-in-loop"]
    assert not result.regressed_timing()  # --fail-on regression guards the timing only


def test_a_critical_resolved_outranks_the_warnings_that_came_with_the_fix() -> None:
    """A job that ran no op on the GPU now does, and is launch-bound there: better, not "regressed"."""
    gone = Finding("no-gpu-compute", 4, Severity.CRITICAL, "no GPU op")
    new = Finding("launch-bound", 4, Severity.WARNING, "launch-bound")
    result = compare(_diag(_run(0.1), [gone]), _diag(_run(0.1, seed=2), [new]), "a", "b")
    assert result.status == "fixed"
    assert result.summary.startswith("fixed: no-gpu-compute resolved") and "new: launch-bound" in result.summary
    worse = Finding("host-sync-in-loop", 4, Severity.CRITICAL, "syncs")
    assert compare(_diag(_run(0.1), [gone]), _diag(_run(0.1, seed=2), [worse]), "a", "b").status == "regressed"


def test_traces_of_different_gpus_and_world_sizes_say_so() -> None:
    from gputriage.record.trace import RankTrace, TraceSection

    before, after = Run(command="trace"), Run(command="trace")
    before.trace = TraceSection(ranks=[RankTrace(rank=0, device="AMD Instinct MI300X", world_size=8)])
    after.trace = TraceSection(ranks=[RankTrace(rank=0, device="NVIDIA H100 80GB HBM3", world_size=1)])
    result = compare(_diag(before), _diag(after), "a.json", "b.json")
    assert result.caveats == [
        "different GPUs: before ran on AMD Instinct MI300X, after on NVIDIA H100 80GB HBM3",
        "different world sizes: 8 ranks before, 1 after",
    ]


def test_a_folder_of_traces_that_never_say_their_world_size_against_one_trace_says_so() -> None:
    """A trial: an 8-rank DLRM job folder against a one-process ResNet trace, "regressed" with no note."""
    from gputriage.record.trace import RankTrace, TraceSection

    before, after = Run(command="trace"), Run(command="trace")
    before.trace = TraceSection(ranks=[RankTrace(rank=None, device="Tesla V100") for _ in range(8)])
    after.trace = TraceSection(ranks=[RankTrace(rank=None, device="Tesla V100")])
    result = compare(_diag(before), _diag(after), "job/", "b.json")
    assert result.caveats == ["different world sizes: 8 ranks before, 1 after"]


def test_same_finding_on_a_moved_line_is_still_there() -> None:
    before = Finding("host-sync-in-loop", 4, Severity.WARNING, "syncs", where="train.py:30")
    after = Finding("host-sync-in-loop", 4, Severity.WARNING, "syncs", where="train.py:32")
    result = compare(_diag(_run(0.1), [before]), _diag(_run(0.1, seed=2), [after]), "a", "b")
    assert [r.code for r in result.findings.still] == ["host-sync-in-loop"]
    assert result.status == "no change"


def test_json_document_and_html_escape_what_came_from_files() -> None:
    hostile = Finding("model-on-cpu", 3, Severity.CRITICAL, "<script>alert(1)</script>", where="t.py:1")
    before, after = _diag(_run(0.1), [hostile]), _diag(_run(0.05, seed=2), [])
    result = compare(before, after, "<b>before</b>", "after")
    doc = compare_document(result)
    assert doc["schema"] == "gputriage.compare/1"
    assert doc["verdict"]["status"] == "fixed"
    assert set(doc) >= {"before", "after", "step_time", "parts", "gpu_busy", "throughput", "findings"}
    page = render_html(result, before, after)
    assert "<script>alert(1)" not in page and "&lt;script&gt;" in page
    assert "<b>before</b>" not in page
    assert page.count("<svg") >= 3  # two step diagrams and the shared timeline


def _save(path: Path, run: Run) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "report.json").write_bytes(encode_document(build_document(diagnose(run))))
    return path


def test_cli_terminal_json_and_fail_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = _save(tmp_path / "a", _run(0.1)), _save(tmp_path / "b", _run(0.2, seed=2))
    assert main(["compare", str(a), str(b / "report.json")]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gputriage compare: regressed: step 100.0 -> 200.4 ms")
    assert main(["compare", str(a), str(b), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"]["status"] == "regressed"
    assert main(["compare", str(a), str(b), "--fail-on", "regression"]) == 1
    assert main(["compare", str(b), str(a), "--fail-on", "regression"]) == 0
    html = tmp_path / "c.html"
    assert main(["compare", str(a), str(b), "--html", str(html)]) == 0
    assert "regressed" in html.read_text()


@pytest.mark.parametrize(
    "content",
    [None, b"", b"not json at all", b"{}", b'{"schema": "gputriage.report/1", "steps": 5}', b"\x00\xff" * 50],
)
def test_hostile_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None
) -> None:
    good = _save(tmp_path / "good", _run(0.1))
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_bytes(content)
    assert main(["compare", str(good), str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gputriage: error: ") and err.count("\n") == 1, err
    assert "Traceback" not in err


TB_PLUGIN = CORPUS / "traces" / "kineto_tb_plugin" / "2021-02"


@pytest.mark.skipif(not TB_PLUGIN.is_dir(), reason="needs ../shared/corpus")
def test_two_real_traces_before_and_after_a_loader_fix(capsys: pytest.CaptureFixture[str]) -> None:
    """The TensorBoard plugin's own example: ResNet-50 with num_workers=0, then 4."""
    before = TB_PLUGIN / "resnet50_num_workers_0" / "worker0.pt.trace.json.gz"
    after = TB_PLUGIN / "resnet50_num_workers_4" / "worker0.pt.trace.json.gz"
    assert main(["compare", str(before), str(after), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["verdict"]["status"] == "fixed"
    assert doc["step_time"]["direction"] == "better"
    assert [g["key"] for g in doc["gpu_busy"]] == ["gpu_busy_trace"]
    assert doc["gpu_busy"][0]["direction"] == "better"
    # the trace's own judged share (kernels in the steps, 68.94%), not a second "GPU busy" of the window (70.4%)
    assert doc["gpu_busy"][0]["before"] == pytest.approx(68.94, abs=0.01)
    assert "input-pipeline-bound" in {f["code"] for f in doc["findings"]["resolved"]}
    assert doc["before"]["steps"] > 0


def test_traces_under_any_name_are_compared_as_traces(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # A fresh-clone tester's gunzipped traces, w0.json and w4.json, were refused as "not a gputriage report".
    sys.path.insert(0, str(Path(__file__).parent.parent / "trace"))  # the trace tests' builders
    from builders import training_loop

    before = training_loop(loader_us=5000).write(tmp_path / "w0.json")
    after = training_loop().write(tmp_path / "w4.json")
    assert main(["compare", str(before), str(after)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("gputriage compare: fixed") and "input-pipeline-bound resolved" in out
    assert "(underused, 5 steps)" in out and "(healthy, 5 steps)" in out
    neither = tmp_path / "neither.json"
    neither.write_text('{"x": 1}')
    assert main(["compare", str(neither), str(after)]) == 2
    assert "neither a gputriage report" in capsys.readouterr().err


def test_two_runs_of_different_jobs_are_compared_with_what_differs_said() -> None:
    from gputriage.record.process import ProcessSection

    before, after = _run(0.1), _run(0.1, seed=2, batch=64)
    before.process, after.process = ProcessSection(exit_code=0, target="train.py"), ProcessSection(target="eval.py")
    before.expect_device, after.expect_device = "cuda", "cpu"
    result = compare(_diag(before), _diag(after), "a", "b")
    assert result.caveats == [
        "different scripts: before ran train.py, after ran eval.py",
        "different devices: before was judged for cuda, after for cpu",
        "different batch sizes: 32 before, 64 after: compare samples/s, not step time",
    ]
    assert compare_document(result)["caveats"] == result.caveats
    assert "note: different scripts" in render_html(result, _diag(before), _diag(after))
    same = compare(_diag(_run(0.1)), _diag(_run(0.1, seed=2)), "a", "b")
    assert same.caveats == []


def test_a_run_against_a_trace_says_the_step_times_are_different_clocks() -> None:
    trace = Run(command="trace")
    result = compare(_diag(_run(0.1)), _diag(trace), "run-out", "trace.json")
    assert len(result.caveats) == 1
    assert result.caveats[0].startswith("before was measured by `gputriage run` and after by a profiler trace")
    lines = _terminal(result)
    row = next(line for line in lines if line.strip().startswith("step time"))
    assert "ms -> not measured" in row and "not measured ms" not in row and "µs" not in row
    assert row.rstrip().endswith("not measured")  # nothing to judge: not "not judged (not measured ...)"


def _terminal(result: object) -> list[str]:
    import io

    from gputriage.report.compare import render_terminal

    stream = io.StringIO()
    render_terminal(result, stream)  # type: ignore[arg-type]
    return stream.getvalue().splitlines()


def test_a_value_measured_on_one_side_only_keeps_its_unit_next_to_it() -> None:
    from gputriage.compare.model import times_text

    assert times_text(0.1, None) == "100.0 ms -> not measured"
    assert times_text(None, 2e-5) == "not measured -> 20 µs"
    assert times_text(0.154, 0.097) == "154.0 -> 97.0 ms"
    assert times_text(1.2, 0.8) == "1.20 s -> 800.0 ms"  # each number as the report writes it
    assert times_text(None, None) == "not measured"


def test_the_compare_page_shows_control_characters_from_the_inputs_as_escapes() -> None:
    """Trial 8: a GPU name in a trace (ESC, an OSC 8 link, RLO, C1) reached `compare --html`'s title, verdict and
    caveats raw, where the report's page escapes them."""
    from gputriage.record.process import ProcessSection

    evil = "train\x1b]8;;http://evil.example/\x07\u202e\x9b.py"
    before, after = _run(0.1), _run(0.1, seed=2)
    before.process, after.process = ProcessSection(exit_code=0, target=evil), ProcessSection(target="eval.py")
    page = render_html(compare(_diag(before), _diag(after), "a", "b"), _diag(before), _diag(after))
    assert "\\x1b]8;;http://evil.example/\\x07\\u202e\\x9b" in page
    assert not any(ch in page for ch in ("\x1b", "\x07", "\u202e", "\x9b"))


def test_two_traces_of_very_different_gpu_work_say_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A trial: batch 4 / seq 128 against batch 8 / seq 1024 (63 ms and 563 ms of GPU work) read "fixed" with no
    caveat; a trace carries no batch size to compare."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "trace"))
    from builders import training_loop

    small = training_loop(kernel_us=300.0, busy_share=0.3).write(tmp_path / "small.json")
    large = training_loop(step_us=40_000.0, kernel_us=2_000.0).write(tmp_path / "large.json")
    same = training_loop(busy_share=0.5).write(tmp_path / "same.json")
    assert main(["compare", str(small), str(large)]) == 0
    assert "note: different workloads: the GPU works " in capsys.readouterr().out
    assert main(["compare", str(same), str(small)]) == 0
    assert "different workloads" not in capsys.readouterr().out


def test_a_copy_of_the_script_under_another_name_has_the_same_findings() -> None:
    """A trial: `starved.py` and its unchanged copy `starved_noop.py` read "regressed: new input-pipeline-bound", the
    one finding on one line "resolved" and "new" at once."""
    import msgspec

    from gputriage.compare.model import findings_delta
    from gputriage.record.process import ProcessSection

    cause = Finding("input-pipeline-bound", 5, Severity.CRITICAL, "waits", {}, "fix", "starved.py:19")
    copy = msgspec.structs.replace(cause, where="starved_noop.py:19")
    before, after = _diag(_run(0.02), [cause]), _diag(_run(0.02, seed=2), [copy])
    before.run.process = ProcessSection(target="starved.py")
    after.run.process = ProcessSection(target="starved_noop.py")
    delta = findings_delta(before, after)
    assert (delta.resolved, delta.new) == ([], []) and [r.where for r in delta.still] == ["starved_noop.py:19"]
