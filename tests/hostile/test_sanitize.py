"""Terminal injection: every string from a file or from the user's job reaches the terminal, report.md and the Mermaid
blocks with its control characters shown, not sent; report.json keeps it exact."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from report_records import diagnosis_with, distributed_run, injected_finding, starved_run, trace_only_run
from rich.console import Console

from gputriage.cli import main
from gputriage.diagnosis import diagnose
from gputriage.record import Run
from gputriage.record.gpu import GpuProcess
from gputriage.record.process import ProcessSection
from gputriage.report import terminal
from gputriage.report.diagrams import build_relationship, build_sequence
from gputriage.report.document import build_document
from gputriage.report.live import print_frame
from gputriage.report.markdown import render_markdown
from gputriage.report.mermaid import relationship_mermaid, sequence_mermaid
from gputriage.report.output import write_files
from gputriage.report.sanitize import clean_tree, inline_text, terminal_text

EVIL = "aten::copy_\x1b]0;evil\x07\x1b[2J\x9b31m\u202eexe"
SHOWN = "aten::copy_\\x1b]0;evil\\x07\\x1b[2J\\x9b31m\\u202eexe"


def evil_run() -> Run:
    """Every kind of string that comes from a file or the job, carrying terminal escapes."""
    run = starved_run()
    run.argv = ["train.py", EVIL]
    run.expect_device = f"cuda:{EVIL}"
    assert run.steps is not None and run.steps.loader is not None and run.placement is not None and run.gpu
    run.steps.loader.dataset_class = EVIL
    run.placement.models[0].name = EVIL
    run.process = ProcessSection(exit_code=1, exception_type=EVIL, exception_message=EVIL, crash_where=f"{EVIL}:3")
    run.gpu.devices[0].name = EVIL
    run.gpu.devices[0].processes = [GpuProcess(pid=7, command=EVIL, is_job=True, role=EVIL)]
    run.trace = trace_only_run(path=EVIL).trace
    assert run.trace is not None
    run.trace.ranks[0].device = EVIL
    return run


def control_characters(text: str) -> list[str]:
    return sorted({ch for ch in text if ch not in "\n\t" and (ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F)})


def test_terminal_text_shows_controls_and_keeps_layout() -> None:
    assert terminal_text(EVIL) == SHOWN
    assert terminal_text("a\nb\tc") == "a\nb\tc"
    assert inline_text("a\nb\tc") == "a\\x0ab\\x09c"
    assert terminal_text("µs · ✓ 日本 🙂 ä") == "µs · ✓ 日本 🙂 ä"  # printable text of any script is untouched
    assert terminal_text(terminal_text(EVIL)) == terminal_text(EVIL)  # idempotent: safe to apply twice
    assert control_characters(terminal_text("".join(map(chr, range(0x100))))) == []


def test_clean_tree_copies_only_what_it_cleans() -> None:
    clean = starved_run()
    assert clean_tree(clean) is clean

    run = evil_run()
    cleaned = clean_tree(run)
    assert cleaned.argv == ["train.py", SHOWN] and run.argv == ["train.py", EVIL]  # the record itself is untouched
    assert cleaned.steps is not None and run.steps is not None
    assert cleaned.steps.steps is run.steps.steps  # 40 steps hold only numbers: not even looked at one by one


def render_terminal(run: Run, *, force_terminal: bool) -> str:
    stream = io.StringIO()
    diag = diagnose(run)
    diag.findings.append(injected_finding())
    colours = "truecolor" if force_terminal else None  # without a terminal rich writes no style codes at all
    terminal.render(diag, Console(file=stream, width=120, force_terminal=force_terminal, color_system=colours))
    return stream.getvalue()


def test_terminal_report_sends_no_escape_from_the_record() -> None:
    plain = render_terminal(evil_run(), force_terminal=False)
    assert control_characters(plain) == []
    assert "\\x1b]0;evil" in plain  # shown, so the reader sees what was there

    styled = render_terminal(evil_run(), force_terminal=True)  # rich's own colours are there; the record's are not
    for sequence in ("\x1b]0;evil", "\x1b[2J", "\x07", "\x9b", "\u202e"):
        assert sequence not in styled


def test_markdown_and_mermaid_show_escapes_as_text() -> None:
    diag = diagnose(evil_run())
    md = render_markdown(diag)
    assert control_characters(md) == []
    assert "\u202e" not in md
    assert "x1b" in md

    for block in (relationship_mermaid(build_relationship(diag.run)), sequence_mermaid(build_sequence(diag.run))):
        assert control_characters(block) == []


def test_the_json_keeps_every_string_exact(tmp_path: Path) -> None:
    diag = diagnose(evil_run())
    write_files(diag, tmp_path)
    doc = json.loads((tmp_path / "report.json").read_bytes())
    assert doc["argv"] == ["train.py", EVIL]
    assert doc["gpu"]["devices"][0]["name"] == EVIL
    assert build_document(diag)["process"]["exception_message"] == EVIL
    assert control_characters((tmp_path / "report.md").read_text()) == []


def test_the_live_view_sends_no_escape() -> None:
    run = evil_run()
    assert run.gpu is not None
    stream = io.StringIO()
    print_frame(run.gpu, {0: f"idle while {EVIL} holds 1 GiB"}, stream, width=120, findings=[injected_finding()])
    assert control_characters(stream.getvalue()) == []
    compact = distributed_run()
    assert compact.gpu is not None
    compact.gpu.devices[1].name = EVIL
    stream = io.StringIO()
    print_frame(compact.gpu, {}, stream, width=160)
    assert control_characters(stream.getvalue()) == []


def test_report_command_on_a_saved_hostile_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_files(diagnosis_with(evil_run(), [injected_finding()]), tmp_path)
    assert main(["report", str(tmp_path), "--md", str(tmp_path / "again.md")]) == 0
    out = capsys.readouterr()
    assert control_characters(out.out) == [] and control_characters(out.err) == []
    assert control_characters((tmp_path / "again.md").read_text()) == []


def test_the_error_line_shows_a_hostile_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x\x1b[2J.json"
    bad.write_text("{")
    assert main(["report", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and control_characters(err) == []
    assert "x\\x1b[2J.json" in err


@pytest.mark.parametrize("command", ["trace", "report", "compare"])
def test_a_missing_path_with_escape_sequences_in_its_name_is_shown_not_interpreted(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = "evil\x1b[31mRED\x1b]0;pwn\x07"
    argv = [command, name] + ([name] if command == "compare" else [])
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err
    assert "evil\\x1b[31mRED" in err and "does not exist" in err
