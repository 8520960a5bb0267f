"""The file-level merge: each rank writes its record, the job's report appears once all are there, and
`gputriage report DIR [DIR2 ...]` merges again by hand."""

from __future__ import annotations

import io
import json
import os
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from dist_records import RankFactory, steps_with

from gputriage import envnames
from gputriage.cli import main
from gputriage.commands.rank_report import finish_rank, report_rank
from gputriage.outdir import LOCK_NAME, rank_record_path
from gputriage.record import Run
from gputriage.record.merge import load_job
from gputriage.record.ranks import RankInfo, RankLoader
from gputriage.record.run import save_run
from gputriage.record.sections import SECTION_NAMES, Sections


def report_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    assert main(["report", *args, "--json"]) == 0
    doc: dict[str, Any] = json.loads(capsys.readouterr().out)
    return doc


def unsharded(make_rank: RankFactory, rank: int, world: int, **kw: Any) -> Run:
    loader = RankLoader(sampler_class="RandomSampler", dataset_len=64, samples_per_epoch=64, iterations=1)
    return make_rank(rank, world, loaders=[loader], device="cpu", backend="gloo", **kw)


def test_the_last_rank_to_finish_writes_the_merged_report(make_rank: RankFactory, tmp_path: Path) -> None:
    outcomes = [finish_rank(unsharded(make_rank, r, 4), tmp_path, wait_s=0) for r in (3, 1, 2)]
    assert [o.report_path for o in outcomes] == [None, None, None]
    assert not (tmp_path / "report.json").exists()

    last = finish_rank(unsharded(make_rank, 0, 4), tmp_path, wait_s=0)
    assert last.report_path == tmp_path / "report.json" and last.missing == []
    doc = json.loads(last.report_path.read_text())
    assert [r["rank"] for r in doc["ranks"]["ranks"]] == [0, 1, 2, 3]
    assert doc["findings"][0]["code"] == "missing-distributed-sampler"
    assert doc["findings"][0]["evidence"]["on_ranks"] == [0, 1, 2, 3]
    leftovers = [p.name for p in tmp_path.rglob("*") if p.name.startswith(".")]
    assert leftovers == []  # no temporary file, staging folder or lock stays behind


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + 30
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


def test_the_job_report_is_merged_and_shown_once(make_rank: RankFactory, tmp_path: Path) -> None:
    # A fresh-clone tester saw the whole report printed twice under torchrun: the last rank to write its record merged
    # it, then rank 0, done waiting for the others, found every record there and merged (and printed) it again.
    with ThreadPoolExecutor(1) as pool:
        rank0 = pool.submit(finish_rank, unsharded(make_rank, 0, 3), tmp_path, wait_s=30)  # waits for ranks 1 and 2
        _wait_for(rank_record_path(tmp_path, 0))
        assert finish_rank(unsharded(make_rank, 1, 3), tmp_path, wait_s=0).diagnosis is None
        last = finish_rank(unsharded(make_rank, 2, 3), tmp_path, wait_s=0)
        first = rank0.result(timeout=60)
    merged = [o for o in (first, last) if o.diagnosis is not None]
    assert len(merged) == 1 and merged[0].missing == []  # one of them merged (whichever took the lock first)
    other = first if merged[0] is last else last
    assert other.report_path is None and other.merged_by_another

    report = tmp_path / "report.json"
    rank1 = tmp_path / "ranks" / "rank-00001.json"
    later_ns = report.stat().st_mtime_ns + 10**9
    os.utime(rank1, ns=(later_ns, later_ns))  # a record newer than the report: merged again
    assert finish_rank(unsharded(make_rank, 2, 3), tmp_path, wait_s=0).diagnosis is not None


