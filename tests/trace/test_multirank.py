"""A folder of per-rank traces: every rank analysed (in parallel processes), compared, and the straggler named."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from builders import TraceBuilder

NCCL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"


def _job(
    folder: Path, loader_us: list[float], clock_offset_us: list[float], steps: int = 6, world: int | None = None
) -> Path:
    """World of len(loader_us) ranks; each step: loader wait, 6 ms of kernels, then an all-reduce that ends when
    the last rank arrives. Rank clocks disagree by clock_offset_us (different hosts)."""
    folder.mkdir()
    step_us = 10_000.0 + max(loader_us)
    for rank, (loader, offset) in enumerate(zip(loader_us, clock_offset_us, strict=True)):
        b = TraceBuilder(base_ns=1_700_000_000_000_000_000 + int(offset * 1000))
        b.meta["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world or len(loader_us)}
        for i in range(steps):
            t0 = i * step_us
            b.step(i, t0, step_us)
            if loader:
                b.annotation("enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__", t0, loader)
            t = t0 + loader
            for k in range(12):
                b.launch(t + k, t + 10 + k * 500, 500.0)
            arrive = t + 10 + 12 * 500
            done = t0 + max(loader_us) + 10 + 12 * 500 + 300
            b.launch(t + 20, arrive, done - arrive, NCCL)
        b.write(folder / f"rank-{rank}.pt.trace.json.gz")
    return folder


def test_straggler_with_its_own_cause(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    folder = _job(tmp_path / "job", loader_us=[0, 0, 4000, 0], clock_offset_us=[0, 5e6, -3e6, 17.0])
    code, doc = trace_json(folder, "--jobs", "2")
    ranks = doc["trace"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1, 2, 3]
    imbalance = doc["trace"]["imbalance"]
    assert imbalance["straggler_rank"] == 2
    assert imbalance["straggler_lag_us"] == pytest.approx(4000, abs=1)  # clock offsets removed
    straggler = next(f for f in doc["findings"] if f["code"] == "straggler-rank")
    assert straggler["rank"] == 2
    assert straggler["evidence"]["reason_code"] == "input-pipeline-bound"
    assert "input-pipeline-bound on rank 2 only" in straggler["title"]
    loaders = [f for f in doc["findings"] if f["code"] == "input-pipeline-bound"]
    assert [f["rank"] for f in loaders] == [2]
    assert ranks[2]["collective_lag_us"] == pytest.approx(4000, abs=1)
    assert code == 0


def test_some_ranks_of_a_larger_job_say_so(tmp_path: Path, trace_json, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    """4 of a job's 8 ranks: the straggler is the latest of those given, and a later one may be among the rest."""
    from gputriage.cli import main

    folder = _job(tmp_path / "job", loader_us=[0, 0, 4000, 0], clock_offset_us=[0, 0, 0, 0], world=8)
    _, doc = trace_json(folder)
    straggler = next(f for f in doc["findings"] if f["code"] == "straggler-rank")
    assert straggler["rank"] == 2
    assert straggler["title"].endswith("input-pipeline-bound on rank 2 only (4 of the job's 8 ranks given)")
    assert (straggler["evidence"]["ranks_given"], straggler["evidence"]["world_size"]) == (4, 8)
    assert "Only 4 of the job's 8 ranks were given" in straggler["fix"]
    assert f"gputriage trace {folder}  # compares the ranks" in straggler["fix"]  # where the others go too
    capsys.readouterr()
    main(["trace", str(folder), "-v"])
    assert "per rank: 4 of the job's 8 ranks given, 4 not measured" in " ".join(capsys.readouterr().out.split())


