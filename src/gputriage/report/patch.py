"""`--patch FILE`: the findings' code edits as one unified diff against the user's files.

gputriage never edits the user's files: it writes a patch that `git apply FILE` or `patch -p1 < FILE` applies from
the working directory. The edits themselves were built by the rules (`rules/edits.py`, the finding's `edits`
evidence) from the source the run recorded; here each one is checked against the file on disk before it is used:

- the file must still hold the recorded lines where the edit goes (else "file changed since the run");
- edits of one file must not overlap, and the edited file must still parse;
- a finding whose fix is not a safe edit, or an edit left out for one of these reasons, is named in a `#` comment
  above the diff (git apply and patch skip text before the first `---` line), so the patch says what it leaves as
  advice.

Only critical and warning findings are patched: an info finding is a note or a borderline measurement.
"""

from __future__ import annotations

import ast
import difflib
import stat
from collections.abc import Iterable
from pathlib import Path

import msgspec

from gputriage.diagnosis import Diagnosis
from gputriage.findings import Finding, Severity
from gputriage.record.edit import Edit
from gputriage.report.sanitize import inline_text

# A user's source file larger than this is not read (a generated file, not training code).
MAX_SOURCE_BYTES = 4 * 2**20


class Patch(msgspec.Struct):
    text: str  # the comments, then the diff of every file
    edits: int = 0  # edits in the diff
    files: list[str] = msgspec.field(default_factory=list)  # files the diff changes, as the headers name them
    advice: int = 0  # findings left as advice (named in the comments)
    left_out: int = 0  # edits that are not in the diff, each with its reason in the comments


class _FileEdits(msgspec.Struct):
    rel: str  # the path in the diff headers
    disk: Path
    edits: list[tuple[Finding, Edit]] = msgspec.field(default_factory=list)


def build_patch(diag: Diagnosis, root: Path) -> Patch:
    """The patch for the diagnosis' findings, against the files under `root` (the run's working directory)."""
    notes: list[str] = []
    by_file: dict[str, _FileEdits] = {}
    advice = 0
    patch = Patch("")
    for finding in diag.findings:
        if finding.severity is Severity.INFO:
            continue
        edits = _edits_of(finding)
        if not edits:
            if finding.fix.strip():
                advice += 1
                notes.append(f"{_name(finding)}: no safe edit; the report's fix stays advice")
            continue
        if not _covers_where(edits, finding.where):
            # the line the finding points at has no safe edit (an accumulator kept as a tensor changes what later
            # code gets): the patch covers only the fix's other lines, and says so
            notes.append(f"{_name(finding)}: no safe edit at that line; that part of the report's fix stays advice")
        for edit in edits:
            target = _target(edit, root)
            if isinstance(target, str):
                notes.append(f"{_name(finding)}: left out: {target}")
                patch.left_out += 1
                continue
            rel, disk = target
            by_file.setdefault(rel, _FileEdits(rel, disk)).edits.append((finding, edit))
    diffs: list[str] = []
    for entry in by_file.values():
        diff, used, left_out = _file_diff(entry, notes)
        patch.left_out += left_out
        if diff:
            diffs.append(diff)
            patch.files.append(entry.rel)
            patch.edits += used
    patch.advice = advice
    patch.text = _header(patch, notes, root) + "".join(diffs)
    return patch


_AT_THE_ORIGIN = frozenset({"move-index", "move-beside"})


def _covers_where(edits: list[Edit], where: str | None) -> bool:
    """Whether an edit touches the finding's own line (True where the finding names no line)."""
    path, _, line = (where or "").rpartition(":")
    if not path or not line.isdigit():
        return True
    number = int(line)
    if any(e.kind in _AT_THE_ORIGIN for e in edits):
        return True  # the edit is where the tensor is made or moved: the line that uses it needs no change
    return any(
        (e.path == path or e.path.endswith("/" + path)) and e.line <= number < e.line + max(len(e.old), 1)
        for e in edits
    )


def _name(finding: Finding) -> str:
    where = f" at {finding.where}" if finding.where else ""
    return inline_text(f"{finding.code}{where}")


def _edits_of(finding: Finding) -> list[Edit]:
    raw = finding.evidence.get("edits")
    found = [Edit.from_json(doc) for doc in raw] if isinstance(raw, list) else []
    return [e for e in found if e is not None]


