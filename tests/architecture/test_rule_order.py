"""The rules register in causal order: the tie-break between findings of the same severity and rung."""

from __future__ import annotations

from gputriage import rules


def test_rules_register_in_causal_order() -> None:
    modules = [fn.__module__.rsplit(".", 1)[-1] for fn in rules.registered() + rules.job_rules()]
    order = [rules.CAUSAL_ORDER.index(m) for m in modules]
    assert order == sorted(order), modules


def test_job_rules_are_apart_from_record_rules() -> None:
    names = {fn.__name__ for fn in rules.job_rules()}
    assert names == {"ranks_share_gpu", "straggler_rank"}
    assert names.isdisjoint(fn.__name__ for fn in rules.registered())
