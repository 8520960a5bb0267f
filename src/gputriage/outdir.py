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
import errno
import os
import re
import stat
import time
from collections.abc import Iterator
from pathlib import Path

from gputriage import envnames
from gputriage.errors import InputError

REPORT_JSON = "report.json"
REPORT_HTML = "report.html"
REPORT_MD = "report.md"
TIMELINE_JSON = "timeline.json"
# report.json first: the others are views of it.
REPORT_FILES = (REPORT_JSON, REPORT_HTML, REPORT_MD, TIMELINE_JSON)

RANKS_DIR = "ranks"
RANK_FILE_RE = re.compile(r"^rank-(\d{1,9})\.json$")
# The first key of a profiler trace's JSON object, where a file has one of gputriage's own names.
_TRACE_HEAD_RE = re.compile(
    rb'\A(?:\xef\xbb\xbf)?\s*\{\s*"(?:schemaVersion|traceEvents|deviceProperties|distributedInfo)"'
)
_HEAD_BYTES = 256
LOCK_NAME = ".merge.lock"
# A lock older than this was left by a merger that was killed; the next merger takes it over.
STALE_LOCK_S = 120.0

TRACE_STEM = "profiler_trace"
TRACE_SUFFIX = ".json.gz"
# The rank in a trace's file name: ours (`profiler_trace_rank3.json.gz`), Kineto's `host_123_rank3.pt.trace.json`, and
# the usual `rank-3.json`.
_TRACE_RANK_RE = re.compile(r"rank[-_]?(\d{1,9})(?!\d)", re.IGNORECASE)


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
    """gputriage's own --out files (the reports, the rank records), which may sit next to the traces they came from.

    By name, unless the file's first bytes are a profiler trace's: traces saved as `ranks/rank-0.json` or
    `report.json` by the user's own code are still traces."""
    if path.name == TIMELINE_JSON:
        return True
    named = path.name == REPORT_JSON or (path.parent.name == RANKS_DIR and RANK_FILE_RE.match(path.name) is not None)
    return named and not _starts_like_a_trace(path)


def _starts_like_a_trace(path: Path) -> bool:
    """A Kineto trace's first key is schemaVersion (or traceEvents, in other writers' traces); gputriage's report and
    rank record start with their own "schema". Not a regular file, or unreadable: not a trace (passed over, as by
    name)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))  # a FIFO must not block us
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        head = os.read(fd, _HEAD_BYTES)
    except OSError:
        return False
    finally:
        os.close(fd)
    return starts_as_a_trace(head)


def starts_as_a_trace(head: bytes) -> bool:
    """The first bytes of a file are a profiler trace's (its first key: schemaVersion, traceEvents, ...)."""
    return _TRACE_HEAD_RE.match(head) is not None


def rank_of_record(path: Path) -> int | None:
    match = RANK_FILE_RE.match(path.name)
    return int(match.group(1)) if match else None


# --- the command's inputs --------------------------------------------------------------------------------------------
# Every file this process has read as an input (a trace, a saved report, a pasted text), by its (device, inode) and
# its resolved path: no output may be written over one (`report R --md R/report.json` replaced the record it read with
# Markdown, and `trace X/report.json --out X` the trace). Each command runs once per process.
_INPUT_FILES: set[tuple[int, int]] = set()
_INPUT_PATHS: set[str] = set()
_RECORD_PATHS: set[str] = set()  # of those, the saved reports (read_record)
# Set by the CLI for its own commands (not `run`, whose job's ranks read and write each other's records by design)
_GUARDING: list[bool] = [False]


def guard_inputs(on: bool) -> None:
    """A new command starts: none of its inputs is read yet (main() may run several in one process: the tests do);
    with `on`, no output of it may replace one."""
    _INPUT_FILES.clear()
    _INPUT_PATHS.clear()
    _RECORD_PATHS.clear()
    _GUARDING[0] = on


