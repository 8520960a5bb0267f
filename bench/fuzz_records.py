"""Fuzz `gputriage report` on hostile rank records and report.json documents: tracebacks / hangs / peak memory.

For each input kind, N seeded cases (tests/fuzz_records.py: real records of the test suite, mutated) run in worker
processes, in-process through the CLI's `main`. A case counts as
- a traceback when anything but gputriage's one-line InputError escapes (listed by code site);
- a hang when it takes longer than --hang-s (SIGALRM stops it, and it is listed);
- unclean when the exit code, the error line or a text output (terminal, report.md) breaks the promise (one line,
  exit 2, no control character);
- a memory blow-up when it hits the worker's address-space limit (--limit-mb);
- a contract breach (listed with the tracebacks) when a finding does not match the catalogue of docs/contract.md.
Peak memory is each worker's peak RSS, next to its RSS after the first case (the baseline), so growth shows.

    .venv/bin/python bench/fuzz_records.py --cases 10000 [--kinds rank report] [--jobs 2] [--seed 1]
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import multiprocessing
import resource
import signal
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import fuzz_records
from gputriage.report.sanitize import inline_text


class Hang(Exception):
    pass


@dataclass
class Tally:
    statuses: collections.Counter[str] = field(default_factory=collections.Counter)
    failures: dict[str, list[str]] = field(default_factory=dict)  # "traceback: site" -> the first case labels
    baseline_rss_mb: float = 0.0
    peak_rss_mb: float = 0.0
    worst_growth_mb: float = 0.0  # the most one case raised the peak
    worst_case: str = ""
    seconds: float = 0.0


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise Hang


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


@dataclass(frozen=True)
class Share:
    """One worker's part of a kind's cases: every `jobs`-th case from `index`."""

    kind: str
    seed: int
    count: int
    index: int
    jobs: int
    hang_s: int
    limit_mb: int


class ContractBreach(Exception):
    """A finding whose code, rung, severity or evidence fields the catalogue (docs/contract.md) does not know."""


def check_findings_against_the_catalogue() -> None:
    """As the test suite does (tests/conftest.py): every finding the rules make is checked against the catalogue."""
    from contract import catalogue_problems
    from gputriage import diagnosis

    real = diagnosis.evaluate_job

    def checked(run: Any) -> list[Any]:
        found = real(run)
        problems = catalogue_problems(f.to_json() for f in found)
        if problems:
            raise ContractBreach("; ".join(problems))
        return found

    diagnosis.evaluate_job = checked


def worker(share: Share) -> Tally:
    kind, seed, count, worker_index, jobs, hang_s = (
        share.kind,
        share.seed,
        share.count,
        share.index,
        share.jobs,
        share.hang_s,
    )
    limit = share.limit_mb << 20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    signal.signal(signal.SIGALRM, _alarm)
    check_findings_against_the_catalogue()
    tally = Tally()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for index, case in enumerate(fuzz_records.cases(kind, seed, count)):
            if index % jobs != worker_index:
                continue
            before_mb = _rss_mb()
            status, detail = _one(kind, case, Path(tmp), hang_s)
            growth_mb = _rss_mb() - before_mb  # the peak only moves when this case went above every earlier one
            if tally.baseline_rss_mb and growth_mb > tally.worst_growth_mb:  # the first case warms up
                tally.worst_growth_mb, tally.worst_case = growth_mb, f"#{index} {case[0][:100]} ({len(case[1]):,} B)"
            tally.statuses[status] += 1
            if status not in ("ok", "left out", "refused"):
                key = f"{status}: {detail[:160]}"
                tally.failures.setdefault(key, []).append(f"#{index} {case[0][:120]}")
            if not tally.baseline_rss_mb:
                tally.baseline_rss_mb = _rss_mb()
    tally.peak_rss_mb = _rss_mb()
    tally.seconds = time.perf_counter() - started
    return tally


def _one(kind: str, case: fuzz_records.Case, tmp: Path, hang_s: int) -> tuple[str, str]:
    signal.alarm(hang_s)
    try:
        outcome = fuzz_records.run_case(kind, case, tmp)
        return outcome.status, outcome.detail
    except Hang:
        return "hang", f"over {hang_s} s"
    except MemoryError:
        return "memory", "hit the address-space limit"
    finally:
        signal.alarm(0)


def run_kind(kind: str, args: argparse.Namespace) -> Tally:
    fuzz_records.rank_record_seeds()  # built once here, inherited by the forked workers
    fuzz_records.report_json_seeds()
    context = multiprocessing.get_context("fork")
    with context.Pool(args.jobs) as pool:
        share = Share(kind, args.seed, args.cases, 0, args.jobs, args.hang_s, args.limit_mb)
        parts = pool.map(worker, [dataclasses.replace(share, index=i) for i in range(args.jobs)])
    total = Tally()
    for part in parts:
        total.statuses.update(part.statuses)
        for key, labels in part.failures.items():
            total.failures.setdefault(key, []).extend(labels)
        total.baseline_rss_mb = max(total.baseline_rss_mb, part.baseline_rss_mb)
        total.peak_rss_mb = max(total.peak_rss_mb, part.peak_rss_mb)
        if part.worst_growth_mb >= total.worst_growth_mb:
            total.worst_growth_mb, total.worst_case = part.worst_growth_mb, part.worst_case
        total.seconds = max(total.seconds, part.seconds)
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--cases", type=int, default=10_000, help="cases per input kind")
    parser.add_argument("--kinds", nargs="+", default=list(fuzz_records.KINDS), choices=fuzz_records.KINDS)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--hang-s", type=int, default=20, help="a case running longer than this is a hang")
    parser.add_argument("--limit-mb", type=int, default=4096, help="each worker's address-space limit")
    args = parser.parse_args()

    print(
        f"{'kind':<8}{'cases':>8}{'ok':>8}{'left out':>9}{'refused':>9}{'tracebacks':>12}{'hangs':>7}{'unclean':>9}"
        f"{'memory':>8}{'baseline RSS':>14}{'peak RSS':>10}{'time':>8}"
    )
    bad = 0
    for kind in args.kinds:
        t = run_kind(kind, args)
        s = t.statuses
        print(
            f"{kind:<8}{sum(s.values()):>8}{s['ok']:>8}{s['left out']:>9}{s['refused']:>9}{s['traceback']:>12}"
            f"{s['hang']:>7}{s['unclean']:>9}{s['memory']:>8}"
            f"{t.baseline_rss_mb:>11.0f} MB{t.peak_rss_mb:>7.0f} MB{t.seconds:>7.0f}s"
        )
        rise = f"{t.worst_growth_mb:.0f} MB, {t.worst_case}" if t.worst_case else "none (making the cases took more)"
        print(f"    largest rise of the peak during one case: {inline_text(rise)}")
        for key, labels in sorted(t.failures.items()):
            bad += len(labels)  # the labels quote hostile strings: shown, not sent to this terminal either
            print(f"    {len(labels)} x {inline_text(key)}\n        e.g. {inline_text(labels[0])}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
