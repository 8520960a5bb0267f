"""`gputriage compare BEFORE AFTER [--json] [--html FILE] [--fail-on regression]`: did the fix work?

BEFORE and AFTER are each a report folder (`--out DIR`), a report.json, or a profiler trace (a file or a folder of
per-rank traces). Both are read through the same validated loaders as `gputriage report` and `gputriage trace`, then
diagnosed, and `compare/model.py` judges the difference.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gputriage import outdir
from gputriage.commands.common import existing_path, out_file
from gputriage.compare import Comparison, compare
from gputriage.diagnosis import Diagnosis, diagnose
from gputriage.errors import InputError
from gputriage.record import Run
from gputriage.report.compare import compare_document, render_html, render_terminal
from gputriage.report.document import encode_document, load_document
from gputriage.report.output import write_file

# Names that say "this is a profiler trace", as torch.profiler and gputriage's --trace write them.
_TRACE_SUFFIXES = (".json.gz", ".pt.trace.json", ".trace.json")
_HEAD_BYTES = 4096


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "compare",
        help="did the fix work? compare two reports (or two traces): step time, GPU busy, findings, a verdict",
        description="Compares a run before a fix with one after it: the step time and each part of the step, GPU "
        "busy, samples/s, and the findings resolved, still there and new; differences within the noise are called "
        "that.",
    )
    p.add_argument(
        "before", type=existing_path, metavar="BEFORE", help="report folder, report.json or trace of the run before"
    )
    p.add_argument("after", type=existing_path, metavar="AFTER", help="the same for the run after the change")
    p.add_argument("--json", action="store_true", help="print the gputriage.compare/1 document to stdout")
    p.add_argument(
        "--html", type=out_file, metavar="FILE", help="write the comparison page (both runs side by side) here"
    )
    add_compare_fail_on(p)
    p.set_defaults(func=main)


def add_compare_fail_on(p: argparse.ArgumentParser, flag: str = "--fail-on") -> None:
    p.add_argument(
        flag,
        dest="compare_fail_on",
        choices=["regression"],
        help="exit 1 when the step time or GPU busy got worse beyond the noise (a CI performance guard)",
    )


def main(args: argparse.Namespace) -> int:
    before, after = load_side(args.before), load_side(args.after)
    result = compare(before, after, str(args.before), str(args.after))
    show(result, before, after, json_out=args.json, html=args.html)
    return fail_code(result, args.compare_fail_on)


def show(result: Comparison, before: Diagnosis, after: Diagnosis, *, json_out: bool, html: Path | None) -> None:
    if html is not None:
        write_file(html, render_html(result, before, after).encode("utf-8"))
    if json_out:
        sys.stdout.buffer.write(encode_document(compare_document(result)))
        sys.stdout.flush()
    else:
        render_terminal(result, sys.stdout)


def fail_code(result: Comparison, fail_on: str | None) -> int:
    if fail_on == "regression" and result.regressed_timing():
        print(
            "gputriage: --fail-on regression: the step time or GPU busy got worse beyond the noise; exit 1",
            file=sys.stderr,
        )
        return 1
    return 0


def load_side(path: Path) -> Diagnosis:
    """One side of the comparison, diagnosed: a report folder or report.json, else a trace (file or folder)."""
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if path.is_dir():
        report = outdir.report_json(path)
        return diagnose(load_document(report) if report.is_file() else _trace_run(path))
    outdir.check_regular_file(path)  # before the first read: a FIFO would wait forever for a writer
    if path.name.endswith(_TRACE_SUFFIXES):
        return diagnose(_trace_run(path))
    if not _names_a_schema(path):
        try:
            return diagnose(_trace_run(path))
        except InputError as exc:
            raise InputError(f'neither a gputriage report (no "schema") nor a profiler trace: {exc}') from exc
    return diagnose(load_document(path))


def _names_a_schema(path: Path) -> bool:
    """Whether the file starts like a gputriage document: report.json and run records open with their "schema" key.
    A profiler trace saved under any other name (`w0.json`, gunzipped) has none ("schemaVersion" is Kineto's)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(_HEAD_BYTES)
    except OSError:
        return True  # the document loader says why it cannot be read
    return b'"schema"' in head


def _trace_run(path: Path) -> Run:
    from gputriage.tracing.multirank import analyse_paths

    section = analyse_paths([path])
    if not section.ranks:
        raise InputError(f"{path}: neither a report (no report.json) nor a profiler trace")
    return Run(command="trace", argv=["trace", str(path)], trace=section)
