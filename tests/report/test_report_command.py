"""`--out DIR` writes the four report files; `gputriage report` renders them again from report.json alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from report_records import crashed_run, distributed_run, no_gpu_run, starved_run, trace_only_run

from gputriage.cli import main
from gputriage.diagnosis import diagnose
from gputriage.record import Run
from gputriage.report.output import write_files

REPORT_FILES = ["report.html", "report.json", "report.md", "timeline.json"]


def saved(run: Run, out_dir: Path) -> Path:
    """What `gputriage run --out DIR` leaves behind for this record."""
    write_files(diagnose(run), out_dir)
    return out_dir


@pytest.mark.parametrize(
    "make_run", [starved_run, no_gpu_run, crashed_run, distributed_run, trace_only_run], ids=lambda f: f.__name__
)
def test_report_re_renders_every_file_byte_for_byte(make_run: object, tmp_path: Path) -> None:
    assert callable(make_run)
    first = saved(make_run(), tmp_path / "first")
    assert sorted(p.name for p in first.iterdir()) == REPORT_FILES

    assert main(["report", str(first), "--out", str(tmp_path / "again")]) == 0

    for name in REPORT_FILES:
        assert (tmp_path / "again" / name).read_bytes() == (first / name).read_bytes(), name


def test_html_and_md_flags_write_just_those_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first = saved(starved_run(), tmp_path / "first")
    html, md = tmp_path / "share" / "r.html", tmp_path / "share" / "r.md"
    html.parent.mkdir()  # a file the user names goes into a folder that exists, as a shell's `>` does

    assert main(["report", str(first / "report.json"), "--html", str(html), "--md", str(md), "--json"]) == 0

    assert html.read_bytes() == (first / "report.html").read_bytes()
    assert md.read_bytes() == (first / "report.md").read_bytes()
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((first / "report.json").read_bytes())


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "junk.json").write_text("{not json")
    assert main(["report", str(tmp_path / "junk.json"), "--html", str(tmp_path / "x.html")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("gputriage: error:") and err.count("\n") == 1
    assert not (tmp_path / "x.html").exists()


def test_a_real_profiler_trace_gives_all_four_files_and_re_renders(
    corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """HTA's trace_diff/control trace (A100, rank 3 of 8, 6 ProfilerSteps): the kernels take most of the step."""
    trace = corpus / "traces" / "hta" / "trace_diff" / "control" / "control.json.gz"
    out = tmp_path / "out"

    assert main(["trace", str(trace), "--out", str(out)]) == 0
    capsys.readouterr()

    assert sorted(p.name for p in out.iterdir()) == REPORT_FILES
    md = (out / "report.md").read_text()
    assert "gpu->>gpu: 3. perform computation:" in md.split("rect rgb(255, 210, 210)")[1].split("end")[0]
    assert "from the profiler trace, rank 3" in md
    timeline = json.loads((out / "timeline.json").read_bytes())
    assert timeline["otherData"]["profiler_traces"] == [str(trace)]
    html = (out / "report.html").read_text()
    assert "A100" in html.split('<section id="diagrams">')[1].split("</section>")[0]

    assert main(["report", str(out), "--out", str(tmp_path / "again")]) == 0
    for name in REPORT_FILES:
        assert (tmp_path / "again" / name).read_bytes() == (out / name).read_bytes(), name
