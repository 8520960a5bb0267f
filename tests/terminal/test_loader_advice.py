"""DataLoader advice from measurement: the load time per batch (measured with num_workers=0, derived from the pace of
the batches with workers) against the step's own work sizes num_workers, and the cores say whether more can help.
The record holds the number once (LoaderInfo.batch_load_s); the finding and the views show that same number."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from report_records import make_steps, starved_run

from gputriage.collectors.probe.loader import BatchTimes, batch_load_time
from gputriage.diagnosis import diagnose
from gputriage.findings import Finding
from gputriage.record import Run
from gputriage.record.steps import Step
from gputriage.report import fmt
from gputriage.report.markdown import render_markdown

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "slow_loader.py"


def loader_run(num_workers: int, load_s: float | None, cpu_s: float | None, cores: int, source: str) -> Run:
    """The issue's case: each batch takes 48 ms to load, the step 61 ms (13 ms of its own work)."""
    run = starved_run()
    assert run.steps is not None and run.steps.loader is not None
    run.steps.steps = [Step(s.index, s.start_s, 0.061, data_wait_s=0.048, forward_s=0.013) for s in make_steps(40, 0.0)]
    run.steps.cpu_count = cores
    loader = run.steps.loader
    loader.num_workers, loader.batches = num_workers, 40
    loader.batch_load_s, loader.batch_load_cpu_s, loader.batch_load_source = load_s, cpu_s, source
    return run


def starvation(run: Run) -> Finding:
    return next(f for f in diagnose(run).findings if f.code == "input-pipeline-bound")


def test_one_worker_that_cannot_keep_up_is_told_so_with_the_numbers() -> None:
    finding = starvation(loader_run(1, 0.048, None, cores=2, source="workers-derived"))
    assert finding.evidence["batch_load_s"] == 0.048 and finding.evidence["workers_needed"] == 4
    lines = finding.fix.splitlines()
    assert lines[0] == (
        "# each batch takes 48.0 ms to load, the step's own work 13.0 ms: 1 worker can't keep up, use at least 4"
    )
    # CPU work is not known (the workers' CPU is not measured): more workers than cores may still help, and the
    # comment says when, next to the code's num_workers=4 (a fresh-clone tester read "1 worker is all it runs", then 4)
    assert lines[1:3] == [
        "# this machine has 2 cores: beside the training loop it runs 1 worker at a time, so 4 help only if the "
        "loading waits (files, network);",
        "# if it is CPU work, it is CPU-bound: cache the decoded samples or simplify the transform",
    ]
    assert "num_workers=4" in finding.fix


def test_loading_that_computes_is_cpu_bound_beyond_the_cores() -> None:
    finding = starvation(loader_run(0, 0.048, 0.046, cores=2, source="main-process"))
    assert "it takes 4 workers to keep up" in finding.fix
    assert "# the loading is CPU work (96% of its time), so it is CPU-bound: cache the decoded samples" in finding.fix
    assert "num_workers=1," in finding.fix  # all that 2 cores run beside the loop


def test_loading_that_waits_gets_the_workers_it_needs() -> None:
    finding = starvation(loader_run(0, 0.048, 0.002, cores=2, source="main-process"))
    assert "the loading mostly waits (its CPU time is 4% of it: files, network)" in finding.fix
    assert "num_workers=4," in finding.fix


def test_enough_cores_no_core_sentence() -> None:
    finding = starvation(loader_run(0, 0.048, 0.046, cores=16, source="main-process"))
    assert "num_workers=4," in finding.fix and "cores" not in finding.fix


def test_without_a_load_time_the_advice_falls_back_to_the_cores() -> None:
    finding = starvation(loader_run(0, None, None, cores=4, source="main-process"))
    assert "batch_load_s" not in finding.evidence
    assert "num_workers=3," in finding.fix


