"""The transparency suite's cases, and how one case is run plain and under `gputriage run` and compared.

Each case is a small, seeded, real-shaped job from `jobs/`. It runs twice in the same folder (restored between the
two): `python ARGS` and `gputriage run --expect-device DEV --out OUT ARGS` (under torchrun for the DDP case). What
must be the same: the exit code or the death by signal, stdout byte for byte, stderr once gputriage's report is taken
out (tracebacks included: no frame of gputriage's, the paths Python prints), and the hash of every file the job
writes. `python tests/transparency/harness.py [CASE...]` prints the table.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

JOBS = Path(__file__).resolve().parent / "jobs"
BIN = Path(sys.executable).parent
PARALLEL = 3
TIMEOUT_S = 600
RELATIVE_OUT = "gt-out"  # the chdir case's relative --out, kept in the job's folder (and left out of its files)
# The first line of gputriage's terminal report, and the prefix of its one-line messages.
REPORT_START = ("╭─ gputriage verdict".encode(), b"gputriage verdict: ")  # boxed on a terminal, plain in a pipe
OWN_LINE = b"gputriage: "
# torch.profiler's (Kineto's) own lines carry a time and a pid: they differ from one run to the next, with or
# without gputriage.
NOISE_LINE = b"USDT:"
TRACKER = b"resource_tracker"  # the lines of multiprocessing's resource tracker's warnings, and their source lines


@dataclass
class Job:
    argv: list[str]  # after `python`, and after `gputriage run --expect-device DEV --out OUT`
    device: str = "cpu"
    report: bool = True  # gputriage leaves report.json
    torchrun: int = 0  # ranks; 0: one process
    copies: dict[str, str] = field(default_factory=dict)  # extra file name -> the job file it is a copy of
    relative_out: bool = False
    options: list[str] = field(default_factory=list)  # more `gputriage run` options (`--trace`)


CASES: dict[str, Job] = {
    "save_copy_pickle": Job(["save_copy_pickle.py"]),
    "ema_each_step": Job(["ema_each_step.py"]),
    "jit_script_trace": Job(["jit_script_trace.py"]),
    "compile_fullgraph": Job(["compiled.py"]),
    "compile_graph_break": Job(["compile_graph_break.py"]),
    "compile_torch_loss": Job(["compile_torch_loss.py"]),
    "reaps_children": Job(["reaps_children.py"]),
    "closes_fds": Job(["closes_fds.py"]),
    "strict_subclass": Job(["strict_subclass.py"]),
    "traced_scalars": Job(["traced_scalars.py"]),
    "forward_kwargs": Job(["forward_kwargs.py"]),
    "uncaught_after_window": Job(["uncaught_torch_frames.py", "resume"]),
    "uncaught_in_census": Job(["uncaught_torch_frames.py", "census"]),
    "inference_only": Job(["inference_only.py"]),
    "stepless_inference": Job(["stepless_inference.py"]),
    "orig_argv": Job(["orig_argv.py", "--lr", "0.1", "-m", "x"]),
    "trace_threads_before_torch": Job(["threads_before_torch.py"], options=["--trace"]),
    "trace_own_cprofile": Job(["own_cprofile.py"], options=["--trace"]),
    "user_function_mode": Job(["user_function_mode.py"]),
    "library_op_no_autograd": Job(["library_op_no_autograd.py"]),
    "loader_len_untouched": Job(["loader_len_untouched.py"]),
    "attrs_and_limits": Job(["attrs_and_limits.py"]),
    "listing_overrides": Job(["listing_overrides.py"]),
    "job_own_ways": Job(["job_own_ways.py"]),
    "deletes_sys_streams": Job(["deletes_sys_streams.py"]),
    "compile_probes_invisible": Job(["compile_probes_invisible.py"]),
    "parametrize_weight_norm": Job(["parametrize_weight_norm.py"]),
    "hogwild_spawn": Job(["hogwild.py"]),
    "user_hooks": Job(["user_hooks.py"]),
    "checkpoint_resume": Job(["checkpoint_resume.py"]),
    "sigterm_mid_job": Job(["signal_self.py", "SIGTERM"]),
    "sigint_mid_job": Job(["signal_self.py", "SIGINT"]),
    "sigterm_chained": Job(["sigterm_chained.py"]),
    "flops_first_step": Job(["flops_first_step.py"]),
    "env_before_torch": Job(["env_before_torch.py"]),
    "argv_not_utf8": Job(["text_not_utf8.py", "caf\udce9"]),
    "name_and_message_not_utf8": Job(["s_\udcff.py", "--raise"], copies={"s_\udcff.py": "text_not_utf8.py"}),
    "closes_stdout": Job(["closes_stdout.py"]),
    "exception_str_raises": Job(["bad_exception.py"]),
    "crash_bookkeeping": Job(["crash_bookkeeping.py"]),
    "raise_in_forward": Job(["raise_in_forward.py"]),
    "chdir_relative_out": Job(["chdir_job.py"], relative_out=True),
    "workers_fork": Job(["loader_workers.py", "fork"]),
    "workers_spawn": Job(["loader_workers.py", "spawn"]),
    "meta_stand_in": Job(["meta_job.py", "meta"], device="meta"),
    "meta_compiled_fullgraph": Job(["meta_compiled.py"], device="meta"),
    "user_profiler": Job(["profiler_user.py"]),
    "atexit_pickle_thread": Job(["atexit_pickle.py"]),
    "module_in_package": Job(["-m", "pkgjob.train", "a", "--b"]),
    "module_missing": Job(["-m", "no_such_module"], report=False),
    "folder_with_main": Job(["foldered"]),
    "torchrun_ddp": Job(["ddp_job.py"], torchrun=2),
}


@dataclass
class Observed:
    returncode: int
    stdout: bytes
    stderr: bytes  # gputriage's report taken out
    files: dict[str, str]  # path in the job's folder -> sha256, for each file the job wrote (new or changed)
    wall_s: float
    report: dict[str, Any] | None = None
    report_where: str | None = None

    def stdout_lines(self) -> list[bytes]:
        return sorted(self.stdout.splitlines())


@dataclass
class Compared:
    name: str
    plain: Observed
    traced: Observed
    differences: list[str]


def env() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONHASHSEED": "0",
        "OMP_NUM_THREADS": "1",
        "GPUTRIAGE_MERGE_WAIT_S": "10",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }


def commands(job: Job, out: Path) -> tuple[list[str], list[str]]:
    """(plain, under gputriage)."""
    out_arg = RELATIVE_OUT if job.relative_out else str(out)
    ours = ["run", "--expect-device", job.device, "--out", out_arg, *job.options, *job.argv]
    if job.torchrun:
        launch = [str(BIN / "torchrun"), "--standalone", f"--nproc_per_node={job.torchrun}"]
        return [*launch, *job.argv], [*launch, "--no-python", str(BIN / "gputriage"), *ours]
    return [sys.executable, *job.argv], [str(BIN / "gputriage"), *ours]


def prepare(job: Job, folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(JOBS, folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name, source in job.copies.items():
        shutil.copyfile(JOBS / source, folder / name)


def observe(job: Job, command: list[str], folder: Path, out: Path | None) -> Observed:
    before = _files(folder)
    start_s = time.perf_counter()
    proc = subprocess.run(command, cwd=folder, env=env(), capture_output=True, timeout=TIMEOUT_S, check=False)
    wall_s = time.perf_counter() - start_s
    written = {path: digest for path, digest in _files(folder).items() if before.get(path) != digest}
    stderr = proc.stderr
    report_dir = (folder / RELATIVE_OUT if job.relative_out else out) if out is not None else None
    if report_dir is not None and (report_dir / "report.json").exists():
        stderr = stderr.replace(terminal_report(report_dir), b"", 1)
    # plain stderr goes through it too: the noise lines are not the job's
    observed = Observed(proc.returncode, proc.stdout, without_report(stderr), written, wall_s)
    if report_dir is not None and (report_dir / "report.json").exists():
        observed.report = json.loads((report_dir / "report.json").read_bytes())
        observed.report_where = str(report_dir / "report.json")
    return observed


def terminal_report(report_dir: Path) -> bytes:
    """The terminal report gputriage printed, rendered again from report.json (the same text, at the same width):
    taken out of stderr exactly, output the job wrote after it (a thread, an atexit handler) stays."""
    done = subprocess.run(
        [str(BIN / "gputriage"), "report", str(report_dir)], capture_output=True, timeout=TIMEOUT_S, check=False
    )
    return done.stdout if done.returncode == 0 and done.stdout else b"\0"


def _files(folder: Path) -> dict[str, str]:
    found = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and "__pycache__" not in rel.parts and rel.parts[0] != RELATIVE_OUT:
            found[os.fsencode(rel).decode("utf-8", "backslashreplace")] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def without_report(stderr: bytes) -> bytes:
    """stderr with gputriage's own output taken out: its terminal report if it is still there (then it ends the
    output) and its one-line messages; and the profiler's time-stamped lines."""
    kept = []
    for line in stderr.splitlines(keepends=True):
        if line.startswith(REPORT_START):
            break
        if not line.startswith((OWN_LINE, NOISE_LINE)):
            kept.append(line)
    return b"".join(kept)


