"""Helpers of the integration tests: the plain-loop scripts, run through the real `gputriage run` CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gputriage.cli import main

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def gputriage_run(script: str, out_dir: Path, *options: str) -> tuple[int, dict[str, Any]]:
    """`gputriage run OPTIONS --out OUT_DIR scripts/SCRIPT`, in this process; (exit code, report.json)."""
    code = main(["run", *options, "--out", str(out_dir), str(SCRIPTS / script)])
    return code, json.loads((out_dir / "report.json").read_text())


def codes(findings: list[Any]) -> list[str]:
    """Finding codes in report order, from report.json dicts or Finding objects."""
    return [f["code"] if isinstance(f, dict) else f.code for f in findings]
