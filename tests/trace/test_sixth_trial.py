"""What a sixth trial on real traces found: cuDNN's algorithm search read as a sync in the loop."""

from __future__ import annotations

from pathlib import Path

from builders import training_loop


def test_waits_inside_cudnns_algorithm_search_are_a_one_time_note_not_a_loop_warning(
    tmp_path: Path, trace_json
) -> None:  # type: ignore[no-untyped-def]
    """A kineto sample (V100): 357 of 373 cudaEventSynchronize calls inside aten::cudnn_convolution*, all in the
    first iteration, drew a warning whose fix was `.item()` / `.cpu()` every N steps, calls the script never made."""
    b = training_loop(sync_idle_us=2500)
    for event in b.events:
        if event["name"] == "aten::item":
            event["name"] = "aten::cudnn_convolution"
        elif event["name"] == "cudaStreamSynchronize":
            event["name"] = "cudaEventSynchronize"
    _, doc = trace_json(b.write(tmp_path / "autotune.json"))
    found = [f for f in doc["findings"] if f["code"] == "host-sync-in-loop"]
    assert [f["severity"] for f in found] == ["info"]
    assert "cuDNN's algorithm search" in found[0]["title"]
    assert found[0]["evidence"]["autotune_pct"] == 100.0
    assert ".item()" not in found[0]["fix"] and "schedule(wait=1" in found[0]["fix"]
    # the same waits in the user's own read stay a warning
    _, plain = trace_json(training_loop(sync_idle_us=2500).write(tmp_path / "item.json"))
    assert [f["severity"] for f in plain["findings"] if f["code"] == "host-sync-in-loop"] == ["warning"]


def test_two_traces_concatenated_are_refused_not_halved(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """`cat a.json b.json` (or two gzip members): exit 0 with the second trace's events silently dropped, under a
    note about "keys after traceEvents"."""
    import gzip

    from gputriage.cli import main

    one = training_loop().write(tmp_path / "one.json").read_bytes()
    for name, raw in (("two.json", one + b"\n" + one), ("two.json.gz", gzip.compress(one) + gzip.compress(one))):
        (tmp_path / name).write_bytes(raw)
        for jobs in ("1", "2"):
            assert main(["trace", "--jobs", jobs, str(tmp_path / name)]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and "holds a second JSON document after the first" in err


def test_a_trace_of_a_million_streams_keeps_a_bounded_state_per_stream(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """A trial: 3M kernels, each on its own stream (a 27 MB .json.gz), took 1 GB: the first kernel of every stream
    was kept, though only 4,096 streams are reported. Here with the bound made small, and many streams."""
    from builders import TraceBuilder

    from gputriage.cli import main
    from gputriage.tracing import analysis

    monkeypatch.setattr(analysis, "MAX_FIRST_SEEN", 8)
    monkeypatch.setattr(analysis, "MAX_STREAMS", 4)
    seen: list[int] = []
    add = analysis.IdleByStream.add

    def counting(self, w):  # type: ignore[no-untyped-def]
        add(self, w)
        seen.append(len(self.first_seen))

    monkeypatch.setattr(analysis.IdleByStream, "add", counting)
    b = TraceBuilder()
    for i in range(300):
        b.launch(i * 10.0, i * 10.0 + 2, 1.0)
        b.events[-1]["args"]["stream"] = b.events[-1]["tid"] = 100 + i
    assert main(["trace", "--jobs", "1", str(b.write(tmp_path / "streams.json"))]) == 0
    assert seen and max(seen) <= 8
    assert "only the first 4 streams are listed one by one" in capsys.readouterr().err


def test_a_distributed_info_with_a_rank_out_of_range_is_named_as_such(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from gputriage.cli import main

    raw = training_loop().write(tmp_path / "t.json").read_text()
    (tmp_path / "r.json").write_text(
        raw.replace('"schemaVersion": 1', '"schemaVersion": 1, "distributedInfo": {"rank": 1e400}', 1)
    )
    assert main(["trace", str(tmp_path / "r.json")]) == 0
    err = capsys.readouterr().err
    assert "distributedInfo holds a value out of range or of the wrong type" in err and "not an object" not in err


def test_a_share_under_a_twentieth_of_a_percent_is_not_written_as_zero() -> None:
    """A trial: "the GPU runs kernels only 0.0% of the steps' time" beside busy_pct_of_steps 0.033."""
    from gputriage.record.numbers import pct_text

    assert [pct_text(v) for v in (0.033, 0.0, 0.05, 30.84)] == ["0.03%", "0.0%", "0.1%", "30.8%"]


def test_a_report_with_more_events_dropped_than_held_is_refused(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    import json

    from gputriage.cli import main

    trace = training_loop().write(tmp_path / "t.json")
    assert main(["trace", str(trace), "--out", str(tmp_path / "out")]) == 0
    doc = json.loads((tmp_path / "out" / "report.json").read_text())
    rank = doc["trace"]["ranks"][0]
    rank["events_dropped"] = rank["events"] + 1
    (tmp_path / "edited.json").write_text(json.dumps(doc))
    capsys.readouterr()
    assert main(["report", str(tmp_path / "edited.json")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "events_dropped is out of range" in err


def test_a_tar_archive_is_named_as_one(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """A trial: "starts with b't'" (the first byte of the member's name) for a tar file named .json."""
    import tarfile

    from gputriage.cli import main

    inner = training_loop().write(tmp_path / "trace.json")
    with tarfile.open(tmp_path / "packed.json", "w") as tar:
        tar.add(inner, arcname="trace.json")
    assert main(["trace", str(tmp_path / "packed.json")]) == 2
    assert "is a tar archive, not a PyTorch profiler trace" in capsys.readouterr().err


def test_a_share_just_under_a_hundred_is_not_written_as_a_hundred() -> None:
    """Trial 11: DeepSeek's 99.615% busy window read "busy/window 100%" (a GPU never idle)."""
    from gputriage.report.fmt import percent

    assert [percent(v) for v in (99.615, 99.96, 100.0, 99.4)] == ["99.6%", "99.9%", "100%", "99%"]
