"""A project with its own `statistics.py` next to the script: the probes imported it for the standard library's (trial
10: "an observer failed (AttributeError: module 'statistics' has no attribute 'median')"), and the script must still
get its own."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

JOB = """
import statistics
import torch
from torch.utils.data import DataLoader, TensorDataset
print(statistics.mean([1, 2]))
model = torch.nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for (x,) in DataLoader(TensorDataset(torch.randn(40, 2)), batch_size=4):
    model(x).sum().backward()
    opt.step()
    opt.zero_grad()
print("done")
"""


def test_the_probes_use_the_standard_library_and_the_script_its_own_module(tmp_path: Path) -> None:
    (tmp_path / "statistics.py").write_text("def mean(xs):\n    return 'the project s own mean'\n")
    (tmp_path / "job.py").write_text(JOB)
    cmd = [sys.executable, "-m", "gputriage", "run", "--preflight", "--out", str(tmp_path / "out"), "job.py"]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-1500:]
    assert result.stdout == "the project s own mean\ndone\n"
    assert "observer failed" not in result.stderr
    report = (tmp_path / "out" / "report.json").read_text()
    assert '"batch_load_s"' in report


def test_taking_them_leaves_sys_modules_as_python_has_it() -> None:
    code = (
        "import sys; import gputriage.stdlib as s; "
        "print([n for n in ('statistics', 'decimal', 'html', 'shlex', 'sysconfig') if n in sys.modules], "
        "s.statistics.median([1, 5]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "[] 3.0\n"


def test_a_module_of_gputriages_that_the_scripts_folder_also_holds_is_the_scripts(tmp_path: Path) -> None:
    """A trial: a project vendoring its own `pynvml.py` got gputriage's (already in sys.modules); a `msgspec.py` in
    the working folder broke `python -m gputriage` itself before the job ran (exit 0 -> 1)."""
    (tmp_path / "pynvml.py").write_text("VENDORED = True\n")
    (tmp_path / "msgspec.py").write_text("USER_SHIM = True\n")
    (tmp_path / "job.py").write_text(
        "import msgspec, pynvml\nprint(getattr(pynvml, 'VENDORED', False), getattr(msgspec, 'USER_SHIM', False))\n"
    )
    cmd = [sys.executable, "-m", "gputriage", "run", "--expect-device", "cpu", "--out", str(tmp_path / "out"), "job.py"]
    result = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr[-1500:]
    assert result.stdout == "True True\n"
