"""Helpers for the trace tests: run the real CLI in-process and read its JSON report."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # builders.py sits next to the tests

from gputriage.cli import main


@pytest.fixture
def trace_json(capsys: pytest.CaptureFixture[str]) -> Any:
    """Run `gputriage trace ARGS... --json` in-process; return (exit code, report document)."""

    def run(*args: str | Path) -> tuple[int, dict[str, Any]]:
        code = main(["trace", *map(str, args), "--json"])
        out = capsys.readouterr().out
        return code, json.loads(out) if out.strip() else {}

    return run


@pytest.fixture
def traces(corpus: Path) -> Path:
    path = corpus / "traces"
    if not path.is_dir():
        pytest.skip(f"trace corpus not found at {path}")
    return path
