"""report.html in a real headless Chromium (Debian's `chromium`, installed by `make test` when run as root).

The page reports its own state on <html>: `data-charts-rendered` (how many uPlot charts it drew) and
`data-js-errors` (set by an error listener installed before any other script). `--dump-dom` serialises the DOM after
the scripts ran; `--enable-logging=stderr --v=0` prints every console message as an `INFO:CONSOLE` line, so an
uncaught exception or a console.error shows up even if the page's own listener never ran.
No network: the page needs none, and `--host-resolver-rules` makes sure it gets none.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from report_records import (
    INJECTION,
    crashed_run,
    diagnosis_with,
    distributed_run,
    injected_finding,
    injected_run,
    lifelike_run,
    no_gpu_run,
    starvation_finding,
    starved_run,
    trace_only_run,
)

from gputriage.diagnosis import Diagnosis, diagnose
from gputriage.record import Run
from gputriage.report.html import render_html

REPO_ROOT = Path(__file__).resolve().parents[2]
TEST_OUTPUT = REPO_ROOT / "test-output"
DOCS_SCREENSHOT = REPO_ROOT / "docs" / "report-screenshot.png"
# Set to refresh the README's screenshot from this test (the PNG in docs/ is committed, the test output is not).
UPDATE_DOCS_ENV = "GPUTRIAGE_UPDATE_DOCS"

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (make test installs it as root)"),
]


def chromium(profile: Path, url: str, *flags: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    command = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={profile}",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--enable-logging=stderr",
        "--v=0",
        *flags,
        url,
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done


def console_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


def html_tag(dom: str) -> str:
    """The serialised <html ...> start tag, where the page records its rendering state."""
    match = re.search(r"<html[^>]*>", dom)
    assert match is not None
    return match.group(0)


def dump_dom(page: Path, tmp_path: Path) -> tuple[str, list[str]]:
    done = chromium(tmp_path / "profile", page.as_uri(), "--dump-dom")
    return done.stdout, console_lines(done.stderr)


def write_page(diag: Diagnosis, path: Path) -> Path:
    path.write_text(render_html(diag), encoding="utf-8")
    return path


def test_charts_and_diagrams_render_without_errors_and_the_injection_stays_text(tmp_path: Path) -> None:
    page = write_page(diagnosis_with(injected_run(), [injected_finding(), starvation_finding()]), tmp_path / "r.html")

    dom, console = dump_dom(page, tmp_path)

    assert console == []
    assert "data-js-errors" not in html_tag(dom)
    assert 'data-charts-rendered="2"' in html_tag(dom)
    assert dom.count('<div class="uplot') == 2 and dom.count("<canvas") >= 2
    assert 'id="relationship-diagram"' in dom and 'id="sequence-diagram"' in dom
    assert 'class="message hot" data-action="load data"' in dom
    # The payload is text in the DOM, never an element: no <img>, and its characters come back escaped.
    assert "<img" not in dom
    assert "&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;" in dom
    assert INJECTION not in dom


@pytest.mark.parametrize(
    ("make_run", "charts"),
    [(distributed_run, 2), (no_gpu_run, 1), (crashed_run, 0), (trace_only_run, 0)],
    ids=lambda v: getattr(v, "__name__", str(v)),
)
def test_every_kind_of_record_renders_without_errors(make_run: Callable[[], Run], charts: int, tmp_path: Path) -> None:
    page = write_page(diagnosis_with(make_run(), []), tmp_path / "r.html")

    dom, console = dump_dom(page, tmp_path)

    assert console == []
    assert "data-js-errors" not in html_tag(dom)
    assert f'data-charts-rendered="{charts}"' in html_tag(dom)
    assert 'id="relationship-diagram"' in dom and 'id="sequence-diagram"' in dom


def test_the_check_catches_a_script_error(tmp_path: Path) -> None:
    """The harness above would notice a broken page: a page with a failing script is reported both ways."""
    html = render_html(diagnosis_with(starved_run(), []))
    broken = tmp_path / "broken.html"
    broken.write_text(html.replace("</body>", "<script>notDefinedAnywhere();</script></body>"), encoding="utf-8")

    dom, console = dump_dom(broken, tmp_path)

    assert 'data-js-errors="1"' in html_tag(dom)
    assert any("notDefinedAnywhere" in line for line in console)


def test_screenshot_of_a_report(tmp_path: Path) -> None:
    diag = diagnose(lifelike_run())  # the real rules: a starved input pipeline is this record's root cause
    assert diag.verdict.root_cause == "input-pipeline-bound"
    page = write_page(diag, tmp_path / "report.html")
    TEST_OUTPUT.mkdir(exist_ok=True)
    shot = TEST_OUTPUT / "report-screenshot.png"
    shot.unlink(missing_ok=True)

    chromium(
        tmp_path / "profile", page.as_uri(), "--hide-scrollbars", "--window-size=1200,2750", f"--screenshot={shot}"
    )

    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 20_000  # a blank page is a few kB
    if os.environ.get(UPDATE_DOCS_ENV):
        shutil.copyfile(shot, DOCS_SCREENSHOT)
