"""`trace` on what the seventh trial found: its report was written over the trace it read (`trace X/report.json --out
X`), and a compare's page over the trace of a side."""

from __future__ import annotations

from pathlib import Path

import pytest
from builders import training_loop

from gputriage.cli import main


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
