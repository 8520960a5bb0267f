"""Top level of the Run record, and its JSON round trip."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgspec

from gputriage.errors import InputError
from gputriage.record.compute import ComputeSection
from gputriage.record.environment import Environment
from gputriage.record.gpu import GpuSection
from gputriage.record.placement import PlacementSection
from gputriage.record.process import ProcessSection
from gputriage.record.ranks import RankInfo, RanksSection
from gputriage.record.stand_in import StandInSection
from gputriage.record.steps import StepsSection
from gputriage.record.trace import TraceSection

RUN_SCHEMA = "gputriage.run/1"


@dataclass
class Run:
    """Everything one command measured. A section is None when that command did not measure it.

    Which sections are present decides which rungs of the ladder are "measured" rather than "skipped".
    """

    command: str  # env | run | trace | watch | demo | report
    schema: str = RUN_SCHEMA
    created_at_s: float = field(default_factory=time.time)
    argv: list[str] = field(default_factory=list)
    # The device the job is meant to use (--expect-device); None means "the first available accelerator".
    expect_device: str | None = None
    # Set when this record belongs to one rank of a distributed job.
    rank_info: RankInfo | None = None
    environment: Environment | None = None
    process: ProcessSection | None = None
    placement: PlacementSection | None = None
    compute: ComputeSection | None = None
    steps: StepsSection | None = None
    gpu: GpuSection | None = None
    trace: TraceSection | None = None
    ranks: RanksSection | None = None
    # The job ran on a stand-in device (run --preflight, or the meta stand-in): what the verdict may judge.
    stand_in: StandInSection | None = None

    def expected_device_type(self) -> str | None:
        """The device type of --expect-device ("cuda" for "cuda:1"); None when the flag was not given."""
        if not self.expect_device:
            return None
        return self.expect_device.split(":", 1)[0].strip().lower()

    def self_check(self) -> list[str]:
        """Return every broken invariant as a sentence (empty when the record is consistent).

        Each section checks itself (e.g. the step phases add up to the step's wall time); a list rather than an
        assert so a saved record from an older version can still be rendered with a note.
        """
        problems: list[str] = []
        if self.schema != RUN_SCHEMA:
            problems.append(f"schema is {self.schema!r}, expected {RUN_SCHEMA!r}")
        for section in (
            self.environment,
            self.process,
            self.placement,
            self.compute,
            self.steps,
            self.gpu,
            self.trace,
            self.ranks,
            self.stand_in,
        ):
            if section is not None:
                problems.extend(section.self_check())
        return problems


def run_to_dict(run: Run) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(run)
    return out


def run_from_dict(doc: dict[str, Any]) -> Run:
    """Build a Run from its JSON form; unknown keys (a newer minor version) are ignored."""
    schema = doc.get("schema")
    if not isinstance(schema, str) or not schema.startswith("gputriage.run/"):
        raise InputError(f"not a gputriage run record (schema is {schema!r}, expected {RUN_SCHEMA!r})")
    try:
        return msgspec.convert(doc, type=Run, strict=False)
    except msgspec.ValidationError as exc:
        raise InputError(f"run record does not match {RUN_SCHEMA}: {exc}") from exc


def save_run(run: Run, path: Path) -> None:
    path.write_bytes(msgspec.json.format(msgspec.json.encode(run), indent=1))


def read_json_object(path: Path, expected: str) -> dict[str, Any]:
    """Read a JSON object from `path`; any failure is one InputError line naming what was `expected`."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        doc = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise InputError(f"{path} is not valid JSON ({exc}); expected {expected}") from exc
    if not isinstance(doc, dict):
        raise InputError(f"{path} is not {expected} (top level is not an object)")
    return doc


def load_run(path: Path) -> Run:
    return run_from_dict(read_json_object(path, "a gputriage run record"))
