"""`gputriage demo`: the bundled job with a classic mistake, triaged (a short run of it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from gputriage.demo import TRAIN_SCRIPT


def test_demo_finds_the_classic_mistake(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "gputriage", "demo", "--steps", "4", "--out", str(tmp_path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "training on" in proc.stdout  # the job's own output
    assert "meta device stands in for the GPU" in proc.stderr or "--expect-device cuda" in proc.stderr
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["verdict"]["root_cause"] == "data-on-cpu"
    assert {"data-on-cpu", "model-on-cpu"} <= {f["code"] for f in report["findings"]}
    lines = TRAIN_SCRIPT.read_text().splitlines()
    forward_line = next(i for i, line in enumerate(lines, start=1) if "logits = model(images)" in line)
    assert report["findings"][0]["where"].endswith(f"gputriage/demo/train.py:{forward_line}")
