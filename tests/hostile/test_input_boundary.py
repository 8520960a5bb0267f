"""The one input boundary for rank records and report.json (record/decode.py): a bad number, string, type or nesting is
one line and exit 2, or, in a job whose other ranks are fine, that rank file is left out and named; nothing read from
a file decides how much memory `report` or the merge takes."""

from __future__ import annotations

import json
import re
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from fuzz_records import WORLD_SIZE, rank_record_seeds, report_json_seeds
from gputriage import envnames
from gputriage.cli import main
from gputriage.errors import InputError
from gputriage.record import Run, run_from_dict, run_to_dict
from gputriage.record.decode import MAX_TEXT_CHARS, decode_record
from gputriage.record.merge import MAX_LISTED_MISSING, load_job

Doc = dict[str, Any]


def write_job(tmp_path: Path, change: Callable[[int, Doc], object] | None = None) -> Path:
    """The 4 rank records of the report tests' job, each passed through `change(rank, doc)` first."""
    ranks = tmp_path / "job" / "ranks"
    ranks.mkdir(parents=True)
    for rank, record in enumerate(rank_record_seeds()[0]):
        doc = json.loads(record)
        if change is not None:
            change(rank, doc)
        (ranks / f"rank-{rank:05d}.json").write_text(json.dumps(doc))
    return tmp_path / "job"


def write_raw(path: Path, doc: Doc, marker: str, token: str) -> Path:
    """`doc` as JSON with the string `marker` replaced by a raw token Python's json cannot write (1e999, NaN)."""
    path.write_text(json.dumps(doc).replace(json.dumps(marker), token))
    return path


def report_doc(index: int = 0) -> Doc:
    doc: Doc = json.loads(report_json_seeds()[index])
    return doc


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("gputriage: error: "), err
    return err