def test_load_time_from_the_batches() -> None:
    times = BatchTimes()
    end_s = 0.0
    for wait_s in (0.5, 0.048, 0.050, 0.047):  # the first pays for lazy initialisation
        end_s += wait_s + 0.013
        times.add(1, wait_s, end_s, cpu_s=wait_s / 2)
    load = batch_load_time(0, times)
    assert load is not None and load.load_s == 0.048 and load.source == "main-process" and load.cpu_s == 0.024

    workers = BatchTimes()
    end_s = 0.0
    for i in range(8):  # two workers at 100 ms a batch: a batch every 50 ms, the loop waiting 37 ms for each
        end_s += 0.050
        workers.add(1, 0.037 if i else 0.2, end_s, cpu_s=0.0)
    load = batch_load_time(2, workers)
    assert load is not None and load.source == "workers-derived" and abs(load.load_s - 0.100) < 1e-9

    ready = BatchTimes()
    for i in range(8):  # always ready: the loader keeps up, and its load time is not seen
        ready.add(1, 0.0001, 0.050 * (i + 1), cpu_s=0.0)
    assert batch_load_time(2, ready) is None


def test_an_interval_never_spans_two_epochs() -> None:
    times = BatchTimes()
    times.add(1, 0.04, 1.0, 0.0)
    times.add(2, 0.9, 2.0, 0.0)  # a new iterator: its first batch waited for the workers to start
    assert times.waited_intervals_s == []


@pytest.fixture(scope="module")
def measured(tmp_path_factory: pytest.TempPathFactory) -> dict[int, dict[str, object]]:
    docs = {}
    for workers in (0, 1):
        out = tmp_path_factory.mktemp(f"w{workers}")
        done = subprocess.run(
            [sys.executable, "-m", "gputriage", "run", "--out", str(out), str(SCRIPT), str(workers)],
            capture_output=True,
            text=True,
            timeout=240,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        docs[workers] = {"doc": json.loads((out / "report.json").read_text()), "md": (out / "report.md").read_text()}
    return docs


@pytest.mark.parametrize(("workers", "source"), [(0, "main-process"), (1, "workers-derived")])
def test_a_real_run_measures_the_load_time_and_every_view_shows_that_number(
    measured: dict[int, dict[str, object]], workers: int, source: str
) -> None:
    doc = measured[workers]["doc"]
    assert isinstance(doc, dict)
    loader = doc["steps"]["loader"]
    assert loader["batch_load_source"] == source
    assert 0.1 <= loader["batch_load_s"] <= 0.4  # 4 samples x 30 ms, plus the hand-over (and a busy machine)
    finding = next(f for f in doc["findings"] if f["code"] == "input-pipeline-bound")
    assert finding["evidence"]["batch_load_s"] == round(loader["batch_load_s"], 6)
    shown = f"{loader['batch_load_s'] * 1e3:.1f} ms"
    assert f"each batch takes {shown} to load" in finding["fix"]
    assert f"load per batch: {fmt.duration(loader['batch_load_s'])}" in str(measured[workers]["md"])
    needed = finding["evidence"]["workers_needed"]
    assert needed >= 2
    if workers == 0:
        assert loader["batch_load_cpu_s"] < 0.5 * loader["batch_load_s"]  # a sleep waits, it does not compute
        assert "the loading mostly waits" in finding["fix"]
        # the script's own option kept, with a floor (a larger -j on the command line still wins)
        assert f"num_workers=max(int(sys.argv[1]), {min(needed, 8)})," in finding["fix"]
    else:
        assert loader["batch_load_cpu_s"] is None
        assert f"1 worker can't keep up, use at least {needed}" in finding["fix"]


def test_the_markdown_view_reads_the_record() -> None:
    run = loader_run(1, 0.048, None, cores=2, source="workers-derived")
    assert "load per batch: 48.0 ms #40;from the workers#39; pace#41;" in render_markdown(diagnose(run))  # Mermaid