def run_case(name: str, base: Path) -> Compared:
    try:
        return _run_case(name, base)
    except Exception as exc:  # one broken case must not take the others' results with it
        empty = Observed(0, b"", b"", {}, 0.0)
        return Compared(name, empty, empty, [f"the case could not run: {type(exc).__name__}: {exc}"])


def _run_case(name: str, base: Path) -> Compared:
    job = CASES[name]
    folder, out = base / name / "job", base / name / "out"
    plain_cmd, traced_cmd = commands(job, out)
    for attempt in range(_ATTEMPTS):
        prepare(job, folder)
        plain = observe(job, plain_cmd, folder, None)
        prepare(job, folder)
        traced = observe(job, traced_cmd, folder, out)
        found = differences(job, plain, traced, folder)
        # A pair apart only by what the machine's load decides, plain or not, runs once more; a difference that
        # gputriage makes comes back on the second pair too. A baseline that crashed compared nothing: it runs again
        # up to _ATTEMPTS times (torch's gloo aborts at a DDP job's exit, "terminate called without an active
        # exception", in 2 of 5 plain runs on this machine).
        if not _load_noise(job, found, plain, traced):
            break
        if attempt >= 1 and not (_died_of_a_signal(plain) and not _died_of_a_signal(traced)):
            break
    return Compared(name, plain, traced, found)


