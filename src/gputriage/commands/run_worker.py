"""`gputriage run`'s report worker: a second interpreter that does the report's work, so the job's process waits for
as little of it as possible.

It starts with the job, before torch is imported, and ignores SIGINT and SIGTERM (the terminal's Ctrl-C and
torchrun's SIGTERM reach the job's whole process group; the job's process decides what they mean). While the job runs,
it imports the diagnosis and the renderers and probes the machine's part of rung 1 (the host, the CUDA toolkit, NVML),
none of which touches the job's CUDA state. When the job ends, the job's process sends it the record and torch's own
answers from inside the job; the worker completes rung 1, diagnoses, writes --out and prints the terminal report on
the job's stderr, or under torchrun writes the rank's record and merges the job's report. If the job's process is
killed meanwhile, the worker still finishes. When the worker cannot start or does not answer, the job's process does
all of it itself (`report_job`, the same code).

Protocol: on the worker's stdin and stdout, messages of two lengths (big-endian uint32), a JSON header, a payload (the
record as JSON).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import select
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TextIO

import msgspec

from gputriage import blas, envnames, heap
from gputriage.commands.detached import DetachedProcess, spawn_detached

if TYPE_CHECKING:
    from gputriage.diagnosis import Diagnosis
    from gputriage.record import Run
    from gputriage.record.environment import Environment

_FRAME = struct.Struct(">II")
# The worker answers within seconds; under torchrun rank 0 first waits for the other ranks' records (MERGE_WAIT_S).
REPLY_TIMEOUT_S = 120.0
NICE = 10
# How long the probe window's partial record waits for the job's final one before it is written anyway: long enough
# that a job of a few minutes never shares the machine with the report's work, short next to a real training run.
PARTIAL_WAIT_S = 60.0


class ReportRequest(msgspec.Struct):
    """What to do with a finished (or, `partial`, a still running) job's record."""

    out_dir: str
    expect_device: str | None  # for rung 1: the device the job is judged for
    fail_on: str | None = None
    multi_rank: bool = False  # under torchrun: this rank's record, merged into the job's report through files
    torch_raw: dict[str, Any] | None = None  # torch_probe.collect() from the job's process
    partial: bool = False  # the probe window's end: write the report files, print nothing
    verbose: bool = False  # -v: the whole terminal report, not the short one
    patch: str | None = None  # --patch FILE (absolute): the fixes as a unified diff
    patch_root: str | None = None  # the folder the job started in: the patch's paths are relative to it
    baseline: str | None = None  # --baseline DIR (absolute): compare with that earlier report after this one


# --- the report's work, wherever it runs ------------------------------------------------------------------------------
def report_job(run: Run, request: ReportRequest, stream: TextIO, machine: Environment | None = None) -> int:
    """Complete rung 1, then write the report (or this rank's record and the merge). Returns the --fail-on code."""
    from gputriage.collectors.env_probe import probe_environment
    from gputriage.record.device import is_preflight

    preflight = is_preflight(run)
    if run.environment is None and not preflight:  # a preflight judges the GPU machine's set-up not at all (rung 1)
        if request.torch_raw is None and machine is not None:
            from gputriage.record.environment import TorchFacts  # the worker never imports torch itself

            run.environment = probe_environment(request.expect_device, machine=machine, torch_facts=TorchFacts())
        else:
            run.environment = probe_environment(
                request.expect_device, machine=machine, torch_raw=request.torch_raw, in_process=True
            )
    out_dir = Path(request.out_dir)
    if request.multi_rank:
        from gputriage.commands.rank_report import report_rank

        report_rank(run, out_dir, stream, verbose=request.verbose)
        return 0
    from gputriage.diagnosis import diagnose

    diag = diagnose(run)
    if request.partial:
        from gputriage.report.output import write_files

        write_files(diag, out_dir)
        return 0
    write_report(diag, out_dir, stream, verbose=request.verbose)
    return close_the_loop(diag, request, stream) or fail_on_code(diag, severity_fail_on(request.fail_on), stream)


def close_the_loop(diag: Diagnosis, request: ReportRequest, stream: TextIO) -> int:
    """--patch and --baseline after the run's report; the --fail-on regression code (0 or 1)."""
    from gputriage.commands.loop import compare_with_baseline, patch_after_job

    if request.patch is not None:
        patch_after_job(diag, Path(request.patch), Path(request.patch_root or "."), stream)
    baseline = Path(request.baseline) if request.baseline is not None else None
    return compare_with_baseline(diag, baseline, request.fail_on, request.out_dir, stream)


