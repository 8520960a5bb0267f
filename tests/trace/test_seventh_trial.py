"""`trace` on what the seventh trial found: its report was written over the trace it read (`trace X/report.json --out
X`), and a compare's page over the trace of a side."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from builders import training_loop

from gputriage.cli import main
from gputriage.tracing import reader


def _trace(path: Path) -> bytes:
    path.parent.mkdir(parents=True, exist_ok=True)
    return training_loop(steps=3).write(path, gz=False).read_bytes()


def test_trace_never_writes_its_report_over_the_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = _trace(tmp_path / "x" / "report.json")
    assert main(["trace", str(tmp_path / "x" / "report.json"), "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "this command reads it as an input" in err
    assert (tmp_path / "x" / "report.json").read_bytes() == trace


def test_compare_never_writes_its_page_over_a_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = _trace(tmp_path / "before.json")
    _trace(tmp_path / "after.json")
    args = ["compare", str(tmp_path / "before.json"), str(tmp_path / "after.json"), "--html"]
    assert main([*args, str(tmp_path / "before.json")]) == 2
    assert (tmp_path / "before.json").read_bytes() == before
    assert main([*args, str(tmp_path / "page.html")]) in (0, 1)
    assert (tmp_path / "page.html").read_bytes().startswith(b"<!")


def _loop(path: Path, *, steps: int, busy: float, gpu: str = "FakeGPU") -> Path:
    b = training_loop(steps=steps, busy_share=busy, kernel_us=busy * 10_000.0)
    b.meta["deviceProperties"] = [{"name": gpu}]
    return b.write(path, gz=False)


def _compare(before: Path, after: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, dict]:
    capsys.readouterr()
    code = main(["compare", str(before), str(after), "--json", *flags])
    return code, json.loads(capsys.readouterr().out)


def test_runs_on_different_gpu_models_are_not_judged_by_their_times(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An H100 run against an MI300X run said "fixed: GPU busy 16% -> 25%", and exit 1 the other way round."""
    a = _loop(tmp_path / "a.json", steps=6, busy=0.8, gpu="NVIDIA H100 80GB HBM3")
    b = _loop(tmp_path / "b.json", steps=6, busy=0.97, gpu="AMD Instinct MI300X VF")
    code, doc = _compare(b, a, capsys, "--fail-on", "regression")
    assert code == 0 and doc["timing_judged"] is False and doc["unjudged_because"] == "on different GPUs"
    assert doc["verdict"]["summary"].startswith("no change") and "on different GPUs" in doc["verdict"]["summary"]


