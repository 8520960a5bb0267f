"""Passes that relate findings to each other, after the rules ran. Pure: (record, findings) in, findings out.

The rules each judge one thing; these passes say how their findings explain one another, so that no rule ever needs
to evaluate the others:
- a lower rung explains an idle GPU: NVML's low-gpu-utilization is dropped, and its numbers are cited on the finding
  that explains it;
- a straggler rank is late because of its own lower finding: the cross-rank `straggler-rank` names it;
- one concept, one finding: with `run --trace`, the step probes and the profiler trace can both see the step wait for
  the DataLoader; the probes' finding (more steps, the number the step table shows) stays, and cites the trace's own
  measure (the DataLoader time no GPU work hides, over the traced steps) under its own name.
"""

from __future__ import annotations

import msgspec

from gputriage.findings import Finding, Severity
from gputriage.record import Run
from gputriage.rules.distributed import straggler_cause, straggler_title
from gputriage.rules.gpu import explains_idle_gpu, gpu_idle_summary, is_nvml_low_util


def explain_idle_gpu_below(run: Run, findings: list[Finding]) -> list[Finding]:
    """A lower finding explains the idle GPU: drop NVML's low-gpu-utilization and cite its numbers there instead.

    E.g. model-on-cpu gains "nvml_gpu_util_zero_pct_of_samples: 97": the GPU sat at 0% while the model trained on
    the CPU. The citing goes on the lower critical and warning findings, never on info.
    """
    explaining = [f for f in findings if explains_idle_gpu(f)]
    if not explaining:
        return findings
    idle = gpu_idle_summary(run)
    if idle is not None:
        cited = {
            "nvml_gpu": f"{idle['gpu']} ({idle['gpu_name']})",
            "nvml_gpu_util_mean_pct": idle["util_mean_pct"],
            "nvml_gpu_util_zero_pct_of_samples": idle["util_zero_pct_of_samples"],
            "nvml_gpu_util_samples": idle["util_sample_count"],
        }
        for f in explaining:
            f.evidence.update({k: v for k, v in cited.items() if v is not None})
    return [f for f in findings if not is_nvml_low_util(f)]


_TRACE_LOADER_EVIDENCE = ("dataloader_pct_of_step", "dataloader_us_per_step", "busy_pct_of_steps")


def one_input_pipeline_finding(findings: list[Finding]) -> list[Finding]:
    """Keep the step probes' input-pipeline-bound; the trace's (same rank) adds its numbers to it."""
    probes = [f for f in findings if f.code == "input-pipeline-bound" and "data_wait_pct_of_step" in f.evidence]
    if not probes:
        return findings
    kept = []
    for f in findings:
        twin = next((p for p in probes if p.rank == f.rank), None)
        if f.code == "input-pipeline-bound" and f is not twin and twin is not None:
            twin.evidence.update({k: f.evidence[k] for k in _TRACE_LOADER_EVIDENCE if f.evidence.get(k) is not None})
            continue
        kept.append(f)
    return kept


def link_straggler_causes(job_findings: list[Finding], by_rank: dict[int, list[Finding]]) -> list[Finding]:
    """Name each straggler's own finding (already evaluated for its rank) as the reason it is late."""
    linked = []
    for found in job_findings:
        if found.code == "straggler-rank" and found.rank is not None:
            own = [g for g in by_rank.get(found.rank, []) if g.severity is not Severity.INFO]
            found = _with_cause(found, straggler_cause(found.evidence.get("cause_phase"), own))  # noqa: PLW2901
        linked.append(found)
    return linked


def _with_cause(f: Finding, cause: Finding | None) -> Finding:
    if cause is None:
        return f
    assert f.rank is not None
    title = straggler_title(
        f.rank, f.evidence["others_collective_wait_s_per_step"], f.evidence.get("cause_phase"), cause.code
    )
    evidence = {**f.evidence, "cause_code": cause.code}
    return msgspec.structs.replace(f, title=title, evidence=evidence, fix=cause.fix or f.fix, where=cause.where)
