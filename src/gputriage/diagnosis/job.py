"""Evaluate the rules on one run, on one rank's record, or on every rank of a merged torchrun job."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

from gputriage import rules
from gputriage.diagnosis.passes import explain_idle_gpu_below, link_straggler_causes, one_input_pipeline_finding
from gputriage.findings import Finding, root_cause_order
from gputriage.record import Run
from gputriage.record.merge import rank_run
from gputriage.wording import listed


def evaluate_job(run: Run) -> list[Finding]:
    """Findings for a single run, a rank's record, or a merged job (each rank evaluated and tagged with `rank`),
    most likely root cause first.

    In a merged job the same finding on many ranks is reported once, on its lowest rank, with `on_ranks` in its
    evidence: 1,024 copies of one input-pipeline-bound would bury the one that differs.
    """
    if run.ranks is None or not run.ranks.ranks:
        found = _evaluate_record(run)
        if run.rank_info is not None and run.rank_info.world_size > 1:
            for f in found:
                f.rank = run.rank_info.rank
        if run.trace is not None and len(run.trace.ranks) > 1:
            # a folder of rank traces: each rank's finding is judged on its own trace, and the same one on many ranks
            # is reported once, as for a merged job (27,000 traces gave 27,000 copies of one finding)
            ranked = [f for f in found if f.rank is not None]
            return root_cause_order([*_collapse(ranked, mark_single=False), *(f for f in found if f.rank is None)])
        return found
    by_rank: dict[int, list[Finding]] = {}
    for info in run.ranks.ranks:
        own = _evaluate_record(rank_run(run, info))
        for f in own:
            f.rank = info.rank
        by_rank[info.rank] = own
    job_findings = link_straggler_causes(rules.evaluate(run, rules.job_rules()), by_rank)
    per_rank = [f for own in by_rank.values() for f in own]
    return root_cause_order(_collapse(per_rank) + job_findings)


def _evaluate_record(run: Run) -> list[Finding]:
    return one_input_pipeline_finding(explain_idle_gpu_below(run, rules.evaluate(run)))


def _on_ranks(ranks: list[int]) -> str:
    """ "On ranks 0 and 1", "On 64 ranks (0-63)", "On 5 ranks": the ranks a finding was seen on, short."""
    if len(ranks) <= 4:
        return f"On ranks {listed(ranks)}"
    span = f" ({ranks[0]}-{ranks[-1]})" if ranks[-1] - ranks[0] + 1 == len(ranks) else ""
    return f"On {len(ranks)} ranks{span}"


def _collapse(findings: Iterable[Finding], *, mark_single: bool = True) -> list[Finding]:
    """One finding per (code, where), on its lowest rank, with the ranks it was seen on; with `mark_single` False a
    finding of one rank alone is left as it is (its title names its rank already)."""
    groups: dict[tuple[str, str | None], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.code, f.where), []).append(f)
    out = []
    for group in groups.values():
        first = min(group, key=lambda f: (f.severity.weight, f.rank if f.rank is not None else -1))
        ranks = sorted({f.rank for f in group if f.rank is not None})
        if len(ranks) <= 1 and not mark_single:
            out.append(first)
            continue
        # said before the title: after it, "(and on 1 other rank)" was glued to the title's last sentence
        title = f"{_on_ranks(ranks)}: {first.title}" if len(ranks) > 1 else first.title
        out.append(msgspec.structs.replace(first, title=title, evidence={**first.evidence, "on_ranks": ranks}))
    return out
