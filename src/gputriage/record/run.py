"""Top level of the Run record, and how it is written. Reading one back is `record/decode.py`: the input boundary."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import msgspec

from gputriage.outdir import atomic_write
from gputriage.record.ranks import RankInfo, RanksSection
from gputriage.record.sections import Sections
from gputriage.textsafe import encode_safely

RUN_SCHEMA = "gputriage.run/1"


class Run(Sections, kw_only=True):
    """Everything one command measured: its evidence sections (see `Sections`), and what the run was about.

    Which sections are present decides which rungs of the ladder are "measured" rather than "skipped".
    """

    command: str  # env | run | trace | watch | demo | report
    schema: str = RUN_SCHEMA
    created_at_s: float = msgspec.field(default_factory=time.time)
    argv: list[str] = msgspec.field(default_factory=list)
    # --expect-device as the user gave it ("cuda:1"); None: not given. Ask `record.device.judged_device(run)` which
    # device the run is judged for.
    expect_device: str | None = None
    # Without --expect-device: the device type `run` resolved at the job's start (see record/device.py).
    resolved_device: str | None = None
    # Set when this record belongs to one rank of a distributed job.
    rank_info: RankInfo | None = None
    # The merged view of a distributed job's ranks.
    ranks: RanksSection | None = None

    def self_check(self) -> list[str]:
        """Return every broken invariant as a sentence (empty when the record is consistent).

        Each section checks itself (e.g. the step phases add up to the step's wall time); a list rather than an
        assert so a saved record from an older version can still be rendered with a note.
        """
        problems: list[str] = []
        if self.schema != RUN_SCHEMA:
            problems.append(f"schema is {self.schema!r}, expected {RUN_SCHEMA!r}")
        for _, section in self.present_sections():
            problems.extend(section.self_check())
        if self.ranks is not None:
            problems.extend(self.ranks.self_check())
        return problems

    def measured_rungs(self) -> set[int]:
        """Which rungs this record has evidence for; the others are "skipped", not "pass"."""
        rungs: set[int] = set()
        for _, section in self.present_sections():
            rungs |= section.measured_rungs()
        return rungs


def run_to_dict(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(run)
    return out


def encode_run(run: Run) -> bytes:
    return msgspec.json.format(encode_safely(run), indent=1)


def save_run(run: Run, path: Path) -> None:
    """Write the record atomically (see outdir.atomic_write)."""
    atomic_write(path, encode_run(run))
