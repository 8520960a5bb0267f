"""Human formatting shared by the file renderers. A missing value is written "not measured", never a number."""

from __future__ import annotations

import itertools
import math
import re
from datetime import datetime, timezone
from typing import Any

from gputriage.record.numbers import duration_text, pct_text
from gputriage.report.sanitize import terminal_text

NOT_MEASURED = "not measured"

_KIB = 1024


def duration(seconds: float | None) -> str:
    """A step-scale time: seconds, milliseconds or microseconds, whichever reads best."""
    if seconds is None or finite(seconds) is None:
        return NOT_MEASURED
    return duration_text(seconds)


def percent(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return NOT_MEASURED
    if 99.5 <= value < 100:  # "100%" is a GPU never idle: 99.6% of a real trace showed so (a trial)
        return f"{math.floor(value * 10) / 10:.1f}%"
    return f"{value:.1f}%" if abs(value) < 10 else f"{value:.0f}%"


def share(value: float | None) -> str:
    """A share of the step (record/numbers.py): always one decimal, as the rules write it in findings."""
    if value is None or not math.isfinite(value):
        return NOT_MEASURED
    return pct_text(value)


def size(num_bytes: float | None) -> str:
    if num_bytes is None:
        return NOT_MEASURED
    value = float(num_bytes)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < _KIB:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= _KIB
    return f"{value:.1f} TiB"


def count(value: int | None) -> str:
    """Parameter counts and the like: 11.7 M, 25.6 k, or the exact number when small."""
    if value is None:
        return NOT_MEASURED
    if abs(value) >= 1e9:
        return f"{value / 1e9:.2f} B"
    if abs(value) >= 1e6:
        return f"{value / 1e6:.1f} M"
    if abs(value) >= 1e4:
        return f"{value / 1e3:.1f} k"
    return str(value)


def timestamp(epoch_s: float) -> str:
    """When the record was made, in UTC; a clock value no calendar can show reads "unknown"."""
    try:
        return datetime.fromtimestamp(epoch_s, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    except (ValueError, OverflowError, OSError):
        return "unknown"


def finite(value: float | None) -> float | None:
    """None for NaN and infinities, which no chart or table can place."""
    return value if value is not None and math.isfinite(value) else None


def text(value: str | int | None) -> str:
    return NOT_MEASURED if value is None else terminal_text(str(value))


# Evidence for programs, not people: `edits` is the structured code edit that `--patch` writes (the fix shows it).
MACHINE_ONLY_EVIDENCE = frozenset({"edits"})


def shown_evidence(evidence: dict[str, Any]) -> dict[str, Any]:
    """The evidence a person reads: every key but the machine-only ones (report.json keeps them all)."""
    return {k: v for k, v in evidence.items() if k not in MACHINE_ONLY_EVIDENCE}


def evidence_value(value: Any) -> str:
    """Evidence values as the terminal shows them, but readable: None is "n/a", big numbers get thousands separators.

    A rule's None means either "not measured" or "there is none" (torch.version.cuda of a CPU build); "n/a" is true
    of both.
    """
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, list):
        return int_ranges(value) if _runs_of_ints(value) else ", ".join(evidence_value(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={evidence_value(v)}" for k, v in value.items())
    return terminal_text(str(value))


def _runs_of_ints(value: list[Any]) -> bool:
    """A sorted list of distinct ints with a run of 3 or more consecutive ones (the ranks of a collapsed finding)."""
    if len(value) < 3 or not all(type(v) is int for v in value):
        return False
    steps = [b - a for a, b in itertools.pairwise(value)]
    return all(d > 0 for d in steps) and any(a == b == 1 for a, b in itertools.pairwise(steps))


def int_ranges(value: list[int]) -> str:
    """[0, 1, 2, 3, 7, 9, 10, 11] -> "0-3, 7, 9-11 (8)": the 27,000 ranks of one finding in one line."""
    parts: list[str] = []
    start = prev = value[0]
    for v in [*value[1:], None]:
        if v is not None and v == prev + 1:
            prev = v
            continue
        parts.append(_number(start) if start == prev else f"{_number(start)}-{_number(prev)}")
        if v is not None:
            start = prev = v
    shown = ", ".join(parts[:MAX_RANGES]) + (
        f", ... ({len(parts) - MAX_RANGES} more runs)" if len(parts) > MAX_RANGES else ""
    )
    return f"{shown} ({_number(len(value))})"


MAX_RANGES = 16


def _number(value: float) -> str:
    if math.isfinite(value) and abs(value) >= 1e4:
        return f"{value:,.0f}"  # 6,660,000 reads better than 6.66e+06, and keeps every digit of a byte count
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# The first word of a line that is a command for the shell, not Python: the fixes name installers, drivers' tools,
# launchers and containers. `python -m pip ...` is a shell line; `python` never starts a line of Python code.
_SHELL_WORDS = (
    "accelerate apptainer apt apt-get brew cd chmod conda curl deepspeed dnf docker echo export gputriage git kubectl "
    "ldconfig ls mamba micromamba modprobe module nvcc nvidia-container-cli nvidia-ctk nvidia-smi pip pip3 podman "
    "poetry python python3 rm sbatch set singularity source srun sudo systemctl torchrun unset uv wget wsl yum"
)
SHELL_COMMANDS = frozenset(_SHELL_WORDS.split())
_ENV_PREFIX = re.compile(r"^(?:[A-Z_][A-Z0-9_]*=\S*\s+)+")  # CUDA_VISIBLE_DEVICES=0 python ...
SHELL, PYTHON, TEXT = "sh", "python", "text"


def is_shell_line(line: str) -> bool:
    """`pip install ...`, `CUDA_VISIBLE_DEVICES=0 python train.py`, `sudo ...`: a command line, not Python."""
    words = _ENV_PREFIX.sub("", line.strip()).split()
    return bool(words) and (words[0] in SHELL_COMMANDS or words[0] != line.strip().split()[0])


def fix_blocks(fix: str) -> list[tuple[str, str]]:
    """A fix split into runs of shell lines and Python lines, each with its language ("sh" | "python"), so a
    Markdown fence or a highlighter gets the right one. A comment belongs to the code after it (the last ones to the
    code before); a fix of comments only is "text"."""
    kinds: list[str | None] = [
        None if not line.strip() or line.lstrip().startswith("#") else SHELL if is_shell_line(line) else PYTHON
        for line in fix.splitlines()
    ]
    following: str | None = None
    for i in range(len(kinds) - 1, -1, -1):  # a comment takes the kind of the code below it
        following = kinds[i] = kinds[i] or following
    preceding = next((k for k in kinds if k), TEXT)
    blocks: list[tuple[str, list[str]]] = []
    for kind, line in zip(kinds, fix.splitlines(), strict=True):
        preceding = kind or preceding
        if blocks and blocks[-1][0] == preceding:
            blocks[-1][1].append(line)
        else:
            blocks.append((preceding, [line]))
    return [(kind, "\n".join(lines)) for kind, lines in blocks]
