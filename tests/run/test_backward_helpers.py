"""A derivative formula's helper tensors (affine_grid's base grid, made in backward from the gradient's C++ options)
are the device's under the preflight, as they are on a GPU: the healthy spatial transformer was told that 82% of its
step went to ops on the CPU (trial 8)."""

from __future__ import annotations

import pytest
from run_cases import Case, Result, run_case


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return run_case(Case(["affine_grid_healthy.py"]), tmp_path_factory.mktemp("affine"), preflight=True)


def test_a_healthy_spatial_transformer_is_healthy(run: Result) -> None:
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.report["verdict"]["status"] == "healthy", [f["code"] for f in run.report["findings"]]
    assert run.report["compute"]["ops_per_device"].get("cpu", 0) == 0