def note_input(path: Path, info: os.stat_result) -> None:
    """`path`, opened for reading with `info`, is an input of this command."""
    _INPUT_FILES.add((info.st_dev, info.st_ino))
    with contextlib.suppress(OSError, RuntimeError, ValueError):
        _INPUT_PATHS.add(str(path.resolve()))


def _is_input(path: Path, *, whole_report: bool = False) -> bool:
    """`path` is an input of this command; with `whole_report`, a saved report.json that a whole new report set
    replaces is not counted (the record is written again, whole)."""
    if not _GUARDING[0]:
        return False
    if whole_report and path.name == REPORT_JSON:
        with contextlib.suppress(OSError, RuntimeError, ValueError):
            if str(path.resolve()) in _RECORD_PATHS:
                return False
    try:
        info = path.stat()
    except (OSError, ValueError):
        info = None
    if info is not None and (info.st_dev, info.st_ino) in _INPUT_FILES:
        return True
    try:
        return str(path.resolve()) in _INPUT_PATHS
    except (OSError, RuntimeError, ValueError):
        return False


# --- writing ----------------------------------------------------------------------------------------------------------
def atomic_write(path: Path, content: bytes, *, make_folder: bool = True) -> Path:
    """Write `content` to `path` so that a reader (or a crash, or a full disk) never leaves half a file.

    The bytes go to a new temporary file in the same folder, are fsynced, then renamed over the old file: the previous
    file survives intact if anything fails. A `path` that is a symlink is refused, so a planted link cannot make
    gputriage overwrite a file outside the folder (and the rename replaces a link raced in meanwhile, never its
    target); so is a `ranks/` folder that is a symlink.

    A file the user named (`--html FILE`) goes into a folder that exists (`make_folder=False`): a typo in its path
    must not create folders anywhere.

    Raises:
        InputError: the file cannot be written (one line naming the path and the reason).
    """
    if not make_folder and not path.parent.is_dir():
        raise InputError(f"cannot write {path}: its folder {path.parent} does not exist")
    return atomic_write_all(path.parent, {path.name: content})[0]


def _not_a_file(path: Path) -> str | None:
    """What is at `path` where a file is to be written, when it is not a regular file (a rename would replace it: a
    device node, a FIFO or a socket included); None where nothing or a regular file is there."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISDIR(mode):
        return "a folder"
    return "a FIFO" if stat.S_ISFIFO(mode) else ("a socket" if stat.S_ISSOCK(mode) else "a device")


def atomic_write_all(folder: Path, files: dict[str, bytes]) -> list[Path]:
    """Write several files of one folder as one: every temporary file is written and fsynced before any is renamed
    into place, so a full disk or a read-only folder leaves the previous set whole (not a new report.json next to an
    old report.html).

    Raises:
        InputError: one line naming the files that were not written and why; none of them was changed.
    """
    targets = [folder / name for name in files]
    try:
        _check_folder(folder)
        for path in targets:
            if _is_input(path, whole_report=REPORT_JSON in files and len(files) > 1):
                raise InputError(f"refusing to write {path}: this command reads it as an input; name another file")
            problem = _not_a_file(path)
            if problem is not None and len(targets) == 1:
                raise InputError(f"refusing to write {path}: it is {problem}")
            if problem is not None:
                raise InputError(f"refusing to write {_names(targets)}: {path.name} is {problem}; nothing was written")
    except OSError as exc:
        raise InputError(f"cannot write {_names(targets)}: {exc.strerror or exc}") from exc
    temps: list[Path] = []
    renamed = 0
    try:
        for path, content in zip(targets, files.values(), strict=True):
            temps.append(_write_temp(path, content))
        for tmp, path in zip(temps, targets, strict=True):
            tmp.replace(path)
            renamed += 1
        _sync_folder(folder)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if renamed:  # a rename failed half-way (an I/O error, a folder made meanwhile): say which files are new
            done = ", ".join(p.name for p in targets[:renamed])
            raise InputError(f"cannot write {_names(targets[renamed:])}: {reason}; {done} were written") from exc
        raise InputError(f"cannot write {_names(targets)}: {reason}; {_left_as_is(targets)}") from exc
    finally:
        for tmp in temps:
            with contextlib.suppress(OSError):
                tmp.unlink()
    return targets


def _check_folder(folder: Path) -> None:
    """Create the folder; our own `ranks/` subfolder must be a real folder, not a link to somewhere else."""
    if folder.name == RANKS_DIR and folder.is_symlink():
        raise InputError(f"refusing to write into {folder}: it is a symlink")
    folder.mkdir(parents=True, exist_ok=True)


def _write_temp(path: Path, content: bytes) -> Path:
    """A new file next to `path` (O_EXCL: never an existing file or a planted link), written and fsynced."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    for _ in range(100):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
        try:
            fd = os.open(tmp, flags, 0o644)
        except FileExistsError:
            continue
        try:
            view = memoryview(content)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                tmp.unlink()
            raise
        finally:
            os.close(fd)
        return tmp
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(path))