def test_report_rank_prints_the_job_report_once(
    make_rank: RankFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(envnames.MERGE_WAIT_S, "30")
    streams = {r: io.StringIO() for r in range(2)}
    with ThreadPoolExecutor(1) as pool:
        rank0 = pool.submit(report_rank, unsharded(make_rank, 0, 2), tmp_path, streams[0])
        _wait_for(rank_record_path(tmp_path, 0))  # rank 0 has written its record and waits for rank 1's
        report_rank(unsharded(make_rank, 1, 2), tmp_path, streams[1])
        rank0.result(timeout=60)
    shown = [s.getvalue() for s in streams.values()]
    assert sum("gputriage verdict:" in text for text in shown) == 1, shown
    assert sum("merged the job's report into" in text for text in shown) == 1
    assert sum("the job's report, merged by another rank, is in" in text for text in shown) == 1


def test_rank0_merges_what_it_has_and_a_late_rank_completes_the_report(make_rank: RankFactory, tmp_path: Path) -> None:
    first = finish_rank(unsharded(make_rank, 0, 2), tmp_path, wait_s=0.2)
    assert first.report_path is not None and first.missing == [1]
    assert json.loads(first.report_path.read_text())["ranks"]["missing"] == [1]

    late = finish_rank(unsharded(make_rank, 1, 2), tmp_path, wait_s=0)
    assert late.report_path is not None and late.missing == []
    doc = json.loads(late.report_path.read_text())
    assert doc["ranks"]["missing"] == [] and len(doc["ranks"]["ranks"]) == 2


def test_a_merge_in_progress_elsewhere_is_left_alone_and_a_stale_lock_is_taken_over(
    make_rank: RankFactory, tmp_path: Path
) -> None:
    finish_rank(unsharded(make_rank, 1, 2), tmp_path, wait_s=0)
    lock = tmp_path / LOCK_NAME
    lock.write_text(str(os.getppid()))  # a live process is merging
    assert finish_rank(unsharded(make_rank, 0, 2), tmp_path, wait_s=0).report_path is None

    old_s = time.time() - 3600
    os.utime(lock, (old_s, old_s))  # its merger was killed an hour ago
    assert finish_rank(unsharded(make_rank, 0, 2), tmp_path, wait_s=0).report_path is not None
    assert not lock.exists()


def test_a_lock_whose_merger_is_dead_is_taken_over_at_once(make_rank: RankFactory, tmp_path: Path) -> None:
    finish_rank(unsharded(make_rank, 1, 2), tmp_path, wait_s=0)
    dead = subprocess.Popen(["true"])
    dead.wait()  # reaped: its pid names no process now
    lock = tmp_path / LOCK_NAME
    lock.write_text(str(dead.pid))
    assert finish_rank(unsharded(make_rank, 0, 2), tmp_path, wait_s=0).report_path is not None
    assert not lock.exists()


def test_report_dir_merges_again_and_the_merged_report_re_renders_the_same(
    make_rank: RankFactory, write_job: Callable[[list[Run]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    runs = []
    for r in range(3):
        steps, stats = steps_with(0.1, 0.02, 0.001) if r == 2 else steps_with(0.002, 0.02, 0.1)
        runs.append(unsharded(make_rank, r, 3, steps=steps, collectives=stats))
    out = write_job(runs)
    merged = report_json(capsys, str(out), "--out", str(out))
    assert {f["code"] for f in merged["findings"]} >= {"missing-distributed-sampler", "straggler-rank"}
    for info in merged["ranks"]["ranks"]:
        assert {s["rank"] for s in info["steps"]["steps"]} == {info["rank"]}  # each step says whose it is

    again = report_json(capsys, str(out / "report.json"))
    assert again["findings"] == merged["findings"]
    assert again["ranks"] == merged["ranks"]


def test_per_node_folders_merge_without_a_shared_filesystem(
    make_rank: RankFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for node in ("a", "b"):
        for r in (0, 1) if node == "a" else (2, 3):
            finish_rank(unsharded(make_rank, r, 4, node=f"node-{node}", local_rank=r % 2), tmp_path / node, wait_s=0)
    doc = report_json(capsys, str(tmp_path / "a"), str(tmp_path / "b"))
    assert doc["ranks"]["nodes"] == ["node-a", "node-b"]
    assert [r["rank"] for r in doc["ranks"]["ranks"]] == [0, 1, 2, 3]
    assert doc["ranks"]["missing"] == []


def test_only_the_newest_job_in_a_reused_folder_is_merged(make_rank: RankFactory, tmp_path: Path) -> None:
    for r in range(4):
        old = unsharded(make_rank, r, 4, job_id="job-old")
        old.created_at_s -= 3600
        finish_rank(old, tmp_path, wait_s=0)
    for r in range(2):
        finish_rank(unsharded(make_rank, r, 2, job_id="job-new"), tmp_path, wait_s=0)
    merged = load_job([tmp_path])
    assert merged is not None and merged.ranks is not None
    assert merged.ranks.job_id == "job-new" and merged.ranks.world_size == 2
    assert [i.rank for i in merged.ranks.ranks] == [0, 1]
    # the other job is not merged, and not dropped in silence either
    (other,) = merged.ranks.other_jobs
    assert "2 rank record(s) of another job (job id job-old, world size 4)" in other  # ranks 0-1 were overwritten


def test_an_unreadable_rank_file_is_named_not_fatal(make_rank: RankFactory, tmp_path: Path) -> None:
    finish_rank(unsharded(make_rank, 0, 2), tmp_path, wait_s=0)
    rank_record_path(tmp_path, 1).write_text("{ truncated")
    merged = load_job([tmp_path])
    assert merged is not None and merged.ranks is not None
    assert merged.ranks.missing == [1]
    assert merged.ranks.unreadable == [str(rank_record_path(tmp_path, 1))]


def test_report_of_several_plain_runs_is_one_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for name in ("a.json", "b.json"):
        save_run(Run(command="run"), tmp_path / name)
    assert main(["report", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "several only for the per-node folders" in err


def test_every_run_section_travels_with_its_rank() -> None:
    # The evidence sections live in one class that Run and RankInfo share, so the merge moves every one of them.
    assert issubclass(Run, Sections) and issubclass(RankInfo, Sections)
    bookkeeping = {
        "command",
        "schema",
        "created_at_s",
        "argv",
        "expect_device",
        "resolved_device",
        "rank_info",
        "ranks",
    }
    assert set(Run.__struct_fields__) - bookkeeping == set(SECTION_NAMES)