def write_report(diag: Diagnosis, out_dir: Path, stream: TextIO, verbose: bool = False) -> None:
    """report.json and friends into out_dir, the terminal report to `stream` (the job's stderr)."""
    from gputriage.errors import InputError
    from gputriage.report.output import OutputOptions, emit

    try:
        emit(diag, OutputOptions(out_dir=out_dir, terminal_stream=stream, verbose=verbose))
    except InputError as exc:  # an unwritable --out must not replace the script's exit code
        print(f"gputriage: error: {exc}", file=stream)


def severity_fail_on(fail_on: str | None) -> str | None:
    """The --fail-on that judges findings (critical | warning); `regression` judges the compare instead."""
    return None if fail_on == "regression" else fail_on


def fail_on_code(diag: Diagnosis, fail_on: str | None, stream: TextIO) -> int:
    """--fail-on: 1 when a finding at that severity or worse exists, said in one line after the report (CI logs)."""
    from gputriage.commands.common import exit_code_for

    return exit_code_for(diag, fail_on, stream)


# --- the job's side --------------------------------------------------------------------------------------------------
class ReportWorker:
    """The job's handle on its worker process."""

    def __init__(self, proc: DetachedProcess | subprocess.Popen[bytes]) -> None:
        self._proc = proc
        self._lock = threading.Lock()
        self._broken = False

    @classmethod
    def spawn(cls, expect_device: str | None, stderr_fd: int) -> ReportWorker | None:
        """Start the worker; None where it cannot start (the job's process then does the work itself)."""
        if os.environ.get(envnames.REPORT_WORKER) == "0" or not sys.executable:
            return None
        root = str(Path(__file__).resolve().parents[2])  # the folder that holds this gputriage package
        # `-c` puts the working directory first on sys.path: replace it by the folder this gputriage came from, so
        # the worker runs this very gputriage and never a module that happens to lie where the user stands.
        boot = f"import sys; sys.path[0] = {root!r}; from gputriage.commands.run_worker import serve; serve()"
        env = dict(os.environ)
        blas.one_thread(env)  # its numpy's BLAS threads would spin beside the job's start (blas.py)
        try:
            # not the job's child: a job that reaps every child (os.wait() until ChildProcessError) would wait for it
            argv = [sys.executable, "-c", boot, json.dumps({"expect_device": expect_device})]
            proc = spawn_detached(argv, env, stderr_fd) if hasattr(os, "fork") else _child(argv, env, stderr_fd)
        except (OSError, ValueError):
            return None
        return cls(proc)

    def _intact(self) -> bool:
        return self._proc.intact() if isinstance(self._proc, DetachedProcess) else True

    def post(self, request: ReportRequest, record: bytes) -> None:
        """Send without waiting (from a thread: a large record must not block the training loop on a full pipe)."""
        threading.Thread(target=self._send, args=(request, record, False), daemon=True).start()

    def request(self, request: ReportRequest, record: bytes, timeout_s: float = REPLY_TIMEOUT_S) -> int | None:
        """Send and wait for the --fail-on code; None when the worker did not do it (then do it here)."""
        if not self._send(request, record, True):
            return None
        reply = self._read_reply(timeout_s)
        if reply is None:
            self.kill()
            return None
        code = reply.get("code")
        return code if isinstance(code, int) else None

    def close(self, wait_s: float = 2.0) -> None:
        """No more work: the worker exits once it has read the end of its input (waited for, briefly: it has
        nothing left to do, and a process that ends leaves no orphan behind)."""
        if not self._intact():  # the job closed our pipes (and may own their numbers now): end it, touch none
            self.kill()
            return
        with contextlib.suppress(OSError), self._lock:
            if self._proc.stdin is not None:
                self._proc.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._proc.wait(timeout=wait_s)

    def kill(self) -> None:
        self._broken = True
        with contextlib.suppress(OSError):
            self._proc.kill()

    def _send(self, request: ReportRequest, record: bytes, reply: bool) -> bool:
        header = json.dumps({**msgspec.structs.asdict(request), "reply": reply}).encode()
        with self._lock:
            if self._broken or self._proc.stdin is None or self._proc.stdin.closed or not self._intact():
                self._broken = True
                return False
            try:
                write_message(self._proc.stdin, header, record)
            except (OSError, ValueError):
                self._broken = True
                return False
        return True

    def _read_reply(self, timeout_s: float) -> dict[str, Any] | None:
        out = self._proc.stdout
        if out is None or not self._intact():
            return None
        deadline = time.monotonic() + timeout_s
        while True:
            left_s = deadline - time.monotonic()
            if left_s <= 0:
                return None
            try:
                ready, _, _ = select.select([out], [], [], min(left_s, 1.0))
            except InterruptedError:
                continue
            if ready:
                break
            if self._proc.poll() is not None:
                return None
        message = read_message(out)
        if message is None:
            return None
        with contextlib.suppress(ValueError):
            doc = json.loads(message[0])
            return doc if isinstance(doc, dict) else None
        return None


