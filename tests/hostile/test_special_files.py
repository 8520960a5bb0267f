"""Special files (FIFOs, devices, sockets, folders) given as report.json or as a rank file are refused, and nothing is
opened in a way that can block: a FIFO with no writer would hang `report`, or a merging torchrun rank, forever."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from fuzz_records import WORLD_SIZE, rank_record_seeds, report_json_seeds
from gputriage import outdir
from gputriage.cli import main
from gputriage.commands.rank_report import finish_rank
from gputriage.errors import InputError
from gputriage.record.decode import decode_record

# Generous: the refusal takes milliseconds; a blocked open never returns at all.
HANG_S = 60


def write_job(folder: Path) -> Path:
    ranks = folder / "ranks"
    ranks.mkdir(parents=True)
    for rank, record in enumerate(rank_record_seeds()[0]):
        (ranks / f"rank-{rank:05d}.json").write_bytes(record)
    return folder


def report_cli(*args: str) -> subprocess.CompletedProcess[str]:
    """The CLI in its own process, so a hang fails this test after HANG_S instead of stopping the whole run."""
    return subprocess.run(
        [sys.executable, "-m", "gputriage", "report", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=HANG_S,
    )


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "report.json"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind(str(path))
    except OSError as exc:  # a path too long for AF_UNIX on this machine
        pytest.skip(f"cannot bind a unix socket here: {exc}")
    server.listen(1)
    yield path
    server.close()


def test_a_fifo_as_report_json_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    done = report_cli(str(fifo))
    assert done.returncode == 2
    assert done.stderr == f"gputriage: error: refusing to read {fifo}: it is a FIFO, not a regular file\n"
    done = report_cli(str(tmp_path))  # the folder that holds it: the same file, the same answer
    assert done.returncode == 2 and "it is a FIFO" in done.stderr


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_a_device_as_report_json_is_refused(device: str, capsys: pytest.CaptureFixture[str]) -> None:
    if not Path(device).exists():
        pytest.skip(f"{device} is not there")
    assert main(["report", device]) == 2
    assert (
        capsys.readouterr().err == f"gputriage: error: refusing to read {device}: it is a device, not a regular file\n"
    )


def test_a_socket_as_report_json_is_refused(unix_socket: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(unix_socket)]) == 2
    assert "it is a socket, not a regular file" in capsys.readouterr().err


def test_a_folder_named_report_json_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "report.json").mkdir()
    assert main(["report", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"gputriage: error: cannot read {tmp_path / 'report.json'}: it is a folder\n"


def test_a_fifo_as_a_rank_file_is_left_out_and_named(tmp_path: Path) -> None:
    job = write_job(tmp_path / "job")
    fifo = job / "ranks" / "rank-00001.json"
    fifo.unlink()
    os.mkfifo(fifo)
    done = report_cli(str(job), "--json")
    assert done.returncode == 0, done.stderr
    ranks = json.loads(done.stdout)["ranks"]
    assert [r["rank"] for r in ranks["ranks"]] == [0, 2, 3] and ranks["unreadable"] == [str(fifo)]
    assert "it is a FIFO" in ranks["unreadable_reasons"][str(fifo)]
    assert done.stderr.count("\n") == 1 and "left out of the merged report" in done.stderr


def test_a_merging_rank_does_not_block_on_a_fifo(tmp_path: Path) -> None:
    """Rank 0 of a torchrun job merges what it finds; a FIFO among the rank files must not stop it."""
    out = tmp_path / "out"
    (out / "ranks").mkdir(parents=True)
    os.mkfifo(out / "ranks" / "rank-00003.json")
    own = decode_record(rank_record_seeds()[0][0], "rank 0")
    for rank in (1, 2):
        (out / "ranks" / f"rank-{rank:05d}.json").write_bytes(rank_record_seeds()[0][rank])

    outcome = finish_rank(own, out, wait_s=0.0)

    assert outcome.report_path == out / "report.json"
    ranks = json.loads((out / "report.json").read_bytes())["ranks"]
    assert [r["rank"] for r in ranks["ranks"]] == [0, 1, 2] and len(ranks["unreadable"]) == 1
    assert ranks["world_size"] == WORLD_SIZE


def test_a_file_swapped_for_a_fifo_after_the_check_cannot_block(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The type is checked before the open, and again on the open file; the open itself does not wait for a writer."""
    fifo = tmp_path / "report.json"
    os.mkfifo(fifo)
    checks: list[int] = []
    real_check = outdir._check_regular

    def first_check_passes(path: Path, mode: int) -> None:
        checks.append(mode)
        if len(checks) > 1:
            real_check(path, mode)

    monkeypatch.setattr(outdir, "_check_regular", first_check_passes)
    with pytest.raises(InputError, match="it is a FIFO"):
        outdir.read_regular_file(fifo, 1 << 20)
    assert len(checks) == 2


def test_a_file_that_grows_past_the_limit_while_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "report.json"
    path.write_bytes(report_json_seeds()[0])
    real_fstat = os.fstat

    def says_small(fd: int) -> os.stat_result:
        info = real_fstat(fd)
        return os.stat_result((info.st_mode, *info[1:6], 10, *info[7:]))  # st_size read before the file grew

    monkeypatch.setattr(os, "fstat", says_small)
    with pytest.raises(InputError, match="larger than 0 MiB"):
        outdir.read_regular_file(path, 1000)
