"""The report worker holds the probe window's partial record: the job's final record replaces it, the end of the
job's input (a job killed by SIGKILL or ended by os._exit) has it written at once, and a job still training after
PARTIAL_WAIT_S has it written then. Driven through the worker's real protocol on pipes, in a real worker process."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import msgspec

from gputriage.commands.run_worker import ReportRequest, read_message, write_message
from gputriage.record import Run
from gputriage.record.process import ProcessSection
from gputriage.textsafe import encode_safely

SRC = str(Path(__file__).resolve().parents[2] / "src")


def start_worker(partial_wait_s: float) -> subprocess.Popen[bytes]:
    boot = (
        f"import sys; sys.path[0] = {SRC!r}; import gputriage.commands.run_worker as w; "
        f"w.PARTIAL_WAIT_S = {partial_wait_s}; w.serve()"
    )
    return subprocess.Popen(
        [sys.executable, "-c", boot, json.dumps({"expect_device": "cpu"})],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def send(worker: subprocess.Popen[bytes], request: ReportRequest, run: Run, reply: bool = False) -> None:
    assert worker.stdin is not None
    write_message(
        worker.stdin, json.dumps({**msgspec.structs.asdict(request), "reply": reply}).encode(), encode_safely(run)
    )
    worker.stdin.flush()


def report_of(out: Path, timeout_s: float = 60.0) -> dict[str, object] | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if (out / "report.json").exists():
            return json.loads((out / "report.json").read_bytes())  # type: ignore[no-any-return]
        time.sleep(0.1)
    return None


def partial(out: Path) -> ReportRequest:
    return ReportRequest(out_dir=str(out), expect_device="cpu", partial=True)


def test_the_final_record_replaces_the_partial_one_unwritten(tmp_path: Path) -> None:
    worker = start_worker(partial_wait_s=30.0)
    send(worker, partial(tmp_path), Run(command="run"))
    final = Run(command="run")
    final.process = ProcessSection(exit_code=0, target="train.py")
    send(worker, ReportRequest(out_dir=str(tmp_path), expect_device="cpu"), final, reply=True)
    assert worker.stdout is not None
    reply = read_message(worker.stdout)
    assert reply is not None and json.loads(reply[0]) == {"code": 0}
    doc = report_of(tmp_path)
    assert doc is not None and doc["process"] is not None  # the final record's report, and only it
    assert worker.stdin is not None
    worker.stdin.close()
    assert worker.wait(timeout=30) == 0


def test_the_partial_record_is_written_when_the_job_dies(tmp_path: Path) -> None:
    worker = start_worker(partial_wait_s=30.0)
    send(worker, partial(tmp_path), Run(command="run"))
    time.sleep(2.5)  # past the worker's warm-up: a partial record served at once would be written by now
    assert not (tmp_path / "report.json").exists()  # held while the job may still send its final record
    assert worker.stdin is not None
    worker.stdin.close()  # what SIGKILL or os._exit does to the pipe
    doc = report_of(tmp_path)
    assert doc is not None and doc["process"] is None
    assert worker.wait(timeout=30) == 0


def test_the_partial_record_is_written_while_a_long_job_still_trains(tmp_path: Path) -> None:
    worker = start_worker(partial_wait_s=0.5)
    send(worker, partial(tmp_path), Run(command="run"))
    doc = report_of(tmp_path)  # the input stays open: the job is still training
    assert doc is not None and doc["process"] is None
    assert worker.stdin is not None
    worker.stdin.close()
    assert worker.wait(timeout=30) == 0
