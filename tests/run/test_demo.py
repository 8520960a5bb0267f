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


def _python_without_torch(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """This interpreter with everything it has except torch: every top-level entry of its site-packages linked into a
    folder, torch's left out, and site's own path switched off (-S)."""
    site = next(Path(p) for p in sys.path if p.endswith("site-packages") and (Path(p) / "msgspec").is_dir())
    bare = tmp_path / "site"
    bare.mkdir()
    for entry in site.iterdir():
        if not entry.name.startswith(("torch", "functorch", "_distutils_hack")) and not entry.name.endswith(".pth"):
            (bare / entry.name).symlink_to(entry)
    src = Path(__file__).resolve().parents[2] / "src"
    return [sys.executable, "-S", "-m", "gputriage"], {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{src}:{bare}"}


def test_without_torch_demo_and_run_say_so_in_one_line(tmp_path: Path) -> None:
    """torch is not a dependency: a Python without it gets one line naming that Python, not an import traceback."""
    python, env = _python_without_torch(tmp_path)
    script = tmp_path / "train.py"
    script.write_text("import torch\n")
    for argv in (["demo", "--out", str(tmp_path / "a")], ["run", str(script), "--out", str(tmp_path / "b")]):
        done = subprocess.run(
            [*python, *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, check=False
        )
        assert done.returncode == 2, done.stderr
        (line,) = done.stderr.splitlines()
        assert line.startswith("gputriage: error: PyTorch is not installed in this Python") and sys.executable in line
    # the same Python still reads traces and environments: those need no torch
    env_check = subprocess.run([*python, "env", "--json"], capture_output=True, text=True, env=env, check=False)
    assert '"torch-not-installed"' in env_check.stdout