def write_message(stream: IO[bytes], header: bytes, payload: bytes) -> None:
    stream.write(_FRAME.pack(len(header), len(payload)) + header + payload)
    stream.flush()


def read_message(stream: IO[bytes]) -> tuple[bytes, bytes] | None:
    frame = _read_exactly(stream, _FRAME.size)
    if frame is None:
        return None
    header_len, payload_len = _FRAME.unpack(frame)
    header = _read_exactly(stream, header_len)
    payload = _read_exactly(stream, payload_len)
    if header is None or payload is None:
        return None
    return header, payload


def _read_exactly(stream: IO[bytes], size: int) -> bytes | None:
    chunks = []
    while size > 0:
        chunk = stream.read(size)
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


# --- the worker's side ------------------------------------------------------------------------------------------------
def serve() -> None:
    """The worker process: warm up while the job runs, then do each request the job sends, until its input ends."""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    heap.keep_freed_memory()  # its own process (heap.py)
    with contextlib.suppress(OSError):
        # Its warm-up and the partial record run while the job trains: on a busy machine they yield to the job.
        os.nice(NICE)
    options = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    machine: dict[str, Environment] = {}
    prober = threading.Thread(target=_probe_machine, args=(machine,), daemon=True)
    prober.start()
    _warm_up()
    # Unbuffered: whether another message is waiting must be what the pipe says, not what a buffer read ahead.
    stdin = open(sys.stdin.fileno(), "rb", buffering=0, closefd=False)  # noqa: SIM115
    stdout = sys.stdout.buffer
    message = read_message(stdin)
    while message is not None:
        header = json.loads(message[0])
        reply = bool(header.pop("reply", False))
        request = ReportRequest(**{k: v for k, v in header.items() if k in ReportRequest.__struct_fields__})
        request.expect_device = request.expect_device or options.get("expect_device")
        # The partial record waits for the job: its final record replaces it (most jobs), the end of the input (a job
        # killed by SIGKILL, or ended by os._exit) has it written at once, and a job that is still training after
        # PARTIAL_WAIT_S gets it written then. So the report's work never competes with the job's own steps.
        following = read_message(stdin) if request.partial and _input_within(stdin, PARTIAL_WAIT_S) else None
        if following is not None:
            message = following  # the job has sent its final record: the partial one is out of date
            continue
        prober.join()
        code = _serve_one(request, message[1], copy.deepcopy(machine.get("env")))
        if reply:
            write_message(stdout, json.dumps({"code": code}).encode(), b"")
        message = read_message(stdin)
    # Nothing is left to do: skip the interpreter's teardown of every module, which only delays the job's end.
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(0)


def _serve_one(request: ReportRequest, payload: bytes, machine: Environment | None) -> int:
    from gputriage.record.decode import decode_record

    try:
        run = decode_record(payload, "the job's record")
        return report_job(run, request, sys.stderr, machine)
    except Exception as exc:  # the job's exit code must never depend on the report
        with contextlib.suppress(Exception):
            print(f"gputriage: error: the report could not be written: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 0


def _probe_machine(into: dict[str, Environment]) -> None:
    from gputriage.collectors.env_probe import probe_machine

    with contextlib.suppress(Exception):  # probe_machine never raises; the thread must not print a traceback either
        into["env"] = probe_machine()


def _warm_up() -> None:
    """Do now, while the job runs, what every report needs first: import the diagnosis and the renderers, and run
    them once on an empty record (the rules' and the terminal renderer's first use builds their tables, the HTML
    page's first use compiles its template: 40-80 ms that would otherwise be added to the job's end)."""
    with contextlib.suppress(Exception):
        import io

        import gputriage.commands.rank_report  # noqa: F401
        from gputriage.diagnosis import diagnose
        from gputriage.record import Run
        from gputriage.report.output import OutputOptions, emit, report_files

        empty = diagnose(Run(command="run"))
        emit(empty, OutputOptions(terminal_stream=io.StringIO()))
        report_files(empty)  # every file of --out, not written: the HTML template's compilation is the costly part


def _input_within(stream: IO[bytes], timeout_s: float) -> bool:
    """Something (a message, or the end of the input) arrives within `timeout_s` (select retries a signal's
    interruption itself, PEP 475)."""
    with contextlib.suppress(Exception):
        ready, _, _ = select.select([stream], [], [], timeout_s)
        return bool(ready)
    return False


def _child(argv: list[str], env: dict[str, str], stderr_fd: int) -> subprocess.Popen[bytes]:
    """Where there is no fork (Windows): a plain child process."""
    return subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_fd, close_fds=True, env=env
    )
