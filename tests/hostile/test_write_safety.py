"""Writes that cannot hurt: every output goes to a new temporary file in the same folder, is fsynced and renamed into
place; a symlinked output or ranks/ folder is refused; a rank record is read only as a regular file inside its folder;
and when writing fails (disk full, read-only folder) the previous report survives byte for byte, the user's exit code
is kept, and one line says what was not written. One test per case."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from report_records import crashed_run, starved_run

from fuzz_records import rank_record_seeds
from gputriage import outdir
from gputriage.cli import main
from gputriage.commands.rank_report import report_rank, write_rank_record
from gputriage.commands.run_worker import write_report
from gputriage.diagnosis import diagnose
from gputriage.errors import InputError
from gputriage.record.decode import decode_record
from gputriage.report.output import write_files

REPORT_FILES = sorted(outdir.REPORT_FILES)
REPO = Path(__file__).resolve().parents[2]


def saved_report(folder: Path) -> dict[str, bytes]:
    """A previous report in `folder`; returns its files' bytes, to compare after a failed write."""
    write_files(diagnose(starved_run()), folder)
    return snapshot(folder)


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()}


def one_line(err: str) -> str:
    assert err.count("\n") == 1 and err.startswith("gputriage: error: "), err
    return err


# --- symlinks --------------------------------------------------------------------------------------------------------
def test_a_report_file_that_is_a_symlink_is_refused_and_its_target_untouched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    before = saved_report(out)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (out / "report.md").unlink()
    (out / "report.md").symlink_to(victim)

    assert main(["report", str(out / "report.json"), "--out", str(out)]) == 2

    err = one_line(capsys.readouterr().err)
    assert "report.md is a symlink; nothing was written" in err
    assert victim.read_text() == "precious"
    assert snapshot(out) == {k: v for k, v in before.items() if k != "report.md"}


def test_an_html_or_md_target_that_is_a_symlink_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved_report(tmp_path / "out")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    link = tmp_path / "share.html"
    link.symlink_to(victim)

    assert main(["report", str(tmp_path / "out"), "--html", str(link)]) == 2

    assert one_line(capsys.readouterr().err) == f"gputriage: error: refusing to write {link}: it is a symlink\n"
    assert victim.read_text() == "precious" and link.is_symlink()


def test_an_html_or_md_target_that_is_a_fifo_or_a_device_is_refused_not_replaced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A trial replaced /dev/full (run as root) with the HTML: the rename went over a device node and FIFOs."""
    saved_report(tmp_path / "out")
    fifo = tmp_path / "pipe.html"
    os.mkfifo(fifo)

    assert main(["report", str(tmp_path / "out"), "--md", str(fifo)]) == 2
    assert one_line(capsys.readouterr().err) == f"gputriage: error: refusing to write {fifo}: it is a FIFO\n"
    assert fifo.is_fifo()

    assert main(["report", str(tmp_path / "out"), "--html", "/dev/null"]) == 2
    assert one_line(capsys.readouterr().err) == "gputriage: error: refusing to write /dev/null: it is a device\n"
    assert Path("/dev/null").is_char_device()


def test_an_html_file_in_a_folder_that_does_not_exist_makes_no_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved_report(tmp_path / "out")
    target = tmp_path / "typo" / "deeper" / "share.html"

    assert main(["report", str(tmp_path / "out"), "--html", str(target)]) == 2

    assert "does not exist" in one_line(capsys.readouterr().err)
    assert not (tmp_path / "typo").exists()


def ranks_linked_elsewhere(tmp_path: Path) -> tuple[Path, Path]:
    """An --out folder whose ranks/ is a symlink to a folder outside it; returns both."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "ranks").symlink_to(elsewhere, target_is_directory=True)
    return out, elsewhere


def test_a_ranks_folder_that_is_a_symlink_is_never_written_through(tmp_path: Path) -> None:
    out, elsewhere = ranks_linked_elsewhere(tmp_path)
    rank = decode_record(rank_record_seeds()[0][1], "rank 1")

    with pytest.raises(InputError, match=r"refusing to write into .*ranks: it is a symlink"):
        write_rank_record(rank, out)
    assert list(elsewhere.iterdir()) == []


