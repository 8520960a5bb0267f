"""A tensor made in a method of a plain class (a replay buffer) is made on the file's own device variable, never on
`next(self.parameters()).device`, which only an nn.Module has: the seventh trial's DQN patch died with AttributeError
on its own line."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from run_cases import Case, Result, mark_line, patched_findings, run_case

from gputriage.collectors.source_capture import is_module_class

SCRIPT = "buffer_sample_on_cpu.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Result:
    return run_case(Case([SCRIPT]), tmp_path_factory.mktemp("buffer"), preflight=True)


def test_the_fix_uses_the_files_device_in_the_plain_class(run: Result) -> None:
    finding = run.finding("data-on-cpu")
    assert finding["where"] == mark_line(SCRIPT, "made-here")
    assert "device=device" in finding["fix"] and "self.parameters()" not in finding["fix"]
    snippet = next(s for s in run.report["source"]["snippets"] if s["function"] == "ReplayBuffer.sample")
    assert snippet["module_class"] is False


def test_the_patched_script_runs_healthy(run: Result, tmp_path: Path) -> None:
    assert patched_findings(run.report, SCRIPT, tmp_path) == []


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("class A(nn.Module): pass", True),
        ("class A(torch.nn.Linear): pass", True),
        ("class A(pl.LightningModule): pass", True),
        ("class B(nn.Module): pass\nclass A(B): pass", True),
        ("class A: pass", False),
        ("class A(object): pass", False),
        ("class B: pass\nclass A(B): pass", False),
        ("class A(SomethingImported): pass", None),
    ],
)
def test_a_class_is_a_module_by_its_bases_in_the_file(source: str, expected: bool | None) -> None:
    tree = ast.parse(source)
    cls = next(n for n in tree.body[::-1] if isinstance(n, ast.ClassDef))
    assert is_module_class(tree, cls) is expected