def _sync_folder(folder: Path) -> None:
    """The renames reach the disk too (best effort: some filesystems cannot fsync a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _left_as_is(paths: list[Path]) -> str:
    existing = [p for p in paths if p.exists()]
    if not existing:
        return "nothing was written"
    return "the earlier file is unchanged" if len(paths) == 1 else "the earlier files there are unchanged"


def _names(paths: list[Path]) -> str:
    if len(paths) == 1:
        return str(paths[0])
    return f"{', '.join(p.name for p in paths)} in {paths[0].parent}"


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
# A saved report or a rank record larger than this is refused before it is read: decoding costs several times the
# file's size in memory. A long run's record is a few MB (samples are decimated, steps are small); raise the limit with
# GPUTRIAGE_MAX_RECORD_MB for a record that really is larger.
DEFAULT_MAX_RECORD_BYTES = 64 << 20  # about 2 KB per rank in a merged report: some 30,000 ranks
_READ_CHUNK = 1 << 20


def record_limit_mb(value: str) -> int | None:
    """GPUTRIAGE_MAX_RECORD_MB's value as a number of MiB (up to 7 digits); None when it is not one."""
    return int(value) if value.isascii() and value.isdigit() and 0 < len(value) <= 7 else None


def max_record_bytes() -> int:
    limit_mb = record_limit_mb(os.environ.get(envnames.MAX_RECORD_MB, ""))
    return limit_mb << 20 if limit_mb is not None else DEFAULT_MAX_RECORD_BYTES


def is_regular_file(path: Path) -> bool:
    """True for a regular file (not a FIFO, device or socket, which could block a reader or never end)."""
    try:
        return stat.S_ISREG(path.stat().st_mode)
    except OSError:
        return False


def read_regular_file(path: Path, max_bytes: int, *, follow_symlinks: bool = True) -> bytes:
    """The bytes of a regular file, read without ever blocking.

    A FIFO, a device or a socket is refused before it is opened (opening a FIFO waits for a writer; a device may never
    end), and the open itself is non-blocking, with the type checked again on the open file, so a file swapped for a
    FIFO in between cannot block either. With `follow_symlinks=False` a symlink is refused too (O_NOFOLLOW). A file
    larger than `max_bytes` is refused without reading it all.

    Raises:
        InputError: one line naming the path and what is wrong with it.
    """
    try:
        info = path.stat() if follow_symlinks else path.lstat()
        _check_regular(path, info.st_mode)
        flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
        if not follow_symlinks:
            flags |= getattr(os, "O_NOFOLLOW", 0)
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {_reason(exc)}") from exc
    try:
        info = os.fstat(fd)
        _check_regular(path, info.st_mode)
        note_input(path, info)
        if info.st_size > max_bytes:
            raise InputError(_too_large(path, info.st_size, max_bytes))
        # One read of the whole size: a regular file gives it in one buffer, where chunks joined cost twice the file
        chunks = [os.read(fd, min(info.st_size, max_bytes) + 1)]
        size = len(chunks[0])
        while size <= max_bytes and (chunk := os.read(fd, min(_READ_CHUNK, max_bytes + 1 - size))):
            chunks.append(chunk)
            size += len(chunk)
        if size > max_bytes:  # the file grew while we read it
            raise InputError(_too_large(path, size, max_bytes))
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    except OSError as exc:
        raise InputError(f"cannot read {path}: {_reason(exc)}") from exc
    finally:
        os.close(fd)