def test_a_rank_whose_ranks_folder_is_a_symlink_keeps_the_jobs_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under torchrun the failure is one line on the rank's stderr; report_rank never raises into the job's exit."""
    out, elsewhere = ranks_linked_elsewhere(tmp_path)
    rank = decode_record(rank_record_seeds()[0][1], "rank 1")

    report_rank(rank, out, sys.stderr)

    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "it is a symlink" in err
    assert list(elsewhere.iterdir()) == []


def test_a_ranks_folder_that_is_a_symlink_is_not_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    elsewhere = tmp_path / "elsewhere"
    for rank, record in enumerate(rank_record_seeds()[0]):
        elsewhere.mkdir(exist_ok=True)
        (elsewhere / f"rank-{rank:05d}.json").write_bytes(record)
    job = tmp_path / "job"
    job.mkdir()
    (job / "ranks").symlink_to(elsewhere, target_is_directory=True)

    assert main(["report", str(job)]) == 2
    assert "ranks: it is a symlink (rank records are read only inside" in one_line(capsys.readouterr().err)


def test_a_rank_file_that_is_a_symlink_to_outside_is_not_merged(tmp_path: Path) -> None:
    job = tmp_path / "job"
    (job / "ranks").mkdir(parents=True)
    for rank, record in enumerate(rank_record_seeds()[0]):
        (job / "ranks" / f"rank-{rank:05d}.json").write_bytes(record)
    outside = tmp_path / "outside.json"
    shutil.move(job / "ranks" / "rank-00001.json", outside)
    (job / "ranks" / "rank-00001.json").symlink_to(outside)

    assert main(["report", str(job), "--out", str(tmp_path / "out")]) == 0

    ranks = json.loads((tmp_path / "out" / "report.json").read_bytes())["ranks"]
    assert [r["rank"] for r in ranks["ranks"]] == [0, 2, 3]
    link = str(job / "ranks" / "rank-00001.json")
    assert ranks["unreadable"] == [link] and ranks["unreadable_reasons"][link].endswith("it is a symlink")


# --- failed writes ---------------------------------------------------------------------------------------------------
def failing(call: Callable[..., object], err: int, *, on_temp_only: bool = False) -> Callable[..., object]:
    """`call`, raising OSError(err) instead (for a gputriage temporary file only, when asked)."""

    def fail(*args: object, **kwargs: object) -> object:
        if on_temp_only and not str(args[0]).endswith(".tmp"):
            return call(*args, **kwargs)
        raise OSError(err, os.strerror(err))

    return fail


@pytest.fixture(params=["write", "fsync"])
def disk_full(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it to make the disk full: ENOSPC from os.write (the bytes do not fit) or from os.fsync (the filesystem
    found out late)."""

    def fill() -> None:
        name = str(request.param)
        monkeypatch.setattr(os, name, failing(getattr(os, name), errno.ENOSPC))

    return fill


def test_disk_full_leaves_the_previous_report_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], disk_full: Callable[[], None]
) -> None:
    out = tmp_path / "out"
    before = saved_report(out)
    disk_full()

    assert main(["report", str(out / "report.json"), "--out", str(out)]) == 2

    err = capsys.readouterr().err
    assert err.endswith(
        f"gputriage: error: cannot write {', '.join(outdir.REPORT_FILES)} in {out}: No space left on device; "
        "the earlier files there are unchanged\n"
    )
    assert snapshot(out) == before  # byte for byte, and no temporary file left behind
    assert sorted(p.name for p in out.iterdir()) == REPORT_FILES


