"""The evidence sections: what a command measures, in one place.

`Run` (one command's record) and `RankInfo` (one rank of a merged torchrun job) both carry these sections, so a new
collector adds its section here once: the record's JSON, `Run.self_check`, the rank merge and the ladder's "which rungs
were measured" all follow from this class. Each section type answers `self_check()` (its invariants, as sentences),
`measured_rungs()` (the rungs it holds evidence for) and `unmeasured_rungs()` (the rungs it is about but could not
measure, each with its reason); `record/coverage.py` turns them into the ladder's "measured" or "not measured, because".
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import msgspec

from gputriage.record.compute import ComputeSection
from gputriage.record.environment import Environment
from gputriage.record.gpu import GpuSection
from gputriage.record.placement import PlacementSection
from gputriage.record.process import ProcessSection
from gputriage.record.sampler import SamplerSection
from gputriage.record.source import SourceSection
from gputriage.record.stand_in import StandInSection
from gputriage.record.steps import StepsSection
from gputriage.record.trace import TraceSection


class Section(Protocol):
    def self_check(self) -> list[str]: ...

    def measured_rungs(self) -> set[int]:
        """The rungs this section holds evidence for (not merely the rungs it is about)."""
        ...

    def unmeasured_rungs(self) -> dict[int, str]:
        """The rungs this section is about but could not measure, with the reason (e.g. "no model ran a forward")."""
        ...


class Sections(msgspec.Struct, kw_only=True):
    """A section is None when the command did not measure it."""

    environment: Environment | None = None
    process: ProcessSection | None = None
    placement: PlacementSection | None = None
    compute: ComputeSection | None = None
    steps: StepsSection | None = None
    gpu: GpuSection | None = None
    trace: TraceSection | None = None
    # The job ran on a stand-in device (run --preflight, or the meta stand-in): what the verdict may judge.
    stand_in: StandInSection | None = None
    sampler: SamplerSection | None = None
    source: SourceSection | None = None

    def present_sections(self) -> Iterator[tuple[str, Section]]:
        for name in SECTION_NAMES:
            section = getattr(self, name)
            if section is not None:
                yield name, section

    def copy_sections_from(self, other: Sections) -> None:
        for name in SECTION_NAMES:
            setattr(self, name, getattr(other, name))


SECTION_NAMES: tuple[str, ...] = Sections.__struct_fields__
