"""`gputriage trace PATH...`: explain PyTorch profiler (Kineto) traces; a folder of per-rank traces is compared."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gputriage import cyclegc
from gputriage.commands.common import (
    add_output_options,
    device_name,
    existing_path,
    exit_code_for,
    output_options,
    positive_number,
    signals_end_the_command,
    whole_number,
)
from gputriage.errors import InputError
from gputriage.textsafe import make_safe
from gputriage.tracing.limits import DEFAULT_LIMITS, GIB, TraceLimits

if TYPE_CHECKING:
    from gputriage.record.trace import TraceSection
    from gputriage.tracing.split import Begun


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "trace",
        help="analyse PyTorch profiler (Kineto) traces: a file, or a folder with one file per rank of one job",
    )
    p.add_argument(
        "paths", nargs="+", type=existing_path, metavar="PATH", help="a .json/.json.gz trace, or a folder of them"
    )
    p.add_argument(
        "--jobs",
        type=whole_number(1),
        default=None,
        metavar="N",
        help="processes: one per rank file, or per byte range of one large .json file (default: one per CPU core)",
    )
    p.add_argument(
        "--expect-device",
        type=device_name,
        metavar="DEV",
        help="the device the traced job was meant to use (cuda, mps, xpu, meta, cpu); with cpu, a trace with no "
        "kernel is what was meant, not a finding (default: an accelerator)",
    )
    limits = DEFAULT_LIMITS
    p.add_argument(
        "--max-gib",
        type=positive_number,
        default=limits.max_bytes / GIB,
        metavar="GIB",
        help=f"refuse a trace with more JSON than this, after gzip inflation (default {limits.max_bytes // GIB})",
    )
    p.add_argument(
        "--max-events",
        type=whole_number(1),
        default=limits.max_events,
        metavar="N",
        help=f"refuse a trace with more events than this (default {limits.max_events:,})",
    )
    p.add_argument(
        "--max-gzip-ratio",
        type=positive_number,
        default=limits.max_gzip_ratio,
        metavar="R",
        help=(
            f"refuse a .json.gz inflating more than R:1, a decompression bomb (default {limits.max_gzip_ratio:.0f}); "
            f"judged once {limits.gzip_ratio_after_bytes >> 20} MiB have inflated: less costs nothing to read"
        ),
    )
    add_output_options(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    with signals_end_the_command():
        return _trace(args)


def _trace(args: argparse.Namespace) -> int:
    limits = TraceLimits(
        max_bytes=int(args.max_gib * GIB), max_events=int(args.max_events), max_gzip_ratio=float(args.max_gzip_ratio)
    )
    paths = list(args.paths)
    begun = _begin(paths, args.jobs, limits)
    try:
        # Imported while the workers begin reading the file (0.1 s of a second's run on 2 cores): the analysis, the
        # rules and the report are not needed before the file is read, and the workers do not need them at all.
        with cyclegc.paused():
            from gputriage.diagnosis import diagnose
            from gputriage.record import Run
            from gputriage.report.output import emit
            from gputriage.report.sanitize import terminal_text
            from gputriage.tracing.multirank import analyse_paths

        section = analyse_paths(paths, jobs=args.jobs, limits=limits, begun=begun)
    finally:
        if begun is not None:
            begun.abandon()
            begun.spill.cleanup()
    for skipped in section.skipped:
        print(terminal_text(f"gputriage: note: {skipped}"), file=sys.stderr)
    for rank in section.ranks:
        for note in rank.notes:
            where = f"{Path(rank.path).name}: " if rank.path and len(section.ranks) > 1 else ""
            print(terminal_text(f"gputriage: note: {where}{note}"), file=sys.stderr)
    _check_expected_device(args.expect_device, section)
    run = Run(command="trace", argv=["trace", *map(str, args.paths)], expect_device=args.expect_device, trace=section)
    make_safe(run)  # a file name of bytes UTF-8 cannot hold (PEP 383 surrogates) enters the record as its escape
    diag = diagnose(run)
    emit(diag, output_options(args))
    return exit_code_for(diag, args.fail_on)


def _begin(paths: list[Path], jobs: int | None, limits: TraceLimits) -> Begun | None:
    """Pass one over one large plain-JSON trace, started in forked workers before the rest is imported."""
    if len(paths) != 1 or not paths[0].is_file():
        return None
    with cyclegc.paused():  # numpy and the reader: no cycle among what they allocate
        from gputriage.tracing.split import begin
        from gputriage.tracing.store import SpillDir

    return begin(paths[0], limits, SpillDir(), jobs)


# The devices Kineto names in deviceProperties that torch calls "cuda" (NVIDIA's, and AMD's under ROCm).
_CUDA_DEVICE_RE = re.compile(r"NVIDIA|Tesla|GeForce|Quadro|TITAN|RTX|AMD|Radeon|Instinct", re.IGNORECASE)


def _check_expected_device(expected: str | None, section: TraceSection) -> None:
    """`--expect-device cpu` (or meta) says a trace with no kernel is what was meant; on a trace that ran kernels it
    would silence every GPU rule and call the result healthy. Another accelerator (mps, xpu) on a trace that ran on
    an NVIDIA or AMD GPU judges the wrong device. The trace's own evidence wins: say so, and stop."""
    from gputriage.record.device import NOT_ACCELERATORS, device_type

    kind = device_type(expected)
    if expected is None or kind == "cuda":
        return
    ran = next((r for r in section.ranks if r.gpu_events), None)
    if ran is None:
        return
    if kind not in NOT_ACCELERATORS and not (ran.device and _CUDA_DEVICE_RE.search(ran.device)):
        return  # an accelerator of that kind may well be what ran
    rank = f"rank {ran.rank}'s trace" if ran.rank is not None and len(section.ranks) > 1 else "the trace"
    on = f" on {ran.device}" if ran.device else " on an accelerator"
    cuda = " (torch calls it cuda)" if kind not in NOT_ACCELERATORS else ""
    raise InputError(
        f"--expect-device {expected}, but {rank} ran {ran.gpu_events:,} kernels, copies and memsets{on}{cuda}: "
        "leave --expect-device out to judge it as the GPU trace it is"
    )
