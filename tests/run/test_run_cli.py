"""`gputriage run --expect-device meta` on tiny scripts: the root cause, the exit code and the `where` of each."""

from __future__ import annotations

from run_cases import SCRIPTS, Result, mark_line

from gputriage.report.document import run_from_document


def _root(result: Result) -> str | None:
    root: str | None = result.report["verdict"]["root_cause"]
    return root


def _placement_codes(result: Result) -> set[str]:
    rungs_2_to_4 = {"data-on-cpu", "model-on-cpu", "model-partly-on-cpu", "device-mismatch-error", "no-gpu-compute"}
    return set(result.codes()) & rungs_2_to_4


def test_nothing_moved_then_sys_exit_3(runs: dict[str, Result]) -> None:
    r = runs["nothing_moved"]
    assert r.returncode == 3  # the script's sys.exit(3), kept
    assert "done" in r.stdout
    assert r.report["process"]["exit_code"] == 3
    # Lower rung first (docs/contract.md): the batches, then the model, then the compute that follows from both.
    assert _root(r) == "data-on-cpu"
    assert {"data-on-cpu", "model-on-cpu", "no-gpu-compute"} <= set(r.codes())
    assert r.report["findings"][0]["where"] == mark_line("nothing_moved.py", "data-on-cpu")
    assert r.finding("model-on-cpu")["where"] == mark_line("nothing_moved.py", "model-on-cpu")
    assert r.finding("no-gpu-compute")["evidence"]["ops_per_device"].get("meta", 0) == 0


def test_model_not_moved_crash_is_explained_as_model_on_cpu(runs: dict[str, Result]) -> None:
    r = runs["model_not_moved"]
    assert r.returncode == 1
    assert "Tensor on device cpu is not on the expected device meta" in r.stderr  # the traceback, as Python prints it
    assert _root(r) == "model-on-cpu"
    finding = r.finding("model-on-cpu")
    assert finding["where"] == mark_line("model_not_moved.py", "model-on-cpu")
    assert "not on the expected device" in finding["evidence"]["crashed_with"]
    assert "device-mismatch-error" not in r.codes()


def test_inputs_not_moved(runs: dict[str, Result]) -> None:
    r = runs["inputs_not_moved"]
    assert r.returncode == 1
    assert _root(r) == "data-on-cpu"
    finding = r.finding("data-on-cpu")
    assert finding["where"] == mark_line("inputs_not_moved.py", "data-on-cpu")
    assert "inputs" in finding["title"]
    assert _placement_codes(r) == {"data-on-cpu"}


def test_labels_not_moved(runs: dict[str, Result]) -> None:
    r = runs["labels_not_moved"]
    assert r.returncode == 1
    assert _root(r) == "data-on-cpu"
    finding = r.finding("data-on-cpu")
    assert "labels" in finding["title"]
    assert finding["where"] == mark_line("labels_not_moved.py", "data-on-cpu")
    assert any("CrossEntropyLoss args[1]" in t for t in finding["evidence"]["tensors"])
    assert _placement_codes(r) == {"data-on-cpu"}


def test_submodule_created_after_to(runs: dict[str, Result]) -> None:
    r = runs["submodule_after_to"]
    assert r.returncode == 1
    assert _root(r) == "model-partly-on-cpu"
    finding = r.finding("model-partly-on-cpu")
    assert finding["where"] == mark_line("submodule_after_to.py", "model-partly-on-cpu")
    assert finding["evidence"]["stray_parts"][0].startswith("head (module")
    assert finding["evidence"]["crash_module"] == "Backbone.head (Linear)"
    # the printed fix is the patch's line, in the script's names (it said `model = model.to(device)` generically)
    line = int(finding["where"].rsplit(":", 1)[1])
    assert finding["fix"].splitlines()[-1] == (f"model.to(device)  # after line {line}: model.head = nn.Linear(32, 4)")


def test_plain_tensor_attribute(runs: dict[str, Result]) -> None:
    r = runs["plain_tensor_attribute"]
    assert r.returncode == 1
    assert _root(r) == "model-partly-on-cpu"
    finding = r.finding("model-partly-on-cpu")
    assert finding["where"] == mark_line("plain_tensor_attribute.py", "model-partly-on-cpu")
    assert "not a registered buffer" in finding["evidence"]["stray_parts"][0]
    assert "register_buffer" in finding["fix"]


def test_slow_input_pipeline(runs: dict[str, Result]) -> None:
    r = runs["slow_pipeline"]
    assert r.returncode == 0
    assert _root(r) == "input-pipeline-bound"
    finding = r.finding("input-pipeline-bound")
    assert finding["where"] == mark_line("slow_pipeline.py", "input-pipeline-bound")
    assert finding["evidence"]["num_workers"] == 0
    assert finding["evidence"]["dataset"] == "SlowImages"
    assert finding["evidence"]["data_wait_pct_of_step"] >= 20
    assert "num_workers=" in finding["fix"]


