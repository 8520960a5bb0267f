"""`PYTHONSAFEPATH=1` (`python -P`): Python puts no folder of the script's on sys.path, so a sibling import fails;
under gputriage it succeeded (trial 9's P5: the job's control flow changed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _run(argv: list[str], folder: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONSAFEPATH": "1"}
    return subprocess.run(argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False)


def test_safe_path_keeps_the_scripts_folder_off_sys_path(tmp_path: Path) -> None:
    (tmp_path / "helper.py").write_text("VALUE = 1\n")
    (tmp_path / "job.py").write_text(
        "try:\n    import helper\n    print('imported')\nexcept ImportError:\n    print('not on sys.path')\n"
    )
    plain = _run([sys.executable, "job.py"], tmp_path)
    ours = _run([sys.executable, "-m", "gputriage", "run", "--out", str(tmp_path / "out"), "job.py"], tmp_path)
    assert plain.stdout == "not on sys.path\n"
    assert ours.stdout.splitlines()[0] == "not on sys.path", ours.stderr[-2000:]
