"""The stack sampler counts a step's samples once the step completes: the code after the job's last step runs in a
step that never does (a re-judge: a test loop and a checkpoint save after the training loop were "CPU work in every
step")."""

from __future__ import annotations

from run_cases import Case, mark_line, run_many

SCRIPT = "work_after_the_loop.py"


def test_work_after_the_last_step_is_not_the_steps(tmp_path) -> None:  # type: ignore[no-untyped-def]
    r = run_many({"after": Case([SCRIPT])}, tmp_path)["after"]
    assert r.returncode == 0
    after = mark_line(SCRIPT, "after-loop")
    sampler = r.report.get("sampler") or {}
    assert after not in [line["where"] for line in sampler.get("lines", [])]
    assert not [f for f in r.report["findings"] if f["code"] == "cpu-compute-in-step" and f["where"] == after]
