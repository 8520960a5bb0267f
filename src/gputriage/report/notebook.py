"""A finished diagnosis as a notebook cell's output: the HTML report in an iframe, or the terminal report as text.

`gputriage.session()` objects show themselves this way in Jupyter and IPython; the `%%triage` magic
(`integrations/notebook.py`) returns such a session.
"""

from __future__ import annotations

import io

from gputriage.diagnosis import Diagnosis
from gputriage.report import terminal
from gputriage.report.html import render_html
from gputriage.report.output import make_console
from gputriage.stdlib import html

# The report page is a whole HTML document with its own CSS and scripts. Inside an iframe it neither restyles the
# notebook nor depends on the notebook trusting inline scripts in cell output.
FRAME_HEIGHT_PX = 720
TEXT_WIDTH = 100


def diagnosis_html(diag: Diagnosis, height_px: int = FRAME_HEIGHT_PX) -> str:
    """The HTML report, isolated in an iframe, for a notebook cell's output."""
    page = html.escape(render_html(diag), quote=True)
    return (
        f'<iframe srcdoc="{page}" title="gputriage report" '
        f'style="width: 100%; height: {height_px}px; border: 1px solid #ddd;"></iframe>'
    )


def diagnosis_text(diag: Diagnosis, width: int = TEXT_WIDTH) -> str:
    """The terminal report as plain text (no colour codes), for IPython's text display."""
    buffer = io.StringIO()
    terminal.render(diag, make_console(buffer, width))
    return buffer.getvalue()