def test_a_one_step_trace_is_too_thin_to_judge_its_busy_share(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _loop(tmp_path / "a.json", steps=1, busy=0.2)
    b = _loop(tmp_path / "b.json", steps=1, busy=0.9)
    _, doc = _compare(a, b, capsys)
    busy = next(c for c in doc["gpu_busy"] if c["key"] == "gpu_busy_trace")
    assert busy["direction"] == "within noise" and busy["basis"].endswith("too few to judge")
    assert doc["verdict"]["status"] != "fixed"


def test_the_same_gpu_and_enough_steps_are_still_judged(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = _loop(tmp_path / "a.json", steps=6, busy=0.3)
    b = _loop(tmp_path / "b.json", steps=6, busy=0.9)
    _, doc = _compare(a, b, capsys)
    busy = next(c for c in doc["gpu_busy"] if c["key"] == "gpu_busy_trace")
    assert busy["direction"] == "better" and doc["timing_judged"] is True


def test_a_finding_demoted_in_a_thin_after_run_is_not_resolved(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A one-step after run shows the same low busy share as info (too few steps): that is not a fix."""
    a = _loop(tmp_path / "a.json", steps=6, busy=0.2)
    b = _loop(tmp_path / "b.json", steps=1, busy=0.2)
    _, doc = _compare(a, b, capsys)
    before = [f["code"] for f in doc["findings"]["still"]]
    assert doc["findings"]["resolved"] == [] and "low-gpu-utilization" in before
    assert doc["verdict"]["status"] != "fixed"


def _with_key_before(path: Path, key: str, value: object) -> Path:
    b = training_loop(steps=3)
    b.meta["deviceProperties"] = [{"name": "NVIDIA H100 80GB HBM3"}]
    written = b.write(path, gz=False).read_text()
    path.write_text("{" + json.dumps(key) + ": " + json.dumps(value) + ", " + written.lstrip()[1:])
    return path


def test_a_large_key_before_the_events_is_read_in_place(tmp_path: Path, trace_json: Any) -> None:
    """A stackFrames table of megabytes before traceEvents (its bytes were copied seven times over: 394 MB for a
    50 MB key): the header after it and the events are read."""
    frames = {str(i): {"name": f"frame {i}" * 4, "parent": i - 1} for i in range(40_000)}
    code, doc = trace_json(str(_with_key_before(tmp_path / "t.json", "stackFrames", frames)))
    assert code == 0 and doc["trace"]["ranks"][0]["device"] == "NVIDIA H100 80GB HBM3"
    assert doc["trace"]["ranks"][0]["steps"] == 3


def test_a_key_before_the_events_over_the_limit_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(reader, "MAX_PIECE_BYTES", 1 << 20)
    path = _with_key_before(tmp_path / "t.json", "stackFrames", "S" * (3 << 20))
    assert main(["trace", str(path)]) == 2
    err = capsys.readouterr().err
    assert "the keys before traceEvents hold more than 1 MiB" in err and "no traceEvents" not in err


def test_the_same_finding_on_many_rank_traces_is_one_finding(tmp_path: Path, trace_json: Any) -> None:
    """A forged folder of 27,000 ranks gave 27,000 copies of one finding (a 15 MB report.md); a folder of ten is
    enough to show they are one, with the ranks it was seen on, as for a merged torchrun job."""
    (tmp_path / "job").mkdir()
    for rank in range(10):
        b = training_loop(steps=4, busy_share=0.2, kernel_us=2_000.0)
        b.meta["distributedInfo"] = {"rank": rank, "world_size": 10, "backend": "nccl"}
        b.write(tmp_path / "job" / f"rank{rank}.json", gz=False)
    code, doc = trace_json(tmp_path / "job")
    low = [f for f in doc["findings"] if f["code"] == "low-gpu-utilization"]
    assert code == 0 and len(low) == 1
    assert low[0]["evidence"]["on_ranks"] == list(range(10)) and low[0]["title"].startswith("On 10 ranks (0-9): ")


def test_a_run_of_ranks_is_shown_as_ranges() -> None:
    from gputriage.report.fmt import evidence_value

    assert evidence_value([0, 1, 2, 3, 7, 9, 10, 11]) == "0-3, 7, 9-11 (8)"
    assert evidence_value(list(range(27_000))) == "0-26,999 (27,000)"
    assert evidence_value([1, 5, 9]) == "1, 5, 9"


def test_a_kernel_whose_stream_cannot_be_read_is_dropped_with_a_note(tmp_path: Path, trace_json: Any) -> None:
    """A 5,000-digit `args.stream` made the kernel vanish without a word."""
    path = training_loop(steps=4).write(tmp_path / "t.json", gz=False)
    doc = json.loads(path.read_text())
    kernel = next(e for e in doc["traceEvents"] if e.get("cat") == "kernel")
    doc["traceEvents"].append({**kernel, "args": {**kernel["args"], "stream": "HUGE"}})
    path.write_text(json.dumps(doc).replace('"HUGE"', "9" * 5000))
    code, report = trace_json(path)
    notes = report["trace"]["ranks"][0]["notes"]
    assert code == 0 and any("no readable `args.stream`" in n for n in notes)


def test_a_rank_folder_of_two_gpu_models_says_so_and_names_no_straggler(tmp_path: Path, trace_json: Any) -> None:
    """Rank 0 on an H100, rank 1 on an MI300X, one slower: analysed as one job with a straggler, and no word."""
    (tmp_path / "job").mkdir()
    for rank, (gpu, busy) in enumerate((("NVIDIA H100 80GB HBM3", 0.9), ("AMD Instinct MI300X", 0.3))):
        b = training_loop(steps=5, busy_share=busy, kernel_us=busy * 10_000.0)
        b.meta["deviceProperties"] = [{"name": gpu}]
        b.meta["distributedInfo"] = {"rank": rank, "world_size": 2, "backend": "nccl"}
        b.write(tmp_path / "job" / f"rank{rank}.json", gz=False)
    code, doc = trace_json(tmp_path / "job")
    assert code == 0 and doc["trace"]["imbalance"] is None
    assert any("different GPU models" in n for n in doc["trace"]["ranks"][0]["notes"])
    assert all(f["code"] != "straggler-rank" for f in doc["findings"])


def test_a_trace_given_to_env_from_points_to_gputriage_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = training_loop(steps=3).write(tmp_path / "t.json", gz=False)
    assert main(["env", "--from", str(path)]) == 2
    assert f"is a profiler trace, not a pasted report: run `gputriage trace {path}`" in capsys.readouterr().err


def test_trace_of_standard_input_says_why_not(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "-"]) == 2
    assert "standard input" in capsys.readouterr().err
