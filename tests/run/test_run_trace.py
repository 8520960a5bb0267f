"""`gputriage run --trace`: a torch.profiler window in the user's job, through the real CLI, on CPU.

Each case is one subprocess (real torch), run a few at a time once per module; the assertions read the trace file
in --out, DIR/report.json, and what `gputriage trace` and `gputriage report` make of them.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from run_cases import PARALLEL_RUNS, SCRIPTS, Case, Result, mark_line, run_case

from contract import TRACE_RANK_FIELDS
from gputriage.cli import main as cli

TRACE = "profiler_trace.json.gz"
CONTRACT = TRACE_RANK_FIELDS  # docs/contract.md: the `trace` section's per-rank fields
# What a CPU-only trace cannot give: every number about the device is null, never a guess.
DEVICE_ONLY = ("device", "window_us", "busy_pct", "idle_pct", "compute_pct", "non_compute_pct", "idle_breakdown")

CASES: dict[str, tuple[Case, str]] = {
    # 12 steps; the window is steps 4-6 (after the probes' own window of steps 0-3)
    "full": (Case(["--trace", "trace_steps.py"]), "cpu"),
    "ends_in_window": (Case(["--trace", "trace_steps.py", "--stop-after", "6"]), "cpu"),
    "ends_before_window": (Case(["--trace", "trace_steps.py", "--steps", "3"]), "cpu"),
    "accumulation": (Case(["--trace-steps", "2", "trace_steps.py", "--accumulate", "3", "--steps", "8"]), "cpu"),
    "own_profiler": (Case(["--trace", "trace_steps.py", "--own-profiler"]), "cpu"),
    "sigterm": (Case(["--trace-steps", "100", "runs_until_killed.py"], terminate_after="ready"), "meta"),
    "in_backward": (Case(["--trace", "trace_unsafe_steps.py", "backward", "10"]), "cpu"),
    "in_thread": (Case(["--trace", "trace_unsafe_steps.py", "thread", "6"]), "cpu"),
}


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Result, Path]]:
    base = tmp_path_factory.mktemp("traced")
    with ThreadPoolExecutor(PARALLEL_RUNS) as pool:
        futures = {
            name: pool.submit(run_case, case, base / name, expect_device=device)
            for name, (case, device) in CASES.items()
        }
        return {name: (future.result(), base / name) for name, future in futures.items()}


def _events(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path) as f:
        events: list[dict[str, Any]] = json.load(f)["traceEvents"]
    return events


def _marked(path: Path, prefix: str) -> list[str]:
    """The names of the spans that start with `prefix`, in step order."""
    names = {e["name"] for e in _events(path) if str(e.get("name", "")).startswith(prefix)}
    return sorted(names, key=lambda n: int(n.rsplit("_", 1)[-1].rsplit("#", 1)[-1]))


def _rank(result: Result) -> dict[str, Any]:
    [rank] = result.report["trace"]["ranks"]
    return rank  # type: ignore[no-any-return]


def test_the_window_is_three_steps_after_warm_up_and_the_profiler_is_off_after_it(
    traced: dict[str, tuple[Result, Path]],
) -> None:
    result, out = traced["full"]
    assert result.returncode == 0, result.stderr[-2000:]
    assert "profiler_on_at_end=False" in result.stdout  # the job itself sees no profiler after the window
    trace = out / TRACE
    # ProfilerStep#N is the run's step N; the job's own per-step marks show nothing before or after the window
    assert _marked(trace, "ProfilerStep#") == ["ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"]
    assert _marked(trace, "user_step_") == ["user_step_4", "user_step_5", "user_step_6"]
    # with_stack=True: the user's own frames are in the trace, so findings can name file:line
    assert any(str(e.get("name", "")).startswith("trace_steps.py(") for e in _events(trace))
    assert result.report["steps"]["steps_observed"] == 12  # the rest of the job ran, and was timed as usual


def test_report_json_has_the_trace_section_with_the_contract_fields(traced: dict[str, tuple[Result, Path]]) -> None:
    result, out = traced["full"]
    rank = _rank(result)
    assert set(CONTRACT) <= set(rank)
    assert rank["path"] == str((out / TRACE).resolve())  # what report.html / report.md / timeline.json point at
    assert rank["rank"] is None  # one process, no torchrun
    assert rank["steps"] == 3 and len(rank["step_times_us"]) == 3
    assert rank["step_time_us"] > 0
    assert 0 <= rank["dataloader_pct_of_step"] <= 100
    assert rank["gpu_events"] == 0 and rank["cpu_ops"] > 0
    for name in (*DEVICE_ONLY, "busy_pct_of_steps"):
        assert rank[name] is None, name
    assert result.report["trace"]["note"] is None


def _wheres(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [v for k, v in node.items() if (k == "where" or k.endswith("_where")) and isinstance(v, str)]
        return own + [w for v in node.values() for w in _wheres(v)]
    if isinstance(node, list):
        return [w for v in node for w in _wheres(v)]
    return []


def test_no_where_points_at_the_line_that_opened_the_window_or_at_gputriage(
    traced: dict[str, tuple[Result, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    # Kineto names the loop's function by the line it was on when the profiler started (the optimizer step) for the
    # whole window: neither `gputriage trace` on the raw file (the frame started before the first op) nor the run's
    # record uses that wrong line.
    result, out = traced["full"]
    opened_at = mark_line("trace_steps.py", "window-opens")
    assert cli(["trace", str(out / TRACE), "--json"]) == 0
    raw = json.loads(capsys.readouterr().out)
    assert opened_at not in _wheres(raw["trace"])
    recorded = _wheres(result.report["trace"]) + _wheres(result.report["findings"])
    assert opened_at not in recorded
    assert not [w for w in recorded if w.startswith("gputriage/")]


def test_the_trace_file_loads_with_gputriage_trace(
    traced: dict[str, tuple[Result, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    result, out = traced["full"]
    assert cli(["trace", str(out / TRACE), "--json"]) == 0
    ranks = json.loads(capsys.readouterr().out)["trace"]["ranks"]
    assert [(r["steps"], r["step_time_us"]) for r in ranks] == [(3, _rank(result)["step_time_us"])]


def test_gputriage_report_re_renders_the_trace_section(
    traced: dict[str, tuple[Result, Path]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result, out = traced["full"]
    assert cli(["report", str(out), "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    again = json.loads((tmp_path / "report.json").read_text())
    assert again["trace"] == result.report["trace"]
    path = _rank(result)["path"]
    assert path in (tmp_path / "report.html").read_text()
    assert json.loads((tmp_path / "timeline.json").read_text())["otherData"]["profiler_traces"] == [path]


def test_a_job_that_ends_inside_the_window_still_gets_its_trace(traced: dict[str, tuple[Result, Path]]) -> None:
    result, out = traced["ends_in_window"]
    assert result.returncode == 0 and "stopping after 6 steps" in result.stdout
    assert _marked(out / TRACE, "user_step_") == ["user_step_4", "user_step_5"]
    # steps 4 and 5, then the span that step 5's optimizer step opened, until the job's end (Kineto ends no span
    # after the fact), and the record says so
    assert _marked(out / TRACE, "ProfilerStep#") == ["ProfilerStep#4", "ProfilerStep#5", "ProfilerStep#6"]
    assert _rank(result)["steps"] == 3
    assert result.report["trace"]["note"] == (
        "the job ended inside the profiler window (steps 4-6): the last span, ProfilerStep#6, runs from the last "
        "step boundary to the job's end"
    )


def test_a_job_killed_inside_the_window_still_gets_its_trace(traced: dict[str, tuple[Result, Path]]) -> None:
    result, out = traced["sigterm"]
    assert result.returncode == -15  # died by SIGTERM, as without gputriage
    assert result.report["process"]["signal"] == "SIGTERM"
    rank = _rank(result)
    assert rank["steps"] >= 1 and rank["path"] == str((out / TRACE).resolve())
    assert _marked(out / TRACE, "ProfilerStep#")[0] == "ProfilerStep#4"
    assert result.report["trace"]["note"].startswith("the job ended inside the profiler window (steps 4-103)")


def test_a_job_that_ends_before_the_window_says_so(traced: dict[str, tuple[Result, Path]]) -> None:
    result, out = traced["ends_before_window"]
    assert result.returncode == 0
    assert not (out / TRACE).exists()
    trace = result.report["trace"]
    assert trace["ranks"] == []
    assert (
        trace["note"] == "the profiler window (steps 4-6) never opened: the job ended after 3 detected training steps"
    )
    assert "--trace: the profiler window" in result.stderr


def test_gradient_accumulation_traces_optimizer_steps_not_micro_batches(
    traced: dict[str, tuple[Result, Path]],
) -> None:
    # The probe counts DataLoader batches until the first optimizer step shows 3 batches per step; the window
    # restarts on the real count.
    result, out = traced["accumulation"]
    assert result.returncode == 0, result.stderr[-2000:]
    assert _marked(out / TRACE, "ProfilerStep#") == ["ProfilerStep#4", "ProfilerStep#5"]
    assert _marked(out / TRACE, "user_step_") == ["user_step_4", "user_step_5"]


def test_a_job_with_its_own_profiler_runs_untouched_and_the_record_says_why(
    traced: dict[str, tuple[Result, Path]],
) -> None:
    result, out = traced["own_profiler"]
    assert result.returncode == 0 and "profiler_on_at_end=False" in result.stdout
    assert not (out / TRACE).exists()
    assert result.report["trace"]["note"] == "the job runs its own profiler, so gputriage did not start a second one"
    assert result.report["verdict"]["status"]  # the report still came out


def test_a_profiler_failure_becomes_a_note_and_never_reaches_the_job(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    from gputriage.collectors import profiler_window
    from gputriage.record import Run

    def disk_full(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(profiler_window.gzip, "open", disk_full)  # the raw trace is written, its gzip copy fails
    window = profiler_window.ProfilerWindow(tmp_path, steps=2)
    run = Run(command="run")
    window.start(run)
    for step in range(1, 8):  # what the run probe calls at each step boundary
        window.on_step(step)
        torch.ones(4).sum()
    assert not torch.autograd.profiler._is_profiler_enabled  # stopped at step 6 even though the export failed
    window.finish(run)
    assert run.trace is not None and run.trace.ranks == []
    assert run.trace.note == "the profiler failed (OSError: [Errno 28] No space left on device)"
    assert not list(tmp_path.iterdir())  # neither the raw trace nor a half-written file is left behind


def test_trace_steps_must_fit_in_the_observed_steps(capsys: pytest.CaptureFixture[str]) -> None:
    script = str(SCRIPTS / "trace_steps.py")
    assert cli(["run", "--trace", "--steps", "5", script]) == 2
    assert "--trace records steps 4-6" in capsys.readouterr().err
    assert cli(["run", "--trace-steps", "0", script]) == 2
    assert "--trace-steps: must be at least 1" in capsys.readouterr().err


@pytest.mark.slow
def test_under_torchrun_each_rank_writes_its_own_trace(tmp_path: Path) -> None:
    repo = SCRIPTS.parents[1]
    bin_dir = Path(sys.executable).parent
    cmd = [str(bin_dir / "torchrun"), "--standalone", "--nproc_per_node=2", "--no-python", str(bin_dir / "gputriage")]
    cmd += ["run", "--expect-device", "cpu", "--trace-steps", "2", "--out", str(tmp_path)]
    cmd += ["tests/distributed/scripts/ddp_job.py", "--steps", "8"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GPUTRIAGE_MERGE_WAIT_S": "10"}
    job = subprocess.run(cmd, check=False, cwd=repo, env=env, capture_output=True, text=True, timeout=120)
    assert job.returncode == 0, job.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.glob("profiler_trace*")) == [
        "profiler_trace_rank0.json.gz",
        "profiler_trace_rank1.json.gz",
    ]
    doc = json.loads((tmp_path / "report.json").read_text())
    for info in doc["ranks"]["ranks"]:
        [rank] = info["trace"]["ranks"]
        assert (rank["rank"], rank["world_size"], rank["backend"]) == (info["rank"], 2, "gloo")
        assert rank["path"].endswith(f"profiler_trace_rank{info['rank']}.json.gz")
        assert rank["steps"] == 2


@pytest.mark.gpu
def test_on_a_gpu_the_trace_has_the_device_numbers(tmp_path: Path) -> None:
    result = run_case(Case(["--trace", "trace_steps.py", "--device", "cuda"]), tmp_path, expect_device="cuda")
    assert result.returncode == 0, result.stderr[-2000:]
    rank = _rank(result)
    assert rank["gpu_events"] > 0 and rank["device"]
    for name in ("window_us", "busy_pct", "idle_pct", "compute_pct", "busy_pct_of_steps"):
        assert rank[name] is not None, name
    assert abs(rank["busy_pct"] + rank["idle_pct"] - 100) < 0.01
    assert "profiler_on_at_end=False" in result.stdout


@pytest.mark.parametrize(("case", "why"), [("in_backward", "inside autograd's backward"), ("in_thread", "a thread")])
def test_steps_the_profiler_cannot_be_driven_from_get_a_note_not_a_crash(
    traced: dict[str, tuple[Result, Path]], case: str, why: str
) -> None:
    result, folder = traced[case]
    assert result.returncode == 0 and "done" in result.stdout
    assert why in result.report["trace"]["note"] and "never opened" in result.report["trace"]["note"]
    assert not (folder / TRACE).exists()