# --- malformed strings never raise ------------------------------------------------------------------------------------
@pytest.mark.parametrize("device", ["cuda:abc", "cuda:", "cuda:1:2", "cuda:-1", "cuda:99999999999999", "", "²"])
def test_a_malformed_device_on_every_rank_is_still_reported(
    device: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def set_device(rank: int, doc: Doc) -> None:
        doc["rank_info"]["device"] = device

    job = write_job(tmp_path, set_device)
    assert main(["report", str(job), "--json"]) == 0
    merged = json.loads(capsys.readouterr().out)
    assert [r["device"] for r in merged["ranks"]["ranks"]] == [device] * WORLD_SIZE


@pytest.mark.parametrize(
    ("section", "field", "value"),
    [
        ("driver", "cuda_driver_version", "nan"),
        ("driver", "cuda_driver_version", "cuda:abc"),
        ("driver", "driver_version", "²"),
        ("torch", "version", "2.²"),
        ("torch", "cuda_version", "nan"),
        ("torch", "cuda_version", "9" * 5000),
    ],
)
def test_a_version_that_is_not_one_is_still_reported(
    section: str, field: str, value: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def set_version(rank: int, doc: Doc) -> None:
        doc["environment"][section][field] = value

    assert main(["report", str(write_job(tmp_path, set_version))]) == 0
    doc = report_doc(0)
    doc["environment"][section][field] = value
    (tmp_path / "report.json").write_text(json.dumps(doc))
    assert main(["report", str(tmp_path / "report.json")]) == 0


# --- numbers out of range ---------------------------------------------------------------------------------------------
OUT_OF_RANGE = [
    (("rank_info", "world_size"), "9223372036854775808"),
    (("rank_info", "world_size"), "1" + "0" * 30),
    (("rank_info", "world_size"), "1" + "0" * 5000),
    (("created_at_s",), "1e999"),
    (("created_at_s",), "-1e999"),
    (("process", "exit_code"), "-9223372036854775809"),
    # a sixth trial: accepted and shown ("rank -1", "steps 1000000000000000000")
    (("rank_info", "rank"), "-1"),
    (("rank_info", "world_size"), "0"),
    (("rank_info", "world_size"), "-4"),
    (("steps", "steps_observed"), "1000000000000000000"),
]


@pytest.mark.parametrize(("path", "token"), OUT_OF_RANGE, ids=lambda v: str(v)[:24])
def test_a_number_out_of_range_in_report_json_is_one_line(
    path: tuple[str, ...], token: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A bare run record is read as a report is; rank 0's own record has every field these paths name.
    doc = json.loads(rank_record_seeds()[0][0])
    set_path(doc, path, "MARK")
    target = write_raw(tmp_path / "report.json", doc, "MARK", token)
    assert main(["report", str(target)]) == 2
    err = one_error_line(capsys)
    assert f"field {'.'.join(path)} is out of range" in err
    assert len(err) < 400


@pytest.mark.parametrize("token", ["NaN", "Infinity", "-Infinity"])
def test_nan_tokens_are_refused_in_one_line(token: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = report_doc(0)
    doc["created_at_s"] = "MARK"
    assert main(["report", str(write_raw(tmp_path / "report.json", doc, "MARK", token))]) == 2
    one_error_line(capsys)


def test_a_string_where_a_number_belongs_is_not_taken_for_nan(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = report_doc(0)
    doc["steps"]["steps"][0]["wall_s"] = "nan"
    (tmp_path / "report.json").write_text(json.dumps(doc))
    assert main(["report", str(tmp_path / "report.json")]) == 2
    assert "field steps.steps[0].wall_s: expected `float`, got `str`" in one_error_line(capsys)


@pytest.mark.parametrize(("path", "token"), OUT_OF_RANGE, ids=lambda v: str(v)[:24])
def test_a_rank_record_out_of_range_is_left_out_and_named(
    path: tuple[str, ...], token: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = write_job(tmp_path)
    bad = job / "ranks" / "rank-00002.json"
    doc = json.loads(bad.read_text())
    set_path(doc, path, "MARK")
    write_raw(bad, doc, "MARK", token)

    assert main(["report", str(job), "--out", str(tmp_path / "out")]) == 0
    err = capsys.readouterr().err
    assert f"left out of the merged report: {bad}: field {'.'.join(path)} is out of range" in err
    ranks = json.loads((tmp_path / "out" / "report.json").read_bytes())["ranks"]
    assert [r["rank"] for r in ranks["ranks"]] == [0, 1, 3]
    assert ranks["missing"] == [2] and ranks["unreadable"] == [str(bad)]
    assert "is out of range" in ranks["unreadable_reasons"][str(bad)]


def test_every_rank_unreadable_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def break_it(rank: int, doc: Doc) -> None:
        doc["rank_info"]["rank"] = -5

    assert main(["report", str(write_job(tmp_path, break_it))]) == 2
    err = one_error_line(capsys)
    assert "no readable rank record" in err and "rank_info.rank is out of range" in err and "3 more" in err


def test_a_huge_world_size_inside_int64_takes_no_memory(tmp_path: Path) -> None:
    def huge(rank: int, doc: Doc) -> None:
        doc["rank_info"]["world_size"] = 2**31  # the largest a record may hold (torch's ranks are 32-bit ints)

    job = write_job(tmp_path, huge)
    tracemalloc.start()
    try:
        merged = load_job([job])
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert merged is not None and merged.ranks is not None
    assert len(merged.ranks.missing) == MAX_LISTED_MISSING
    assert peak_bytes < 64 << 20  # the records are a few hundred kB; set(range(2**62)) would never finish


# --- strings, nesting, size -------------------------------------------------------------------------------------------
def test_a_string_longer_than_any_record_holds_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    doc = report_doc(0)
    doc["argv"] = ["train.py", "x" * (MAX_TEXT_CHARS + 1)]
    (tmp_path / "report.json").write_text(json.dumps(doc))
    assert main(["report", str(tmp_path / "report.json")]) == 2
    assert "field argv[1] is too long" in one_error_line(capsys)


@pytest.mark.parametrize("opener", ["[", '{"a":'])
def test_deep_nesting_is_one_line_even_with_a_raised_recursion_limit(
    opener: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    closer = "]" if opener == "[" else "}"
    doc = report_doc(0)
    doc["findings"] = "MARK"
    target = write_raw(tmp_path / "report.json", doc, "MARK", opener * 200_000 + "1" + closer * 200_000)
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)  # a job may raise it; the decoder must not follow it into the C stack
    try:
        assert main(["report", str(target)]) == 2
        assert sys.getrecursionlimit() == 100_000
    finally:
        sys.setrecursionlimit(old)
    assert "nests deeper than any gputriage record" in one_error_line(capsys)


def test_a_file_over_the_size_limit_is_refused_unread(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(envnames.MAX_RECORD_MB, "1")
    doc = report_doc(0)
    doc["padding"] = ["x" * 1000] * 2000
    (tmp_path / "report.json").write_text(json.dumps(doc))
    assert main(["report", str(tmp_path / "report.json")]) == 2
    assert f"larger than 1 MiB (1 MiB): not a gputriage record, or set {envnames.MAX_RECORD_MB}" in one_error_line(
        capsys
    )
    monkeypatch.setenv(envnames.MAX_RECORD_MB, "8")
    assert main(["report", str(tmp_path / "report.json")]) == 0


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"[1, 2]", "the top level is not an object"),
        (b'"text"', "the top level is not an object"),
        (b'{"schema": "gputriage.trace/1"}', "schema is 'gputriage.trace/1'"),
        (b'{"schema": 12}', "schema is a int"),
        (
            b'{"schema": "gputriage.report/1", "run_schema": null}',
            "field run_schema is null, expected 'gputriage.run/1'",
        ),
        (b'{"schema": "gputriage.run/1", "command": 5}', "field command: expected `str`, got `int`"),
        (b"\xff\xfe{", "is not valid JSON"),
        (b"", "is not valid JSON"),
    ],
)
def test_what_is_not_a_record_is_named(content: bytes, expected: str) -> None:
    with pytest.raises(InputError, match=r"^x\.json") as caught:
        decode_record(content, "x.json")
    assert expected in str(caught.value)


# --- the boundary accepts what gputriage writes -----------------------------------------------------------------------
@pytest.mark.parametrize("index", range(len(report_json_seeds())))
def test_every_report_gputriage_writes_reads_back(index: int) -> None:
    run = decode_record(report_json_seeds()[index], "report.json")
    assert run_from_dict(run_to_dict(run)) == run


def test_every_rank_record_gputriage_writes_reads_back() -> None:
    for job in rank_record_seeds():
        for rank, record in enumerate(job):
            run: Run = decode_record(record, f"rank-{rank}.json")
            assert run.rank_info is not None and run.rank_info.rank == rank


def set_path(doc: Doc, path: tuple[str, ...], value: object) -> None:
    node = doc
    for key in path[:-1]:
        if node.get(key) is None:
            node[key] = {}
        node = node[key]
    node[path[-1]] = value


@pytest.mark.parametrize(("field", "value"), [("index", 2**63), ("rank", -(2**63) - 1), ("wall_s", "MARK")])
def test_a_bad_value_deep_in_a_long_list_is_found(field: str, value: object) -> None:
    doc = report_doc(1)  # 60 steps
    doc["steps"]["steps"][41][field] = value
    raw = json.dumps(doc).replace('"MARK"', "1e999").encode()
    with pytest.raises(InputError, match=rf"field steps\.steps\[41\]\.{field} is out of range"):
        decode_record(raw, "report.json")


def test_a_bad_value_inside_a_list_of_a_sample_is_found() -> None:
    doc = report_doc(0)
    doc["gpu"]["devices"][0]["samples"][7]["throttle_reasons"] = ["power_cap", "x" * (MAX_TEXT_CHARS + 1)]
    raw = json.dumps(doc).encode()
    with pytest.raises(InputError, match=r"field gpu\.devices\[0\]\.samples\[7\]\.throttle_reasons\[1\] is too long"):
        decode_record(raw, "report.json")
    doc["gpu"]["devices"][0]["samples"][7]["throttle_reasons"] = None
    doc["gpu"]["job_pids"] = [1, "MARK"]
    raw = json.dumps(doc).replace('"MARK"', str(2**64)).encode()
    with pytest.raises(InputError, match=r"field gpu\.job_pids\[1\] is out of range"):
        decode_record(raw, "report.json")


@pytest.mark.parametrize(("key", "schema"), [("schema", "gputriage.report/999"), ("run_schema", "gputriage.run/2.0")])
def test_a_record_of_another_major_schema_is_refused_in_one_line(
    key: str, schema: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # a report.json of schema gputriage.report/999 was read as version 1 without a word
    doc = report_doc(0)
    doc[key] = schema
    (tmp_path / "report.json").write_text(json.dumps(doc))
    assert main(["report", str(tmp_path / "report.json")]) == 2
    err = one_error_line(capsys)
    assert f"was written for schema '{schema}'" in err


def test_a_later_minor_version_of_the_schema_is_read(tmp_path: Path) -> None:
    doc = report_doc(0)
    doc["run_schema"] = "gputriage.run/1.3"
    (tmp_path / "report.json").write_text(json.dumps(doc))
    assert main(["report", str(tmp_path / "report.json")]) in (0, 1)


def test_a_report_listing_one_trace_rank_many_times_is_refused_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 5,000 copies of rank 0's trace summary printed one finding 5,000 times (95,000 lines); `trace` refuses the same
    doc = report_doc(0)
    rank = {"rank": 0, "busy_pct": 2.0, "idle_pct": 98.0}
    doc["trace"] = {"ranks": [rank, dict(rank)]}
    (tmp_path / "report.json").write_text(json.dumps(doc))
    assert main(["report", str(tmp_path / "report.json")]) == 2
    assert "field trace.ranks lists rank 0 twice" in one_error_line(capsys)


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("steps", "steps", 41, "wall_s"), -0.5),
        (("steps", "steps_total"), -5),
        (("steps", "steps", 3, "data_wait_s"), -1e300),
    ],
    ids=["a-step-column", "a-count", "a-wait"],
)
def test_a_negative_count_duration_or_share_is_refused_in_one_line(where: tuple[object, ...], value: float) -> None:
    """A trial's report.json with `steps: -5` and a time of -1e300 was re-rendered as "the trace marks only -5
    steps" and a 300-digit negative "perform computation" time."""
    doc = report_doc(1)
    node: Any = doc
    for key in where[:-1]:
        node = node[key]
    node[where[-1]] = value
    with pytest.raises(InputError, match=r"is negative \(.*\): a count, a duration, a share or a size cannot be"):
        decode_record(json.dumps(doc).encode(), "report.json")


def test_a_point_in_time_may_be_before_zero() -> None:
    doc = report_doc(1)
    doc["steps"]["steps"][5]["start_s"] = -0.25  # a clock's reading, not a duration
    assert decode_record(json.dumps(doc).encode(), "report.json").steps is not None


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("busy_pct", 1e308, "is out of range (1e+308): a percentage here is at most 100"),
        ("busy_pct", 100.5, "is out of range (100.5): a percentage here is at most 100"),
        ("step_time_us", 1e308, "is out of range (1e+308): a duration here is at most 1e+15"),
    ],
)
def test_a_hand_edited_number_out_of_its_range_is_refused(field: str, value: float, said: str, tmp_path: Path) -> None:
    """A busy share of 1e308 printed as a 309-digit percentage in the terminal, the Markdown and `compare`."""
    doc = {"schema": "gputriage.run/1", "command": "trace", "argv": [], "trace": {"ranks": [{field: value}]}}
    path = tmp_path / "report.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match=re.escape(f"field trace.ranks[0].{field} {said}")):
        decode_record(path.read_bytes(), str(path))


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "{long}.json"],
        ["report", "{long}"],
        ["compare", "{long}", "{long}"],
        ["trace", "{trace}", "--out", "{tmp}/{long}"],
        ["report", "{trace}", "--md", "{tmp}/{long}.md"],
        ["report", "{trace}", "--html", "{tmp}/{long}.html"],
        ["run", "--out", "{tmp}/{long}", "job.py"],
    ],
)
def test_a_name_longer_than_the_file_system_allows_is_one_line_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    """A trial: any path component over 255 bytes gave OSError's traceback and exit 1."""
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": []}')
    names = {"long": "a" * 300, "tmp": str(tmp_path), "trace": str(trace)}
    assert main([part.format(**names) for part in argv]) == 2
    assert "File name too long" in one_error_line(capsys)


def test_a_loop_of_symbolic_links_is_named_as_one(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    for argv in (["trace", str(tmp_path / "a")], ["report", str(tmp_path / "a")]):
        assert main(argv) == 2
        assert "Too many levels of symbolic links" in one_error_line(capsys)


def test_a_report_json_with_a_byte_order_mark_is_read_and_a_gzipped_one_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial: both got "invalid character (byte 0)", though `trace` reads both forms."""
    import gzip

    raw = json.dumps(report_doc(0)).encode()
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + raw)
    assert main(["report", str(tmp_path / "bom.json")]) == 0
    capsys.readouterr()
    (tmp_path / "gz.json").write_bytes(gzip.compress(raw))
    assert main(["report", str(tmp_path / "gz.json")]) == 2
    assert "is gzip-compressed: decompress it (gunzip)" in one_error_line(capsys)
