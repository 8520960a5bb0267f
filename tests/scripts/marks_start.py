"""Leaves a file behind as soon as it starts: a test can tell whether any of the user's code ran."""

from pathlib import Path

Path("started.txt").write_text("the script ran\n")
