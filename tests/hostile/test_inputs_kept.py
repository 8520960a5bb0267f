"""No output is written over an input of the same command: `report R --md R/report.json` replaced the record it read
with Markdown, `compare A B --html B/report.json` the side it compared (the seventh trial's P1; the trace's case is
in tests/trace/test_seventh_trial.py). A whole report set written over the record it was read from (`report R --out
R`) is the record saved again, and allowed. A folder the file system refuses is one line, not a traceback (P2). A
trace's C1 and bidirectional controls are escaped in every JSON gputriage writes (P3)."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import pytest
from report_records import starved_run

from gputriage.cli import main
from gputriage.diagnosis import diagnose
from gputriage.report.output import write_files
from gputriage.textsafe import encode_safely


def saved(folder: Path) -> bytes:
    write_files(diagnose(starved_run()), folder)
    return (folder / "report.json").read_bytes()


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("gputriage: error: "), err
    return err


@pytest.mark.parametrize("view", ["--md", "--html", "--patch"])
def test_a_view_is_never_written_over_the_record_it_renders(
    view: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = saved(tmp_path / "r")
    capsys.readouterr()
    assert main(["report", str(tmp_path / "r"), view, str(tmp_path / "r" / "report.json")]) == 2
    assert "this command reads it as an input" in one_line(capsys.readouterr().err)
    assert (tmp_path / "r" / "report.json").read_bytes() == record


def test_a_hard_link_to_the_record_is_the_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record = saved(tmp_path / "r")
    (tmp_path / "alias.json").hardlink_to(tmp_path / "r" / "report.json")
    assert main(["report", str(tmp_path / "alias.json"), "--md", str(tmp_path / "r" / "report.json")]) == 2
    assert (tmp_path / "r" / "report.json").read_bytes() == record


def test_compare_never_writes_its_page_over_a_side(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved(tmp_path / "a")
    after = saved(tmp_path / "b")
    capsys.readouterr()
    assert (
        main(["compare", str(tmp_path / "a"), str(tmp_path / "b"), "--html", str(tmp_path / "b" / "report.json")]) == 2
    )
    one_line(capsys.readouterr().err)
    assert (tmp_path / "b" / "report.json").read_bytes() == after


def test_a_report_folder_rendered_again_into_itself_is_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved(tmp_path / "r")
    assert main(["report", str(tmp_path / "r"), "--out", str(tmp_path / "r")]) == 0
    assert json.loads((tmp_path / "r" / "report.json").read_bytes())["schema"]


def test_a_folder_the_file_system_refuses_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """As root the tests cannot lose the permission; the listing raises what a folder without read permission does."""
    folder = tmp_path / "locked"
    folder.mkdir()

    def refused(self: Path) -> object:
        raise PermissionError(errno.EACCES, "Permission denied", str(self))

    monkeypatch.setattr(Path, "iterdir", refused)
    assert main(["trace", str(folder)]) == 2
    assert one_line(capsys.readouterr().err) == f"gputriage: error: cannot access {folder}: Permission denied\n"


def test_terminal_controls_are_escaped_in_json() -> None:
    encoded = encode_safely({"name": "k\u009b31m\u202egnp.exe\u2066é中"})
    assert b"\xc2\x9b" not in encoded and b"\xe2\x80\xae" not in encoded and b"\xe2\x81\xa6" not in encoded
    assert b"\\u009b" in encoded and b"\\u202e" in encoded
    assert json.loads(encoded)["name"] == "k\u009b31m\u202egnp.exe\u2066é中"


@pytest.mark.parametrize("second", ["--html", "--patch"])
def test_two_views_are_never_written_to_one_file(
    second: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Trial 8: `report R --md F --html F` wrote both, the Markdown over the HTML, exit 0."""
    saved(tmp_path / "r")
    capsys.readouterr()
    assert main(["report", str(tmp_path / "r"), "--md", str(tmp_path / "v.out"), second, str(tmp_path / "v.out")]) == 2
    assert "is named for two outputs" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "v.out").exists()
