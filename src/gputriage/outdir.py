"""The `--out DIR` folder protocol: every name in it, and the only way gputriage writes there or reads from it.

A report folder holds:

    DIR/report.json              the machine-readable report (the contract), also a complete saved run
    DIR/report.html, report.md   views of report.json
    DIR/timeline.json            Chrome/Perfetto trace of the run's phases and NVML samples
    DIR/profiler_trace[_rankN].json.gz   `run --trace`: torch.profiler's own trace (its own clock)
    DIR/ranks/rank-NNNNN.json    under torchrun: each rank's own record
    DIR/.merge.lock              held by the rank that merges the job's report

Every writer and reader in gputriage takes its names and paths from here, so the layout is spelled once.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from gputriage.errors import InputError

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
REPORT_MD = "report.md"
TIMELINE_JSON = "timeline.json"
# report.json first: the others are views of it.
REPORT_FILES = (REPORT_JSON, REPORT_HTML, REPORT_MD, TIMELINE_JSON)

RANKS_DIR = "ranks"
RANK_FILE_RE = re.compile(r"^rank-(\d{1,9})\.json$")
LOCK_NAME = ".merge.lock"
# A lock older than this was left by a merger that was killed; the next merger takes it over.
STALE_LOCK_S = 120.0

TRACE_STEM = "profiler_trace"
TRACE_SUFFIX = ".json.gz"
# The rank in a trace's file name: ours (`profiler_trace_rank3.json.gz`), Kineto's `host_123_rank3.pt.trace.json`, and
# the usual `rank-3.json`.
_TRACE_RANK_RE = re.compile(r"rank[-_]?(\d{1,9})", re.IGNORECASE)


# --- names ------------------------------------------------------------------------------------------------------------
def report_json(out_dir: Path) -> Path:
    return out_dir / REPORT_JSON


def rank_record_path(out_dir: Path, rank: int) -> Path:
    return out_dir / RANKS_DIR / f"rank-{rank:05d}.json"


def trace_file_name(rank: int | None) -> str:
    """The profiler trace `run --trace` writes: one file, or one per rank under torchrun."""
    return f"{TRACE_STEM}{TRACE_SUFFIX}" if rank is None else f"{TRACE_STEM}_rank{rank}{TRACE_SUFFIX}"


def trace_rank(path: Path) -> int | None:
    """The rank a trace file's name gives; None when the name says nothing."""
    match = _TRACE_RANK_RE.search(path.name)
    return int(match.group(1)) if match else None


def is_own_output(path: Path) -> bool:
    """gputriage's own --out files (the reports, the rank records), which may sit next to the traces they came from."""
    if path.name in (REPORT_JSON, TIMELINE_JSON):
        return True
    return path.parent.name == RANKS_DIR and RANK_FILE_RE.match(path.name) is not None


def rank_files(folder: Path) -> list[Path]:
    """The rank records in an --out folder (its ranks/ subfolder) or in a ranks/ folder itself."""
    base = folder / RANKS_DIR if (folder / RANKS_DIR).is_dir() else folder
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if RANK_FILE_RE.match(p.name))


def rank_of_record(path: Path) -> int | None:
    match = RANK_FILE_RE.match(path.name)
    return int(match.group(1)) if match else None


# --- writing ----------------------------------------------------------------------------------------------------------
def atomic_write(path: Path, content: bytes) -> Path:
    """Write `content` to `path` so that a reader (or a crash, or a full disk) never leaves half a file.

    The bytes go to a temporary file in the same folder, are fsynced, then renamed over the old file: the previous
    report survives intact if anything fails. A `path` that is a symlink is refused, so a planted link cannot make
    gputriage overwrite a file outside the folder.

    Raises:
        InputError: the file cannot be written (one line naming the path and the reason).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_symlink():
            raise InputError(f"refusing to write {path}: it is a symlink")
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "wb") as out:
                out.write(content)
                out.flush()
                os.fsync(out.fileno())
            tmp.replace(path)
        finally:
            with contextlib.suppress(OSError):
                tmp.unlink()
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc.strerror or exc}") from exc
    return path


# --- the merge lock ---------------------------------------------------------------------------------------------------
def acquire_lock(out_dir: Path) -> Path | None:
    """Take the merge lock, or None when another rank holds it. A lock left by a killed merger is taken over."""
    lock = out_dir / LOCK_NAME
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            with contextlib.suppress(OSError):
                if time.time() - lock.stat().st_mtime > STALE_LOCK_S:
                    lock.unlink()
                    continue
            return None
        os.write(fd, str(os.getpid()).encode())
        os.close(fd)
        return lock
    return None


def release_lock(lock: Path) -> None:
    with contextlib.suppress(OSError):
        lock.unlink()


@contextlib.contextmanager
def merge_lock(out_dir: Path) -> Iterator[Path | None]:
    """`with merge_lock(DIR) as lock:` — lock is None when another rank is merging."""
    lock = acquire_lock(out_dir)
    try:
        yield lock
    finally:
        if lock is not None:
            release_lock(lock)


# --- reading ----------------------------------------------------------------------------------------------------------
def is_regular_file(path: Path) -> bool:
    """True for a regular file (not a FIFO, device or socket, which could block a reader or never end)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


# --- checking --out before the job ------------------------------------------------------------------------------------
def check_out_dir(out_dir: Path) -> Path:
    """The --out folder, checked before the user's job starts, as an absolute path (the job may chdir).

    Refused with one line (InputError): a path that is a symlink, a path that exists and is not a folder, a folder
    gputriage cannot create or write in. The folder is created (empty) if it does not exist: the only way to know it
    can be written is to write there, before a long job runs, not after.
    """
    path = Path(os.path.abspath(out_dir))  # noqa: PTH100  (absolute, `..` folded, symlinks left as they are)
    if path.is_symlink():
        raise InputError(f"--out {out_dir}: is a symlink; give the folder it points to, or another folder")
    if path.exists() and not path.is_dir():
        raise InputError(f"--out {out_dir}: exists and is not a folder")
    probe = path / f".write-check.{os.getpid()}"
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        raise InputError(f"--out {out_dir}: cannot write there ({exc.strerror or exc})") from exc
    return path
