"""Notebooks: `%load_ext gputriage`, a `%%triage` cell, and `gputriage.session()` shown by IPython's display system.

The shell is IPython's real InteractiveShell, in this process; the cells are the classic mistake (the model moved to
the device, the batch not) on `meta`.
"""

from __future__ import annotations

import html
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("IPython")

from IPython.core.interactiveshell import InteractiveShell

from gputriage.api import Session

MISTAKE = """
import torch
from torch import nn
model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to("meta")
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(4):
    x, y = torch.randn(8, 16), torch.randint(0, 4, (8,)).to("meta")
    loss = nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
"""


@pytest.fixture(scope="module")
def shell() -> Iterator[InteractiveShell]:
    ip = InteractiveShell.instance()
    ip.run_cell("%load_ext gputriage", store_history=False).raise_error()
    yield ip
    InteractiveShell.clear_instance()


def run(shell: InteractiveShell, cell: str) -> Any:
    return shell.run_cell(cell, store_history=True)


def test_triage_cell_magic_returns_the_session_with_the_root_cause(shell: InteractiveShell, tmp_path: Path) -> None:
    result = run(shell, f"%%triage --expect-device meta --steps 3 --out {tmp_path}\n{MISTAKE}")
    assert result.error_in_exec is None  # the magic ran; the cell's own crash is in the session
    session = result.result
    assert isinstance(session, Session)
    assert session.findings[0].code == "data-on-cpu"
    assert session.diagnosis.run.process is not None
    assert session.diagnosis.run.process.exception_type == "RuntimeError"  # the cell died on the mismatch
    assert shell.user_ns["_"] is session  # the next cell can read `_.findings`
    doc = json.loads((tmp_path / "report.json").read_text())
    assert doc["verdict"]["root_cause"] == "data-on-cpu"


def test_jupyter_shows_the_html_report_and_a_terminal_the_text(shell: InteractiveShell) -> None:
    session = run(shell, f"%%triage --expect-device meta\n{MISTAKE}").result
    formats, _ = shell.display_formatter.format(session)
    page = formats["text/html"]
    assert page.startswith("<iframe srcdoc=")  # the report's CSS and scripts stay out of the notebook's page
    inner = html.unescape(page.split('srcdoc="', 1)[1].split('" title=', 1)[0])
    assert inner.lstrip().lower().startswith("<!doctype html>")
    assert "data-on-cpu" in inner
    assert "data-on-cpu" in formats["text/plain"]
    assert "\x1b[" not in formats["text/plain"]  # no colour codes in the plain-text view


def test_gputriage_session_displays_itself_in_a_notebook(shell: InteractiveShell) -> None:
    body = "\n".join("        " + line for line in MISTAKE.strip().splitlines())
    cell = "\n".join(
        [
            "import gputriage",
            "with gputriage.session(expect_device='meta') as s:",
            "    try:",
            body,
            "    except RuntimeError:",
            "        pass",
            "s",
        ]
    )
    session = run(shell, cell).result
    assert session.findings[0].code == "data-on-cpu"
    assert "text/html" in shell.display_formatter.format(session)[0]


def test_a_session_still_recording_shows_no_report(shell: InteractiveShell) -> None:
    formats, _ = shell.display_formatter.format(Session())
    assert "text/html" not in formats
    assert formats["text/plain"] == "<gputriage session: recording>"


def test_a_bad_option_is_one_line_and_the_cell_does_not_run(shell: InteractiveShell) -> None:
    shell.user_ns.pop("ran", None)
    result = run(shell, "%%triage --steps 0\nran = True")
    assert "ran" not in shell.user_ns
    assert "--steps must be at least 1" in str(result.error_in_exec)
    result = run(shell, "%%triage --colour\nran = True")
    assert "unrecognized arguments: --colour" in str(result.error_in_exec)
    result = run(shell, "%%triage --expect-device gpu0\nran = True")
    assert "--expect-device 'gpu0' is not a device torch knows" in str(result.error_in_exec)
    assert "ran" not in shell.user_ns


def test_importing_gputriage_imports_no_framework() -> None:
    frameworks = "sorted(m for m in ('torch', 'lightning', 'transformers', 'IPython') if m in sys.modules)"
    code = (
        f"import sys, gputriage; gputriage.Session; print({frameworks}); "
        f"gputriage.load_ipython_extension; print({frameworks})"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["[]", "['IPython']"]  # %load_ext imports IPython, and nothing else