def _target(edit: Edit, root: Path) -> tuple[str, Path] | str:
    """(the path for the diff headers, the file on disk), or why the edit cannot be in the patch."""
    path = Path(edit.path)
    disk = path if path.is_absolute() else root / path
    try:
        rel = disk.resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return f"{inline_text(edit.path)} is outside {inline_text(str(root))}: run from the folder that holds it"
    if not rel or any(ch.isspace() or not ch.isprintable() or ch in '"\\' for ch in rel):
        return f"{inline_text(edit.path)}: a file name a patch cannot carry"
    return rel, disk


def _read(disk: Path) -> str | None:
    """The file's text: a regular file of readable size, decoded as UTF-8; None otherwise."""
    try:
        info = disk.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_SOURCE_BYTES:
            return None
        return disk.read_bytes().decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _file_diff(entry: _FileEdits, notes: list[str]) -> tuple[str, int, int]:
    """The unified diff of one file with its edits applied, how many edits it holds and how many were left out."""
    text = _read(entry.disk)
    edits = _distinct(entry.edits)
    distinct = len(edits)
    if text is None:
        why = "not a readable UTF-8 file" if entry.disk.exists() else f"not found from {Path.cwd()}"
        notes.append(f"{entry.rel}: left out: {why} (run where the job ran)")
        return "", 0, distinct
    lines = text.splitlines(keepends=True)
    chosen: list[Edit] = []
    for finding, edit in sorted(edits, key=lambda fe: fe[1].line):
        if not _still_there(lines, edit):
            notes.append(f"{_name(finding)}: left out: {entry.rel} changed since the run (line {edit.line})")
        elif chosen and edit.line < chosen[-1].line + len(chosen[-1].old):
            notes.append(f"{_name(finding)}: left out: it overlaps another edit at line {chosen[-1].line}")
        else:
            chosen.append(edit)
    if not chosen:
        return "", 0, distinct
    new_lines = _applied(lines, chosen)
    try:
        ast.parse("".join(new_lines))
    except (SyntaxError, ValueError):
        notes.append(f"{entry.rel}: left out: the edited file would not parse")
        return "", 0, distinct
    diff = difflib.unified_diff(lines, new_lines, fromfile=f"a/{entry.rel}", tofile=f"b/{entry.rel}")
    return "".join(_terminated(diff)), len(chosen), distinct - len(chosen)


def _distinct(edits: list[tuple[Finding, Edit]]) -> list[tuple[Finding, Edit]]:
    """The file's edits, each once, with the first finding that carries it (two findings can carry the same edit)."""
    out: list[tuple[Finding, Edit]] = []
    for finding, edit in edits:
        if not any(e == edit for _, e in out):
            out.append((finding, edit))
    return out


def _still_there(lines: list[str], edit: Edit) -> bool:
    start = edit.line - 1
    found = [line.rstrip("\r\n") for line in lines[start : start + len(edit.old)]]
    return found == list(edit.old)


def _applied(lines: list[str], edits: list[Edit]) -> list[str]:
    """The file's lines with the (sorted, non-overlapping) edits applied, keeping the file's line ending."""
    ending = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    out = list(lines)
    for edit in reversed(edits):
        start = edit.line - 1
        end = start + len(edit.old)
        last = out[end - 1]
        tail = last[len(last.rstrip("\r\n")) :]  # the last line may have no newline at the end of the file
        new = [line + ending for line in edit.new]
        new[-1] = edit.new[-1] + tail
        out[start:end] = new
    return out


def _terminated(diff: Iterable[str]) -> list[str]:
    """Diff lines; a line without a newline (the file's last) gets git's "No newline at end of file" marker."""
    return [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in diff]


def _header(patch: Patch, notes: list[str], root: Path) -> str:
    lines = [
        f"# gputriage patch: {patch.edits} edit{'s' if patch.edits != 1 else ''} in "
        f"{len(patch.files)} file{'s' if len(patch.files) != 1 else ''}",
        f"# apply from {inline_text(str(root))}: git apply THIS_FILE  (or: patch -p1 < THIS_FILE)",
    ]
    if not patch.files:
        lines.append("# nothing to apply: no finding's fix is a safe code edit here")
    lines += [f"# {note}" for note in notes]
    return "\n".join(lines) + "\n"
