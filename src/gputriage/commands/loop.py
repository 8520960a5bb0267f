"""Closing the loop from `run` and `report`: `--patch FILE` (the fixes as a diff) and `--baseline DIR` (compare this
run with an earlier report). Kept here so that `run.py` and `report.py` only wire the flags."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from gputriage import outdir
from gputriage.commands.common import existing_path, out_file
from gputriage.errors import InputError
from gputriage.report.sanitize import inline_text

if TYPE_CHECKING:
    from gputriage.diagnosis import Diagnosis

# The compare and patch modules are imported when used: `run` loads this module before the user's job starts.


def add_patch_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--patch",
        type=out_file,
        metavar="FILE",
        help="write the fixes that are code edits as a unified diff (apply with git apply FILE); "
        "gputriage never edits your files",
    )


def add_loop_options(p: argparse.ArgumentParser) -> None:
    """`run`'s --patch, --baseline, and its --fail-on, which also takes `regression` (with --baseline)."""
    add_patch_option(p)
    p.add_argument(
        "--baseline",
        type=existing_path,
        metavar="DIR",
        help="an earlier report (folder or report.json): after the run, compare with it (did the fix work?)",
    )
    p.add_argument(
        "--fail-on",
        choices=["critical", "warning", "regression"],
        help="exit 1 when a finding of this severity or worse exists, or (regression, with --baseline) when the "
        "step time or GPU busy got worse than the baseline's beyond the noise (for CI)",
    )


def check_loop_options(args: argparse.Namespace) -> None:
    """Before the job starts: a --baseline that is not there, or --fail-on regression without one, is exit 2."""
    baseline = getattr(args, "baseline", None)
    if baseline is not None:
        _check_baseline(Path(baseline))
    if getattr(args, "fail_on", None) == "regression" and baseline is None:
        raise InputError("--fail-on regression compares with an earlier run: give --baseline DIR")


def _check_baseline(path: Path) -> None:
    """A folder that holds neither a report nor a trace is refused now, not after a job of hours (compare's
    load_side reads it then: a report folder, a report.json, or a trace file or folder)."""
    if not path.exists():
        raise InputError(f"--baseline {path}: no such file or folder")
    if path.is_dir() and not outdir.report_json(path).is_file():
        from gputriage.tracing.multirank import trace_files

        try:
            trace_files([path])
        except InputError as exc:
            raise InputError(f"--baseline {path}: no report.json, and not a folder of traces either ({exc})") from None


def write_patch(diag: Diagnosis, path: Path | None, root: Path, stream: TextIO | None = None) -> None:
    """The patch file, and one line on stderr saying what it holds."""
    if path is None:
        return
    from gputriage.report.output import write_file
    from gputriage.report.patch import build_patch

    patch = build_patch(diag, root)
    write_file(path, patch.text.encode("utf-8"))
    files = ", ".join(patch.files) or "no file"
    left = [f"{patch.advice} finding(s) left as advice"] if patch.advice else []
    left += [f"{patch.left_out} edit(s) left out"] if patch.left_out else []
    advice = f"; {' and '.join(left)} (see its comments)" if left else ""
    shown = outdir.shown_path(path)
    how = f" (git apply {shown})" if patch.files else ""
    line = inline_text(f"gputriage: patch: {patch.edits} edit(s) in {files} -> {shown}{how}{advice}")
    print(line, file=stream or sys.stderr)


def patch_after_job(diag: Diagnosis, path: Path | None, root: Path, stream: TextIO) -> None:
    """`run --patch`: an unwritable patch file is said in one line; it never replaces the script's exit code."""
    try:
        write_patch(diag, path, root, stream)
    except InputError as exc:
        print(f"gputriage: error: --patch: {inline_text(str(exc))}", file=stream)


def compare_with_baseline(
    diag: Diagnosis, baseline: Path | None, fail_on: str | None, label: str, stream: TextIO
) -> int:
    """The compare of this run against the baseline, on stderr after the run's report; its --fail-on code (0 or 1).
    A baseline that cannot be read is said in one line: the run's own report and exit code stand."""
    if baseline is None:
        return 0
    from gputriage.commands.compare import fail_code, load_side
    from gputriage.compare import compare
    from gputriage.report.compare import render_terminal

    try:
        before = load_side(baseline)
    except InputError as exc:
        print(f"gputriage: error: --baseline: {inline_text(str(exc))}", file=stream)
        return 0
    result = compare(before, diag, outdir.shown_path(baseline), outdir.shown_path(Path(label)))
    render_terminal(result, stream)
    return fail_code(result, fail_on)
