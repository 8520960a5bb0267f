"""Rendering a diagnosis the way the tests look at it: rich's fixed-width console, as rich's own render tests do.

`render_text` gives the plain text of one report at one width: plain mode (what a pipe or a CI log gets), or the
terminal's boxes and colours with the escape codes taken out so that a file can hold the expected text.
"""

from __future__ import annotations

import io
import re
from pathlib import Path

from rich.console import Console

from gputriage.diagnosis import Diagnosis
from gputriage.report import terminal

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
BOX_CHARS = set("╭╮╰╯│─━┃╇┼╋┡┩")
WIDTHS = (60, 80, 120)


def console_for(width: int, *, boxed: bool) -> Console:
    """A fixed-width console: plain (no colour system, as for a pipe) or a colour terminal."""
    if boxed:
        return Console(file=io.StringIO(), width=width, force_terminal=True, color_system="truecolor", emoji=False)
    return Console(file=io.StringIO(), width=width, color_system=None, emoji=False)


def render_text(
    diag: Diagnosis, width: int, *, boxed: bool = False, verbose: bool = False, out_dir: Path | None = None
) -> str:
    console = console_for(width, boxed=boxed)
    terminal.render(diag, console, verbose=verbose, out_dir=out_dir)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    return ANSI.sub("", out)


def lines_over(text: str, width: int) -> list[str]:
    return [line for line in text.splitlines() if len(line) > width]