_ATTEMPTS = 4


def _load_noise(job: Job, found: list[str], plain: Observed, traced: Observed) -> bool:
    """A plain run that died of a signal where gputriage's did not: the baseline crashed, nothing was compared.
    torchrun's agent can fail its own teardown (the rendezvous store) on a loaded machine after every rank has done
    its work: same output, only the exit code apart. Python's multiprocessing resource tracker can lose the race with
    a spawned worker's exit and warn of a "leaked semaphore" at shutdown (seen in a plain run, in CI): only those
    warnings apart."""
    if found and _died_of_a_signal(plain) and not _died_of_a_signal(traced):
        return True  # the baseline itself crashed (gloo's SIGABRT under load, seen once in a full run): no comparison
    if found and _DANGLING_PROFILER_NAME in traced.stderr and b"UnicodeDecodeError" in traced.stderr:
        # pytorch#64345: torch's profiler (with_stack) keeps raw pointers into code objects; one freed inside the
        # profiled steps leaves an undecodable name. Seen once in 4 full runs under gputriage, never alone (20 runs);
        # which code object goes is still open (closing note of stop 38). Once more; twice running is reported.
        return True
    if len(found) != 1:
        return False
    if job.torchrun and found[0].startswith("exit code"):
        return True
    return found[0].startswith("stderr differs") and _without(TRACKER, plain.stderr) == _without(TRACKER, traced.stderr)