def test_ranks_past_the_count_given_say_the_job_is_larger(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    """No trace says its world size, but rank 5 is there: ranks 1 to 4 are missing, whatever the file count."""
    folder = _job(tmp_path / "job", loader_us=[0, 4000], clock_offset_us=[0, 0])
    for rank, name in ((0, "rank-0.pt.trace.json.gz"), (5, "rank-1.pt.trace.json.gz")):
        _set_rank(folder / name, rank, world=None)
    _, doc = trace_json(folder)
    straggler = next(f for f in doc["findings"] if f["code"] == "straggler-rank")
    assert straggler["title"].endswith("(2 of the job's 6 or more ranks given)")
    assert (straggler["evidence"]["ranks_given"], straggler["evidence"]["world_size"]) == (2, None)


def test_ranks_from_two_folders_name_no_single_folder(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    folder = _job(tmp_path / "job", loader_us=[0, 4000], clock_offset_us=[0, 0], world=8)
    other = tmp_path / "other"
    other.mkdir()
    (folder / "rank-1.pt.trace.json.gz").rename(other / "rank-1.pt.trace.json.gz")
    _, doc = trace_json(folder / "rank-0.pt.trace.json.gz", other / "rank-1.pt.trace.json.gz")
    straggler = next(f for f in doc["findings"] if f["code"] == "straggler-rank")
    assert "gputriage trace ALL_RANKS_FOLDER  # the folder you put them all in" in straggler["fix"]
    assert str(other) not in straggler["fix"]


def test_a_rank_past_its_own_world_size_gives_no_count(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    folder = _job(tmp_path / "job", loader_us=[0, 0], clock_offset_us=[0, 0], world=8)
    single = folder / "rank-1.pt.trace.json.gz"
    _set_rank(single, 200, world=128)
    code, doc = trace_json(single)
    assert code == 0
    assert "ranks given" not in json.dumps(doc)


def _set_rank(path: Path, rank: int, world: int | None) -> None:
    doc = json.loads(gzip.decompress(path.read_bytes()))
    info = {"backend": "nccl", "rank": rank}
    if world is not None:
        info["world_size"] = world
    doc["distributedInfo"] = info
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))


def test_every_rank_given_says_nothing_of_the_rest(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    folder = _job(tmp_path / "job", loader_us=[0, 0, 4000, 0], clock_offset_us=[0, 0, 0, 0])
    _, doc = trace_json(folder)
    straggler = next(f for f in doc["findings"] if f["code"] == "straggler-rank")
    assert "ranks given" not in straggler["title"]
    assert (straggler["evidence"]["ranks_given"], straggler["evidence"]["world_size"]) == (4, 4)
    assert "were given" not in straggler["fix"]


def test_balanced_job_has_no_straggler(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    folder = _job(tmp_path / "job", loader_us=[0, 0], clock_offset_us=[0, 123.0])
    _, doc = trace_json(folder)
    assert "straggler-rank" not in {f["code"] for f in doc["findings"]}
    assert doc["trace"]["imbalance"]["straggler_lag_us"] == pytest.approx(0, abs=1)


def test_corpus_sampled_ranks(traces: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    _, doc = trace_json(traces / "hta/trace_filter")
    ranks = doc["trace"]["ranks"]
    assert [r["rank"] for r in ranks] == [0, 1]
    assert [round(r["busy_pct"]) for r in ranks] == [45, 47]  # MANIFEST: ~45-47% busy
    imbalance = doc["trace"]["imbalance"]
    assert imbalance["ranks"] == 2
    assert imbalance["collectives_compared"] == 10  # the ncclDevKernel_* / ncclKernel_* launches of each rank
    assert imbalance["busy_spread_pct"] == pytest.approx(abs(ranks[0]["busy_pct"] - ranks[1]["busy_pct"]), abs=1e-3)
    assert all(f["rank"] in (0, 1) for f in doc["findings"])


def test_the_ladder_names_a_code_found_on_every_rank_once(traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from gputriage.cli import main

    main(["trace", str(traces / "hta/trace_filter")])
    ladder = capsys.readouterr().out.split("The ladder", 1)[1].split("\n\n", 1)[0]
    # the same finding on both ranks is one finding, with the ranks it was seen on (as for a merged torchrun job)
    assert "low-gpu-utilization" in ladder and "low-gpu-utilization ×2" not in ladder
    assert "low-gpu-utilization, low-gpu-utilization" not in ladder


def test_folder_without_traces_is_a_clean_error(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "empty").mkdir()
    code, doc = trace_json(tmp_path / "empty")
    assert (code, doc) == (2, {})


def test_a_folder_scan_skips_gputriage_rank_records(tmp_path: Path) -> None:
    # A `run --trace` --out folder under torchrun holds the traces next to ranks/rank-NNNNN.json run records.
    from builders import training_loop

    from gputriage.tracing.multirank import trace_files

    trace = training_loop().write(tmp_path / "profiler_trace_rank0.json.gz")
    (tmp_path / "ranks").mkdir()
    (tmp_path / "ranks" / "rank-00000.json").write_text("{}")
    (tmp_path / "report.json").write_text("{}")
    assert trace_files([tmp_path]) == [trace]


REPORT = '{"schema": "gputriage.report/1", "run_schema": "gputriage.run/1"}'
RECORD = '{"schema":"gputriage.run/1","command":"run"}'


@pytest.mark.parametrize(
    ("files", "says"),
    [
        (
            {"ranks/rank-00000.json": RECORD, "ranks/rank-00001.json": RECORD},
            "ranks holds no profiler trace, only gputriage's own report files (rank-00000.json, rank-00001.json); "
            "read them with: gputriage report {tmp}",
        ),
        (
            {"out/report.json": REPORT, "out/timeline.json": '{"traceEvents": []}'},
            "out holds no profiler trace, only gputriage's own report files (report.json, timeline.json); "
            "read them with: gputriage report {tmp}/out",
        ),
        ({"out/timeline.json": "{}"}, "out holds no profiler trace, only gputriage's own report files (timeline.json)"),
    ],
)
def test_a_folder_of_gputriage_files_only_says_what_they_are(tmp_path: Path, files: dict[str, str], says: str) -> None:
    """Not "holds no trace file": the files are there, gputriage's own; and the command that reads them, where one
    does."""
    from gputriage.errors import InputError
    from gputriage.tracing.multirank import trace_files

    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    folder = tmp_path / next(iter(files)).split("/")[0]
    with pytest.raises(InputError) as raised:
        trace_files([folder])
    assert str(raised.value).endswith(says.format(tmp=tmp_path))


@pytest.mark.parametrize("names", [["ranks/rank-0.json", "ranks/rank-1.json"], ["job/report.json"]])
def test_profiler_traces_under_gputriages_own_names_are_still_traces(
    tmp_path: Path,
    trace_json,  # type: ignore[no-untyped-def]
    names: list[str],
) -> None:
    """A name is not proof: the user's own code may save its traces as ranks/rank-0.json. The first key of the file
    tells a profiler trace from gputriage's report or rank record."""
    from gputriage.tracing.multirank import trace_files

    written = []
    for rank, name in enumerate(names):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        b = TraceBuilder()
        b.meta["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": len(names)}
        b.step(0, 0.0, 1_000.0)
        b.launch(100.0, 110.0, 800.0)
        written.append(b.write(tmp_path / name))
    folder = written[0].parent
    assert trace_files([folder]) == written
    code, doc = trace_json(folder)
    assert code != 2 and sorted(r["rank"] for r in doc["trace"]["ranks"]) == list(range(len(names)))


def test_a_fifo_under_an_own_name_is_passed_over_without_blocking(tmp_path: Path) -> None:
    import os

    from builders import training_loop

    from gputriage.tracing.multirank import trace_files

    trace = training_loop().write(tmp_path / "worker0.pt.trace.json")
    os.mkfifo(tmp_path / "report.json")
    assert trace_files([tmp_path]) == [trace]


def test_a_folder_scan_does_not_enter_subfolders(tmp_path: Path, trace_json) -> None:  # type: ignore[no-untyped-def]
    from builders import training_loop

    for name in ("run-a", "run-b", "run-c"):
        (tmp_path / name).mkdir()
        training_loop(steps=3).write(tmp_path / name / "worker0.pt.trace.json")
    code, doc = trace_json(tmp_path)
    assert (code, doc) == (2, {})


def test_unrelated_traces_are_not_ranks(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from builders import training_loop

    from gputriage.cli import main

    for name in ("a.json", "b.json", "c.json"):  # three single-GPU traces, no rank anywhere
        training_loop(steps=3).write(tmp_path / name)
    assert main(["trace", str(tmp_path)]) == 2
    assert "do not say their rank" in capsys.readouterr().err


def _ranked(folder: Path, name: str, rank: int, world: int) -> None:
    from builders import training_loop

    b = training_loop(steps=3)
    b.meta["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": world}
    b.write(folder / name)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ([("x_1.1700000000001.pt.trace.json", 0, 2), ("x_1.1700000009999.pt.trace.json", 0, 2)], "rank 0 appears in 2"),
        ([("rank-0.json", 0, 2), ("rank-1.json", 1, 4)], "jobs of different sizes"),
        ([("rank-0.json", 0, 2), ("rank-5.json", 5, 2)], "outside its job's world size 2"),
    ],
)
def test_ranks_of_one_job_only(tmp_path: Path, files: list[tuple[str, int, int]], message: str) -> None:
    from gputriage.errors import InputError
    from gputriage.tracing.multirank import analyse_paths

    for name, rank, world in files:
        _ranked(tmp_path, name, rank, world)
    with pytest.raises(InputError, match=message):
        analyse_paths([tmp_path])


def test_one_job_across_hosts_is_one_job(tmp_path: Path) -> None:
    from gputriage.tracing.multirank import analyse_paths, name_pattern

    _ranked(tmp_path, "gpu-node-a_4242.1700000000001.pt.trace.json", 0, 2)
    _ranked(tmp_path, "other-host_77.1700000000123.pt.trace.json", 1, 2)
    section = analyse_paths([tmp_path], jobs=1)
    assert [r.rank for r in section.ranks] == [0, 1]
    assert name_pattern("gpu-node-a_4242.1700000000001.pt.trace.json") == "*.#.pt.trace.json"


def test_ranks_from_file_names_need_one_naming_pattern(tmp_path: Path) -> None:
    from builders import training_loop

    from gputriage.errors import InputError
    from gputriage.tracing.multirank import analyse_paths

    training_loop(steps=3).write(tmp_path / "rank-0.json")
    training_loop(steps=3).write(tmp_path / "rank-1.json")
    assert [r.rank for r in analyse_paths([tmp_path], jobs=1).ranks] == [0, 1]
    training_loop(steps=3).write(tmp_path / "trace_rank2_old.json")
    with pytest.raises(InputError, match="2 different runs"):
        analyse_paths([tmp_path])


def test_a_distributed_info_after_the_events_names_the_rank(tmp_path: Path) -> None:
    """Trial 9: `json.dump` of a loaded trace writes distributedInfo after traceEvents; a folder of such files named
    `worker0.<ts>.pt.trace.json` was refused ("no distributedInfo, no rank in the file name")."""
    from builders import training_loop

    from gputriage.tracing.multirank import analyse_paths

    for rank in (0, 1):
        doc = json.loads(training_loop(steps=3).write(tmp_path / f"w{rank}.tmp").read_text())
        doc.pop("distributedInfo", None)
        doc["distributedInfo"] = {"rank": rank, "world_size": 2}  # last: after traceEvents
        (tmp_path / f"worker{rank}.1700000000000.pt.trace.json").write_text(json.dumps(doc))
        (tmp_path / f"w{rank}.tmp").unlink()
    assert [(r.rank, r.world_size) for r in analyse_paths([tmp_path], jobs=1).ranks] == [(0, 2), (1, 2)]


def test_a_compressed_rank_beside_a_plain_one_is_the_same_run(tmp_path: Path) -> None:
    from builders import training_loop

    from gputriage.tracing.multirank import analyse_paths, name_pattern

    training_loop(steps=3).write(tmp_path / "rank-0.json")
    plain = training_loop(steps=3).write(tmp_path / "rank-1.tmp").read_bytes()
    (tmp_path / "rank-1.json.gz").write_bytes(gzip.compress(plain))
    (tmp_path / "rank-1.tmp").unlink()
    assert name_pattern("rank-1.json.gz") == name_pattern("rank-0.json")
    assert [r.rank for r in analyse_paths([tmp_path], jobs=1).ranks] == [0, 1]


def test_too_thin_names_the_rank_whose_numbers_it_quotes(tmp_path: Path) -> None:
    """Trial 9's DLRM folder: "the trace marks only 1 step (the GPU runs kernels 55.4% of it)" was rank 3's number,
    with rank 0's below it."""
    from builders import training_loop

    from gputriage.tracing.multirank import analyse_paths

    for rank, steps in ((0, 1), (1, 2)):
        b = training_loop(steps=steps, busy_share=0.6)  # a GPU 95% busy is judged from one step (no idle to hide)
        b.meta["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
        b.write(tmp_path / f"rank-{rank}.json")
    section = analyse_paths([tmp_path], jobs=1)
    said = section.unmeasured_rungs()[5]
    assert "the trace of rank 1 marks only 2 steps" in said
