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
