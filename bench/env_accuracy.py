"""How often `gputriage env --from` names the cause that the thread settled on, per finding code and overall.

Reads the labelled reports of tests/data/envs and, when present, ../shared/corpus/envs (labels in
tests/data/envs/shared-labels.tsv). A report is right when verdict.root_cause equals its label (`none`: no rung-1
root cause named). It also counts the worst kind of miss: a `healthy` verdict on a report whose thread found a problem.

    .venv/bin/python bench/env_accuracy.py [--shared DIR] [--misses]
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "env"))

from env_corpus import SHARED_DIR, Outcome, Report, all_reports, diagnose_report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", type=Path, default=SHARED_DIR, help="the shared corpus's envs folder")
    parser.add_argument("--misses", action="store_true", help="list every miss with the verdict")
    args = parser.parse_args()
    results = [(report, diagnose_report(report)) for report in all_reports(args.shared)]
    print_table(results)
    if args.misses:
        print_misses(results)
    return 0


def print_table(results: list[tuple[Report, Outcome]]) -> None:
    total, right = Counter[str](), Counter[str]()
    for report, outcome in results:
        total[report.expected] += 1
        right[report.expected] += outcome.predicted() == report.expected
    print(f"{'code':<26}{'right':>7}{'of':>5}{'accuracy':>10}")
    for code in sorted(total):
        print(f"{code:<26}{right[code]:>7}{total[code]:>5}{right[code] / total[code]:>10.0%}")
    n, ok = sum(total.values()), sum(right.values())
    healthy = sum(outcome.healthy_on_a_problem(report.expected) for report, outcome in results)
    refused = sum(outcome.status == "refused" for _, outcome in results)
    print(f"{'overall':<26}{ok:>7}{n:>5}{ok / n:>10.1%}")
    print(f"healthy verdicts on reports whose thread found a problem: {healthy}")
    print(f"reports refused as input: {refused}")
    statuses = Counter(outcome.status for _, outcome in results)
    print("verdict statuses: " + ", ".join(f"{s} {c}" for s, c in sorted(statuses.items())))


def print_misses(results: list[tuple[Report, Outcome]]) -> None:
    print("\nmisses:")
    for report, outcome in results:
        if outcome.predicted() != report.expected:
            print(f"  {report.name}: expected {report.expected}, got {outcome.predicted()} [{outcome.status}]")
            print(f"      {outcome.detail[:150]}")


if __name__ == "__main__":
    raise SystemExit(main())
