"""An index tensor the script never moves, beside the tensors it moves in place (pygcn's `if args.cuda:` block left
`idx_train` out): the fix and the patch move it with them, in the script's own words (a trial: the generic
`torch.randperm(n, device=x.device)` advice, no edit)."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_cases import Case, Result, mark_line, patched_findings, run_many

SCRIPT = "index_never_moved.py"


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Result]:
    return run_many({"index": Case([SCRIPT])}, tmp_path_factory.mktemp("index"), preflight=True)


def test_the_index_moves_with_its_siblings_and_the_patch_works(runs: dict[str, Result], tmp_path: Path) -> None:
    r = runs["index"]
    finding = r.finding("host-sync-in-loop")
    assert finding["where"] == mark_line(SCRIPT, "cpu-index")
    fix = finding["fix"]
    assert "idx_train is never moved: the script moves features, labels, idx_val but not it" in fix
    assert fix.rstrip().endswith("idx_train = idx_train.cuda()")
    (edit,) = finding["evidence"]["edits"]
    assert edit["kind"] == "move-index" and edit["new"][-1] == "    idx_train = idx_train.cuda()"
    assert edit["old"] == ["    idx_val = idx_val.cuda()"]  # the last move of the block: the new line goes below it
    assert patched_findings(r.report, SCRIPT, tmp_path) == []


@pytest.fixture(scope="module")
def label_run(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return run_many({"label": Case(["label_not_moved.py"])}, tmp_path_factory.mktemp("label"), preflight=True)["label"]


def test_a_tensor_the_loop_forgot_moves_beside_its_siblings_in_their_words(label_run: Result, tmp_path: Path) -> None:
    """NCF (a trial): `user = user.cuda()`, `item = item.cuda()`, no move of `label`; the fix defined a device,
    moved all three again before the loss, and the patch had no edit."""
    finding = label_run.finding("data-on-cpu")
    assert finding["where"] == mark_line("label_not_moved.py", "data-on-cpu")
    fix = finding["fix"]
    assert fix.splitlines()[-1] == "label = label.cuda()" and "after line" in fix and "item = item.cuda()" in fix
    assert "torch.device" not in fix and "user = user.to(" not in fix
    (edit,) = finding["evidence"]["edits"]
    assert (
        edit["old"] == ["        item = item.cuda()  # noqa: PLW2901"]
        and edit["new"][-1] == "        label = label.cuda()"
    )
    assert patched_findings(label_run.report, "label_not_moved.py", tmp_path) == []


def test_a_plain_run_of_a_cuda_script_on_a_cpu_torch_points_to_the_preflight(tmp_path: Path) -> None:
    """A trial: the crash ("Torch not compiled with CUDA enabled") was "not a device-placement problem: see its
    traceback", with no word of the one command that checks the job on this machine."""
    (r,) = run_many({"plain": Case(["label_not_moved.py"])}, tmp_path, expect_device="cpu").values()
    summary = r.report["verdict"]["summary"]
    assert "this torch has none. To check the job here, without a GPU: gputriage run --preflight " in summary
    assert "label_not_moved.py" in summary.rsplit("--preflight", 1)[1]
