"""A run under gputriage behaves exactly like a plain run (issue #12): each case of harness.py, plain and traced."""

from __future__ import annotations

from pathlib import Path

import pytest
from harness import CASES, Compared, Job, Observed, _load_noise, differences

# the fixture runs every case twice (plain and under gputriage): 45 jobs, minutes on a loaded 2-core machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]


@pytest.mark.parametrize("name", list(CASES))
def test_the_job_cannot_tell_it_ran_under_gputriage(compared: dict[str, Compared], name: str) -> None:
    result = compared[name]
    assert result.differences == [], "\n".join(result.differences)


def test_the_report_tells_how_each_job_ended(compared: dict[str, Compared]) -> None:
    for name, result in compared.items():
        report = result.traced.report
        if report is None or CASES[name].torchrun:
            continue
        process = report["process"]
        code = result.plain.returncode
        if code < 0:  # died of a signal: the report says which
            assert process["signal"] == {-2: "SIGINT", -15: "SIGTERM"}[code], name
        else:
            assert process["exit_code"] == code, name


def test_a_job_that_exits_with_a_bool_has_its_report(compared: dict[str, Compared]) -> None:
    """`sys.exit(not ok)`: the record's exit code was the bool, refused when the report was written."""
    report = compared["loader_len_untouched"].traced.report
    assert report is not None and report["process"]["exit_code"] == 1


def test_text_that_is_not_utf8_is_escaped_in_the_report_never_dropped(compared: dict[str, Compared]) -> None:
    report = compared["name_and_message_not_utf8"].traced.report
    assert report is not None
    assert report["argv"][0] == "s_\\udcff.py"
    assert report["process"]["exception_message"] == "bad byte: caf\\udce9"
    assert compared["argv_not_utf8"].traced.report["argv"][1] == "caf\\udce9"  # type: ignore[index]


def test_a_relative_out_is_the_folder_where_the_job_started(compared: dict[str, Compared]) -> None:
    where = compared["chdir_relative_out"].traced.report_where
    assert where is not None and where.endswith("job/gt-out/report.json")


def test_the_probes_saw_the_jobs(compared: dict[str, Compared]) -> None:
    """Transparent, and still measuring: the models and steps of a few jobs are in their reports."""
    for name in ("save_copy_pickle", "ema_each_step", "user_hooks", "checkpoint_resume", "workers_fork"):
        report = compared[name].traced.report
        assert report is not None and report["steps"]["steps_observed"] >= 3, name
        assert report["placement"]["models"], name


LEAK = (
    b"/usr/lib/python3.11/multiprocessing/resource_tracker.py:254: UserWarning: resource_tracker: There appear to be 1 "
    b"leaked semaphore objects to clean up at shutdown\n  warnings.warn('resource_tracker: There appear to be %d '\n"
)


@pytest.mark.parametrize(
    ("plain_err", "traced_err", "again"),
    [
        (b"step 0\n" + LEAK, b"step 0\n", True),  # only the tracker's shutdown race apart: one more pair
        (b"step 0\n", b"step 0\n" + LEAK, True),
        (b"step 0\n", b"step 1\n" + LEAK, False),  # the job's own text apart too: a difference, at once
        (b"step 0\n", b"Traceback\n", False),
    ],
)
def test_only_the_trackers_warnings_apart_runs_again(plain_err: bytes, traced_err: bytes, again: bool) -> None:
    job = Job(["job.py"], report=False)
    plain, traced = Observed(0, b"", plain_err, {}, 0.0), Observed(0, b"", traced_err, {}, 0.0)
    found = differences(job, plain, traced, Path())
    assert found and _load_noise(job, found, plain, traced) is again


def test_a_torchrun_pair_apart_only_by_exit_code_is_run_again_and_one_process_is_not() -> None:
    plain, traced = Observed(0, b"", b"", {}, 0.0), Observed(1, b"", b"", {}, 0.0)
    for job, again in ((Job(["ddp.py"], report=False, torchrun=2), True), (Job(["job.py"], report=False), False)):
        assert _load_noise(job, differences(job, plain, traced, Path()), plain, traced) is again