def check_regular_file(path: Path) -> None:
    """Raise InputError unless `path` (its symlinks followed) is a regular file: opening a FIFO waits for a writer."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise InputError(f"cannot read {path}: {_reason(exc)}") from exc
    _check_regular(path, mode)


def _check_regular(path: Path, mode: int) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISLNK(mode):
        raise InputError(f"refusing to read {path}: it is a symlink")
    if stat.S_ISDIR(mode):
        raise InputError(f"cannot read {path}: it is a folder")
    kinds = (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a device"),
        (stat.S_ISBLK, "a device"),
    )
    kind = next((name for test, name in kinds if test(mode)), "not a regular file")
    raise InputError(f"refusing to read {path}: it is {kind}, not a regular file")


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "it is a symlink"
    return exc.strerror or str(exc)


def _too_large(path: Path, size: int, limit: int) -> str:
    return (
        f"{path} is larger than {limit >> 20} MiB ({size >> 20} MiB): not a gputriage record, or set "
        f"{envnames.MAX_RECORD_MB} to read it"
    )


def ranks_folder(folder: Path) -> Path | None:
    """Where the rank records of an --out folder (its ranks/ subfolder), or of a ranks/ folder itself, are; None when
    there is no such folder. The user names `folder`; a `ranks/` inside it that is a symlink would read records from
    outside it, and is refused.
    """
    inner = folder / RANKS_DIR
    try:
        mode = inner.lstat().st_mode
    except OSError:
        return folder if folder.is_dir() else None
    if stat.S_ISLNK(mode):
        raise InputError(f"refusing to read {inner}: it is a symlink (rank records are read only inside {folder})")
    return inner if stat.S_ISDIR(mode) else (folder if folder.is_dir() else None)


def rank_files(folder: Path) -> list[Path]:
    """The rank records in an --out folder (its ranks/ subfolder) or in a ranks/ folder itself, by name.

    Every name that looks like a rank record is listed, whatever its type: `read_rank_record` refuses a symlink or a
    special file, so the merge can name it as unreadable instead of skipping it silently.
    """
    base = ranks_folder(folder)
    if base is None:
        return []
    try:
        with os.scandir(base) as entries:
            return sorted(base / entry.name for entry in entries if RANK_FILE_RE.match(entry.name))
    except OSError:
        return []


def read_rank_record(path: Path) -> bytes:
    """A rank record's bytes: a regular file, not a symlink (so never a file outside the folder), never blocking."""
    return read_regular_file(path, max_record_bytes(), follow_symlinks=False)


def read_record(path: Path) -> bytes:
    """A saved report.json (or run record) that the user named: a regular file, never blocking. A whole new report
    set may be written over it (`report R --out R` re-renders the folder), never one view (`--md R/report.json`)."""
    content = read_regular_file(path, max_record_bytes())
    with contextlib.suppress(OSError, RuntimeError, ValueError):
        _RECORD_PATHS.add(str(path.resolve()))
    return content


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


def shown_path(path: Path) -> str:
    """A path as the user would type it in messages: relative to the working folder when it lies below it (the job
    may have moved its working folder: then, and outside it, the path as it is)."""
    try:
        return str(Path(os.path.abspath(path)).relative_to(Path.cwd()))  # noqa: PTH100  (symlinks as named)
    except (ValueError, OSError):
        return str(path)