def test_healthy_loop_with_arguments(runs: dict[str, Result]) -> None:
    r = runs["healthy"]
    assert r.returncode == 0
    # the script saw its own argv, its folder as sys.path[0], and ran as __main__
    assert "argv=['healthy.py', '--epochs', '2', '--tag', 'two words']" in r.stdout
    assert f"path0={SCRIPTS}" in r.stdout
    assert "name=__main__" in r.stdout
    assert "done two words" in r.stdout
    assert _root(r) is None
    assert not [f for f in r.report["findings"] if f["severity"] == "critical"]
    steps = r.report["steps"]
    assert steps["step_source"] == "optimizer"
    assert steps["steps_observed"] == 24  # 96 samples / 8 per batch x 2 epochs
    assert steps["loader"]["where"] == mark_line("healthy.py", "loader")
    # every rung of the job was measured, and the saved record checks itself (the phases add up to each step's wall
    # time); rung 1 is not judged: the run is meant for meta, on a machine whose torch reaches no GPU
    assert all(rung["status"] != "skipped" for rung in r.report["ladder"][1:])
    assert r.report["ladder"][0]["reason"].startswith("not judged: the run is meant for meta")
    assert run_from_document(r.report).self_check() == []
    assert r.report["compute"]["ops_per_device"]["meta"] > 0


def test_print_of_a_device_tensor_is_a_host_sync(runs: dict[str, Result]) -> None:
    r = runs["prints_loss"]
    assert r.returncode == 0
    assert _root(r) == "host-sync-in-loop"
    finding = r.finding("host-sync-in-loop")
    assert finding["where"] == mark_line("prints_loss.py", "host-sync-in-loop")
    assert finding["evidence"]["syncs_per_step"] == 1


def test_unrelated_crash_is_not_blamed_on_placement(runs: dict[str, Result]) -> None:
    r = runs["unrelated_crash"]
    assert r.returncode == 1
    # the absolute path, as Python prints it for a script
    assert r.stderr.startswith(f'Traceback (most recent call last):\n  File "{SCRIPTS / "unrelated_crash.py"}"')
    assert "ValueError: learning-rate schedule ended early" in r.stderr
    assert "gputriage/collectors" not in r.stderr.split("ValueError")[0]  # no frames of ours in the traceback
    assert _root(r) is None
    assert not _placement_codes(r)
    assert r.report["process"]["exception_type"] == "ValueError"
    assert "crashed with ValueError" in r.report["verdict"]["summary"]
    assert r.report["process"]["crash_where"] == mark_line("unrelated_crash.py", "crash")


def test_module_launch(runs: dict[str, Result]) -> None:
    r = runs["module"]
    assert r.returncode == 1
    assert "argv=['" in r.stdout and "trainpkg/train.py', 'first', '--flag']" in r.stdout
    assert "name=__main__ package=trainpkg" in r.stdout
    assert _root(r) == "data-on-cpu"
    assert r.finding("data-on-cpu")["where"] == mark_line("trainpkg/train.py", "data-on-cpu")
    assert r.report["process"]["target"] == "-m trainpkg.train"


def test_dataloader_workers_fork_and_spawn(runs: dict[str, Result]) -> None:
    for name, method in (("workers_fork", "fork"), ("workers_spawn", "spawn")):
        r = runs[name]
        assert r.returncode == 0, r.stderr
        assert f"batches=8 method={method}" in r.stdout
        assert _root(r) == "data-on-cpu"
        assert r.report["findings"][0]["where"] == mark_line("loader_workers.py", "data-on-cpu")
        assert r.report["steps"]["loader"]["num_workers"] == 2
        assert r.report["steps"]["steps_observed"] == 8


def test_sigterm_still_writes_the_report(runs: dict[str, Result]) -> None:
    r = runs["sigterm"]
    assert r.returncode == -15  # died of SIGTERM, as it would have without gputriage
    assert r.report["process"]["signal"] == "SIGTERM"
    assert r.report["steps"]["steps_observed"] >= 5
    assert _root(r) == "data-on-cpu"
    assert r.report["findings"][0]["where"] == mark_line("runs_until_killed.py", "data-on-cpu")


def test_sigint_prints_the_traceback_and_writes_the_report(runs: dict[str, Result]) -> None:
    r = runs["sigint"]
    assert r.returncode == -2  # died of SIGINT, as Python does after an uncaught KeyboardInterrupt
    assert "KeyboardInterrupt" in r.stderr
    assert r.report["process"]["signal"] == "SIGINT"
    assert _root(r) == "data-on-cpu"
    assert r.report["findings"][0]["where"] == mark_line("runs_until_killed.py", "data-on-cpu")


def test_steps_limit_stops_observing_and_the_job_runs_on(runs: dict[str, Result]) -> None:
    r = runs["steps_limit"]
    assert r.returncode == 0
    assert "done" in r.stdout
    steps = r.report["steps"]
    assert steps["steps_observed"] == 5
    assert steps["steps_total"] == 5  # nothing stays on after the window, not even a step counter
    assert _root(r) is None
