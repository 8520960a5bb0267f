"""Real torchrun jobs (gloo on CPU) under `gputriage run`: every rank records, the ranks merge through files.

Each test starts one small job of 2-3 ranks (a few seconds each on 2 cores) and reads the merged DIR/report.json.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
JOB = "tests/distributed/scripts/ddp_job.py"
DIST_CODES = {
    "ranks-share-gpu",
    "stray-context-on-gpu",
    "missing-distributed-sampler",
    "straggler-rank",
    "gloo-with-cuda",
    "dataparallel-not-ddp",
}


def job_line(text: str) -> str:
    """'JOB:N' for the line of the job script that holds `text` (so a test does not hard-code line numbers)."""
    lines = (REPO / JOB).read_text().splitlines()
    return f"{JOB}:{next(n for n, line in enumerate(lines, start=1) if text in line)}"


def torchrun_cmd(out: Path, ranks: int, *job_args: str, module: bool = False) -> list[str]:
    """`torchrun ... --no-python gputriage run` (or `torchrun ... -m gputriage run`) on the tiny DDP job."""
    launch = ["-m", "gputriage"] if module else ["--no-python", str(BIN / "gputriage")]
    cmd = [
        str(BIN / "torchrun"),
        "--standalone",
        f"--nproc_per_node={ranks}",
        *launch,
        "run",
        "--expect-device",
        "cpu",
        "--out",
        str(out),
        JOB,
        *job_args,
    ]
    return cmd


ENV = {**os.environ, "OMP_NUM_THREADS": "1", "GPUTRIAGE_MERGE_WAIT_S": "10"}


def torchrun(
    out: Path, ranks: int, *job_args: str, module: bool = False, **env: str
) -> subprocess.CompletedProcess[str]:
    cmd = torchrun_cmd(out, ranks, *job_args, module=module)
    return subprocess.run(cmd, check=False, cwd=REPO, env={**ENV, **env}, capture_output=True, text=True, timeout=120)


def merged(out: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((out / "report.json").read_text())
    return doc


def by_code(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["code"]: f for f in doc["findings"]}


def test_healthy_ddp_job_merges_every_rank_with_no_distributed_finding(tmp_path: Path) -> None:
    job = torchrun(tmp_path, 2)
    assert job.returncode == 0, job.stderr[-3000:]
    assert "rank 0 done" in job.stdout and "rank 1 done" in job.stdout  # the script's stdout stays the script's

    doc = merged(tmp_path)
    assert sorted(p.name for p in (tmp_path / "ranks").iterdir()) == ["rank-00000.json", "rank-00001.json"]
    ranks = doc["ranks"]
    assert (ranks["world_size"], ranks["missing"]) == (2, [])
    assert [r["rank"] for r in ranks["ranks"]] == [0, 1]
    for info in ranks["ranks"]:
        assert (info["backend"], info["device"], info["wrap"]["kind"]) == ("gloo", "cpu", "ddp")
        assert info["backend_where"] == job_line("dist.init_process_group(")
        [loader] = info["loaders"]
        assert (loader["sampler_class"], loader["dataset_len"], loader["samples_per_epoch"]) == (
            "DistributedSampler",
            64,
            32,
        )
        assert info["collectives"]["ddp_timed"] and len(info["collectives"]["events"]) == 6
        assert len(info["steps"]["steps"]) >= 5
    assert not DIST_CODES & set(by_code(doc))
    assert doc["verdict"]["status"] == "healthy"


def test_no_distributed_sampler_under_python_m_launch(tmp_path: Path) -> None:
    job = torchrun(tmp_path, 2, "--no-sampler", module=True)
    assert job.returncode == 0, job.stderr[-3000:]
    doc = merged(tmp_path)
    miss = by_code(doc)["missing-distributed-sampler"]
    assert doc["verdict"]["root_cause"] == "missing-distributed-sampler"
    assert miss["evidence"]["on_ranks"] == [0, 1]
    assert (miss["evidence"]["dataset_len"], miss["evidence"]["samples_per_rank_per_epoch"]) == (64, 64)
    assert miss["evidence"]["expected_samples_per_rank_per_epoch"] == 32
    assert miss["where"] == job_line("in enumerate(loader)")  # where the loader is iterated


def test_one_slow_input_pipeline_makes_that_rank_the_straggler_and_names_why(tmp_path: Path) -> None:
    job = torchrun(tmp_path, 3, "--slow-rank", "2")
    assert job.returncode == 0, job.stderr[-3000:]
    findings = by_code(merged(tmp_path))
    late = findings["straggler-rank"]
    assert late["rank"] == 2 and late["evidence"]["straggler_rank"] == 2
    assert late["evidence"]["cause_phase"] == "data_wait_s"
    assert late["evidence"]["cause_code"] == "input-pipeline-bound"
    waits = late["evidence"]["collective_wait_s_per_step_by_rank"]
    assert waits["0"] > waits["2"] and waits["1"] > waits["2"]  # the others wait, the late rank does not
    starved = findings["input-pipeline-bound"]
    assert starved["rank"] == 2 and starved["evidence"]["on_ranks"] == [2]  # on rank 2 only


def test_a_crashed_rank_still_leaves_its_record_and_the_job_report(tmp_path: Path) -> None:
    job = torchrun(tmp_path, 2, "--crash-rank", "1")
    assert job.returncode != 0
    doc = merged(tmp_path)
    ranks = {r["rank"]: r for r in doc["ranks"]["ranks"]}
    assert sorted(ranks) == [0, 1] and doc["ranks"]["missing"] == []
    crashed = ranks[1]["process"]
    assert (crashed["exit_code"], crashed["exception_type"]) == (1, "RuntimeError")
    assert "corrupt batch at step 2" in crashed["exception_message"]
    assert len(ranks[1]["steps"]["steps"]) >= 1  # what it saw before it died
    assert ranks[0]["process"]["exit_code"] != 0  # its peer lost the all-reduce (or was stopped by torchrun)


def stopped_job(out: Path, ranks: int, where: str, stop: Callable[[subprocess.Popen[bytes], list[int]], None]) -> None:
    """Start a job of `ranks` ranks that wait at step 3 (`where`: --hang-at or --block-at), call `stop(job, pids)`
    once every rank is there, and wait for torchrun to end."""
    ready = out.parent / f"{out.name}-ready"
    cmd = torchrun_cmd(out, ranks, where, "3")
    job = subprocess.Popen(
        cmd, cwd=REPO, env={**ENV, "JOB_READY_FILE": str(ready)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        files = [Path(f"{ready}.{r}") for r in range(ranks)]
        deadline = time.monotonic() + 120
        while not all(f.exists() and f.read_text() for f in files) and time.monotonic() < deadline:
            time.sleep(0.2)
        stop(job, [int(f.read_text()) for f in files])
        job.wait(timeout=120)
    finally:
        job.kill()


def test_ranks_stopped_by_sigterm_leave_what_they_saw(tmp_path: Path) -> None:
    # what Slurm's scancel or a preemption does to the launcher
    stopped_job(tmp_path / "out", 2, "--hang-at", lambda job, pids: job.send_signal(signal.SIGTERM))
    doc = merged(tmp_path / "out")
    ranks = doc["ranks"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    for info in ranks:
        assert info["process"]["signal"] == "SIGTERM"
        assert len(info["steps"]["steps"]) >= 3  # the steps before the stop


def kill_one_rank(out: Path, victim: int, ranks: int = 3) -> dict[str, Any] | None:
    """SIGKILL rank `victim` of a job (torchrun then SIGTERMs the others, the merging one included), and return the
    merged report the survivors leave (None when there is none)."""
    stopped_job(out, ranks, "--hang-at", lambda job, pids: os.kill(pids[victim], signal.SIGKILL))
    report = out / "report.json"
    return json.loads(report.read_text()) if report.exists() else None


@pytest.mark.parametrize("victim", [0, 2])
def test_a_rank_killed_hard_leaves_the_merged_report_with_it_missing(tmp_path: Path, victim: int) -> None:
    doc = kill_one_rank(tmp_path / "out", victim)
    assert doc is not None, "the merged report was lost"
    assert doc["ranks"]["missing"] == [victim]
    assert sorted(r["rank"] for r in doc["ranks"]["ranks"]) == sorted({0, 1, 2} - {victim})
    for info in doc["ranks"]["ranks"]:
        assert info["process"]["signal"] == "SIGTERM"


def test_a_rank_stuck_inside_a_collective_still_reports_when_stopped(tmp_path: Path) -> None:
    """Rank 0 waits in a gloo barrier (C++: its Python SIGTERM handler cannot run) for rank 1, which ignores SIGTERM
    until torchrun SIGKILLs it: the signal watch thread writes rank 0's record and the job's report."""

    def stop(job: subprocess.Popen[bytes], pids: list[int]) -> None:
        time.sleep(1.0)  # rank 0 is inside its barrier by now
        job.send_signal(signal.SIGTERM)

    stopped_job(tmp_path / "out", 2, "--block-at", stop)
    doc = merged(tmp_path / "out")
    assert doc["ranks"]["missing"] == [1]
    [info] = doc["ranks"]["ranks"]
    assert info["rank"] == 0 and info["process"]["signal"] == "SIGTERM"
    assert len(info["steps"]["steps"]) >= 3


def test_report_dir_completes_a_merge_nobody_finished(tmp_path: Path) -> None:
    """Every rank wrote its record, but the merging one was killed with the lock held: `gputriage report DIR`."""
    job = torchrun(tmp_path, 2)
    assert job.returncode == 0, job.stderr[-3000:]
    (tmp_path / "report.json").unlink()
    (tmp_path / ".merge.lock").write_text("999999999")  # a pid no process has
    done = subprocess.run(
        [str(BIN / "gputriage"), "report", str(tmp_path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert merged(tmp_path)["ranks"]["missing"] == []
    assert not (tmp_path / ".merge.lock").exists()


def test_the_allreduce_timing_hook_trains_exactly_like_ddps_default(tmp_path: Path) -> None:
    timed = torchrun(tmp_path / "timed", 2)
    untimed = torchrun(tmp_path / "untimed", 2, GPUTRIAGE_DDP_COMM_TIMING="0")
    assert timed.returncode == untimed.returncode == 0, timed.stderr[-2000:] + untimed.stderr[-2000:]
    weights = [sorted(line for line in job.stdout.splitlines() if "weights" in line) for job in (timed, untimed)]
    assert len(weights[0]) == 2 and weights[0] == weights[1]
    assert [r["collectives"]["ddp_timed"] for r in merged(tmp_path / "timed")["ranks"]["ranks"]] == [True, True]
    assert [r["collectives"]["ddp_timed"] for r in merged(tmp_path / "untimed")["ranks"]["ranks"]] == [False, False]


if __name__ == "__main__":  # the torchrun kill test, repeated: python tests/distributed/test_dist_torchrun.py [N]
    import tempfile

    tries = int(sys.argv[1]) if len(sys.argv) > 1 else 10
    lost = 0
    for attempt in range(tries):
        with tempfile.TemporaryDirectory() as tmp:
            victim = attempt % 3
            doc = kill_one_rank(Path(tmp) / "out", victim)
            ok = doc is not None and doc["ranks"]["missing"] == [victim]
            lost += not ok
            seen = f"merged, missing {doc['ranks']['missing']}" if doc is not None else "LOST"
            print(f"try {attempt + 1}: killed rank {victim}: {seen}")
    print(f"merged reports lost: {lost} of {tries}")