def test_disk_full_still_shows_the_report_in_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    saved_report(out)
    monkeypatch.setattr(os, "fsync", failing(os.fsync, errno.ENOSPC))
    assert main(["report", str(out / "report.json"), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert "gputriage verdict" in captured.out
    one_line(captured.err)


def test_a_read_only_folder_leaves_the_previous_report_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    before = saved_report(out)
    monkeypatch.setattr(os, "open", failing(os.open, errno.EROFS, on_temp_only=True))

    assert main(["report", str(out / "report.json"), "--out", str(out), "--md", str(out / "report.md")]) == 2

    err = one_line(capsys.readouterr().err)
    assert f"cannot write {out / 'report.md'}: Read-only file system; the earlier file is unchanged" in err
    assert snapshot(out) == before


def test_a_failed_rename_leaves_no_temporary_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    before = saved_report(out)
    monkeypatch.setattr(Path, "replace", failing(Path.replace, errno.EIO))
    with pytest.raises(InputError, match="Input/output error"):
        write_files(diagnose(crashed_run()), out)
    assert snapshot(out) == before and sorted(p.name for p in out.iterdir()) == REPORT_FILES


def test_a_failed_write_under_run_keeps_the_scripts_exit_code(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`gputriage run`: the report goes to stderr, then one line says what was not written; the job's code stands."""
    out = tmp_path / "out"
    before = saved_report(out)
    monkeypatch.setattr(os, "fsync", failing(os.fsync, errno.ENOSPC))

    write_report(diagnose(crashed_run()), out, sys.stderr)  # what run's report worker (or the job) does

    err = capsys.readouterr().err
    assert "gputriage verdict" in err
    assert err.splitlines()[-1].startswith("gputriage: error: cannot write report.json, ")
    assert snapshot(out) == before


@pytest.mark.slow
def test_run_with_a_planted_report_md_symlink_keeps_the_exit_code(tmp_path: Path) -> None:
    """The whole CLI: the script's own exit code (3) comes back, the link's target is untouched, one line says why."""
    script = tmp_path / "exit3.py"
    script.write_text("import sys\nprint('hi')\nsys.exit(3)\n")
    out = tmp_path / "out"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (out / "report.md").symlink_to(victim)

    done = subprocess.run(
        [sys.executable, "-m", "gputriage", "run", "--out", str(out), str(script)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )

    assert done.returncode == 3 and done.stdout == "hi\n"
    assert done.stderr.splitlines()[-1] == (
        f"gputriage: error: refusing to write report.json, report.html, report.md, timeline.json in {out}: "
        "report.md is a symlink; nothing was written"
    )
    assert victim.read_text() == "precious" and sorted(p.name for p in out.iterdir()) == ["report.md"]


# --- a real full disk and a real read-only filesystem (root only: a small tmpfs) -------------------------------------
@pytest.fixture
def small_tmpfs(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "tmpfs"
    mount.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount)], check=False, capture_output=True
    )
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {made.stderr.decode(errors='replace').strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def test_a_real_full_disk_and_a_real_read_only_mount(small_tmpfs: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = small_tmpfs / "out"
    before = saved_report(out)
    filler = small_tmpfs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:  # take every block that is left
        while os.write(fd, b"\0" * 4096):
            pass
    except OSError as exc:
        assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    assert main(["report", str(out / "report.json"), "--out", str(out)]) == 2
    assert "No space left on device; the earlier files there are unchanged" in capsys.readouterr().err
    assert snapshot(out) == before

    filler.unlink()
    subprocess.run(["mount", "-o", "remount,ro", str(small_tmpfs)], check=True)
    assert main(["report", str(out / "report.json"), "--out", str(out)]) == 2
    # refused as --out is read, before any work: a read-only folder cannot be written (the files there unchanged)
    assert f"argument --out: {out} cannot write there (Read-only file system)" in capsys.readouterr().err
    assert snapshot(out) == before


def test_a_rename_that_fails_half_way_says_which_files_are_new(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    saved_report(out)
    real_replace = Path.replace
    calls: list[Path] = []

    def third_fails(self: Path, target: Path) -> Path:
        calls.append(self)
        if len(calls) == 3:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        return real_replace(self, target)

    monkeypatch.setattr(Path, "replace", third_fails)
    with pytest.raises(InputError) as caught:
        write_files(diagnose(crashed_run()), out)
    assert str(caught.value).endswith("Input/output error; report.json, report.html were written")
    assert "cannot write report.md, timeline.json in" in str(caught.value)
    assert sorted(p.name for p in out.iterdir()) == REPORT_FILES  # no temporary file left


def test_a_folder_where_a_report_file_goes_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    out = tmp_path / "out"
    before = saved_report(out)
    (out / "report.md").unlink()
    (out / "report.md").mkdir()
    with pytest.raises(InputError, match=r"report\.md is a folder; nothing was written"):
        write_files(diagnose(crashed_run()), out)
    assert snapshot(out) == {k: v for k, v in before.items() if k != "report.md"}


def test_an_out_folder_that_cannot_be_made_is_refused_before_the_trace_is_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `trace --out /proc/x` printed its whole report, said the details were there, then failed to write them
    trace = tmp_path / "t.json"
    trace.write_text('{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1}]}')
    assert main(["trace", str(trace), "--out", "/proc/gputriage-cannot-make-this"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    said = "argument --out: /proc/gputriage-cannot-make-this cannot write there"
    assert said in captured.err and len(captured.err.splitlines()) == 1
