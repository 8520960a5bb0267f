"""`gputriage report RUN.json|DIR [--html F] [--md F] [--json] [--out DIR]`: re-render a saved run.

Nothing is re-run: the saved record goes through the (pure) rules again and then the renderers, so the files come
out the same as when the run wrote them.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gputriage import outdir
from gputriage.commands.common import add_output_options, existing_path, exit_code_for, out_file, output_options
from gputriage.commands.loop import add_patch_option, write_patch
from gputriage.commands.rank_report import complete_job_report
from gputriage.diagnosis import diagnose
from gputriage.errors import InputError
from gputriage.record import Run
from gputriage.record.merge import load_job
from gputriage.report.document import load_document
from gputriage.report.html import render_html
from gputriage.report.markdown import render_markdown
from gputriage.report.output import emit, write_file
from gputriage.report.sanitize import inline_text


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("report", help="re-render a saved run (report.json or an --out folder)")
    p.add_argument(
        "paths", nargs="+", type=existing_path, metavar="RUN", help="report.json, or a folder that holds one"
    )
    p.add_argument("--html", type=out_file, metavar="FILE", help="write the self-contained HTML report here")
    p.add_argument("--md", type=out_file, metavar="FILE", help="write the Markdown report (for an issue or PR) here")
    add_patch_option(p)
    add_output_options(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    _distinct_outputs(args.html, args.md, args.patch)
    if len(args.paths) == 1 and args.paths[0].is_dir():
        complete_job_report(args.paths[0])  # a torchrun job whose merge nobody finished (a rank killed mid-merge)
    run = load_job(args.paths)  # per-rank records of a torchrun job (one --out folder, or one per node): merge
    if run is None:
        if len(args.paths) != 1:
            raise InputError("give one report.json or --out folder (several only for the per-node folders of one job)")
        path: Path = args.paths[0]
        if path.is_dir():
            path = outdir.report_json(path)
        run = load_document(path)
    _say_unreadable(run)
    diag = diagnose(run)
    if args.html is not None:
        write_file(args.html, render_html(diag).encode("utf-8"))
    if args.md is not None:
        write_file(args.md, render_markdown(diag).encode("utf-8"))
    options = output_options(args)
    if len(args.paths) == 1 and args.paths[0].is_dir() and outdir.report_json(args.paths[0]).is_file():
        options.details_in = Path(os.path.abspath(args.paths[0]))  # noqa: PTH100  (as `run` names its --out)
    emit(diag, options)
    write_patch(diag, args.patch, Path.cwd())
    return exit_code_for(diag, args.fail_on)


# Rank files named one by one on stderr, at most this many; the report lists them all.
_MAX_NAMED_UNREADABLE = 5


def _say_unreadable(run: Run) -> None:
    """A rank file left out of the merge is said on stderr (the report covers the others), one line each."""
    reasons = run.ranks.unreadable_reasons if run.ranks is not None else {}
    for reason in list(reasons.values())[:_MAX_NAMED_UNREADABLE]:
        print(f"gputriage: left out of the merged report: {inline_text(reason)}", file=sys.stderr)
    if len(reasons) > _MAX_NAMED_UNREADABLE:
        print(f"gputriage: and {len(reasons) - _MAX_NAMED_UNREADABLE} more unreadable rank files", file=sys.stderr)
    for other in run.ranks.other_jobs if run.ranks is not None else []:
        print(f"gputriage: {inline_text(other)}", file=sys.stderr)


def _distinct_outputs(*paths: Path | None) -> None:
    """`--md F --html F`: the second file written over the first, silently; refused before anything is read."""
    given = [Path(os.path.abspath(p)) for p in paths if p is not None]  # noqa: PTH100  (no symlink resolved)
    for i, path in enumerate(given):
        if path in given[:i]:
            raise InputError(f"{inline_text(str(path))} is named for two outputs: name one file each")
