"""`if device == "cuda":` with `device = torch.device(...)`: always False (a torch.device never equals a string), so
the script's GPU branch never runs; a trial found it in PyTorch's own speech tutorial, where that branch set the
loader's workers and pinned memory for the GPU."""

from __future__ import annotations

from pathlib import Path

import pytest
from run_cases import Case, Result, mark_line, run_many

SCRIPT = "device_compared.py"


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return run_many({"compare": Case([SCRIPT])}, tmp_path_factory.mktemp("compare"), preflight=True)["compare"]


def test_a_device_compared_to_a_string_is_named_and_patched(result: Result, tmp_path: Path) -> None:
    (finding,) = [f for f in result.report["findings"] if f["code"] == "device-compared-to-string"]
    assert finding["where"] == mark_line(SCRIPT, "device-compared-to-string")
    assert finding["severity"] == "warning" and "is always false" in finding["title"]
    assert finding["fix"].startswith('if device.type == "cuda":')
    (edit,) = finding["evidence"]["edits"]
    assert edit["new"] == ['if device.type == "cuda":  # MARK device-compared-to-string']