_DANGLING_PROFILER_NAME = b"in _parse_kineto_results"


def _died_of_a_signal(observed: Observed) -> bool:
    """The process, or one of torchrun's ranks, was killed by a signal (torchrun reports a rank's as text)."""
    return observed.returncode < 0 or b"received by PID" in observed.stderr


def _without(marker: bytes, text: bytes) -> bytes:
    return b"".join(line for line in text.splitlines(keepends=True) if marker not in line)


def differences(job: Job, plain: Observed, traced: Observed, folder: Path) -> list[str]:
    found = []
    if plain.returncode != traced.returncode:
        found.append(
            f"exit code {plain.returncode} plain, {traced.returncode} under gputriage; stderr's end, plain:\n"
            f"{plain.stderr[-800:].decode(errors='replace')}\n--- under gputriage:\n"
            f"{traced.stderr[-800:].decode(errors='replace')}"
        )
    same_out = plain.stdout_lines() == traced.stdout_lines() if job.torchrun else plain.stdout == traced.stdout
    if not same_out:
        found.append(f"stdout differs:\n{plain.stdout[-1500:]!r}\n---\n{traced.stdout[-1500:]!r}")
    if not job.torchrun and plain.stderr != traced.stderr:  # torchrun interleaves the ranks' stderr
        found.append(
            f"stderr differs:\n{plain.stderr[-3000:].decode(errors='replace')}\n---\n"
            f"{traced.stderr[-3000:].decode(errors='replace')}"
        )
    if plain.files != traced.files:
        changed = sorted(k for k in set(plain.files) | set(traced.files) if plain.files.get(k) != traced.files.get(k))
        found.append(f"files differ: {changed}")
    if b"gputriage" in traced.stderr or b"gputriage" in traced.stdout:
        found.append("gputriage shows in the job's own output (a frame in a traceback?)")
    if job.report and traced.report is None:
        found.append("no report.json")
    if job.relative_out and traced.report_where is not None and "run1" in traced.report_where:
        found.append("the relative --out followed the script's chdir")
    return found


def run_cases(names: list[str], base: Path) -> dict[str, Compared]:
    # the slowest first (spawned workers and torchrun import torch several times), so they overlap the rest
    slow = ("hogwild_spawn", "workers_spawn", "torchrun_ddp", "compile_fullgraph", "compile_torch_loss")
    order = sorted(names, key=lambda n: n not in slow)
    with ThreadPoolExecutor(PARALLEL) as pool:
        futures = {name: pool.submit(run_case, name, base) for name in order}
        return {name: futures[name].result() for name in names}


def ending(observed: Observed) -> str:
    return f"signal {-observed.returncode}" if observed.returncode < 0 else f"exit {observed.returncode}"


def table(results: dict[str, Compared]) -> str:
    rows = [f"{'case':28s} {'plain':>10s} {'gputriage':>10s}  {'wall plain/ours':>16s}  same?  report"]
    for name, r in results.items():
        report = "yes" if r.traced.report is not None else "-"
        walls = f"{r.plain.wall_s:5.1f}/{r.traced.wall_s:5.1f} s"
        same = "yes" if not r.differences else "NO"
        rows.append(
            f"{name:28s} {ending(r.plain):>10s} {ending(r.traced):>10s}  {walls:>16s}  {same:5s}  {report}"
            f"  ({len(r.plain.files)} files written)"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    import tempfile

    chosen = sys.argv[1:] or list(CASES)
    with tempfile.TemporaryDirectory() as tmp:
        results = run_cases(chosen, Path(tmp))
    print(table(results))
    for name, r in results.items():
        for diff in r.differences:
            print(f"\n[{name}] {diff}")
