"""The job ran on a stand-in device instead of a real accelerator, and what that allows the verdict to say.

Two kinds: a preflight (`run --preflight`), where a script written for CUDA runs unchanged with CUDA simulated and
its tensors computed on the CPU (or only shaped, on meta); and the meta stand-in of `--expect-device meta`, for
scripts written for `meta`. Either way host reads of tensors without values (meta) returned placeholders, listed here
with their lines, because control flow that depends on them may differ from a real run.
"""

from __future__ import annotations

from typing import Any

import msgspec

PREFLIGHT_LABEL = "preflight on a stand-in device"
# What a preflight judges and what it cannot, in the words every renderer shows.
PREFLIGHT_JUDGES = (
    "judged: placement of data and model, the op census, host syncs with their lines, and CPU work in the step "
    "(rungs 2-4), and the host side of rung 5 (DataLoader wait, host time per step)"
)
PREFLIGHT_CANNOT = (
    "not judged: GPU timing and utilisation (rung 5) and the GPU machine's set-up (rung 1): run `gputriage run` "
    "and `gputriage env` on the GPU machine for those"
)


class PlaceholderSite(msgspec.Struct):
    """A line of the user's code that read a tensor holding no values, and got a placeholder."""

    kind: str  # scalar (.item(), bool(), float(), int()) | cpu (.cpu(), .tolist(), .to("cpu"))
    where: str | None = None
    code: str | None = None
    count: int = 0


# The first words of the job's error where the preflight's stand-in meets what it cannot simulate (a tensor sent to
# another process): the verdict then says the preflight stopped there, not that the script is at fault.
STAND_IN_LIMIT = "gputriage --preflight: "


class StandInSection(msgspec.Struct):
    preflight: bool  # True: run --preflight; False: the meta stand-in of --expect-device meta
    label: str | None = None  # "preflight on a stand-in device" for a preflight
    simulated: str | None = None  # the device type the script sees ("cuda")
    backing: str = "meta"  # where the stand-in's values live: cpu (computed for real) | meta (shapes only)
    device_name: str | None = None
    device_count: int | None = None
    judged_rungs: list[int] = msgspec.field(default_factory=list)
    judges: str | None = None
    cannot_judge: str | None = None
    # the preflight ended the job on purpose after this many steps (exit code 0); None: the job ended by itself
    stopped_after_steps: int | None = None
    compiled_eagerly: bool = False  # the script called torch.compile, which the preflight ran eagerly
    # host time the stand-in cost the job, which a GPU run does not pay: computing its ops (a GPU runs them
    # asynchronously), and its mode's cost on each of the job's other torch calls (mode_calls x mode_call_us)
    stand_in_s: float = 0.0
    mode_calls: int = 0
    mode_call_us: float | None = None  # measured on this host when the preflight started; None: not a preflight
    placeholder_reads: list[PlaceholderSite] = msgspec.field(default_factory=list)

    def measured_rungs(self) -> set[int]:
        return set()  # it bounds what the other sections may judge; it answers no rung itself

    def unmeasured_rungs(self) -> dict[int, str]:
        if not self.preflight:
            return {}
        # A preflight judges neither the GPU machine's set-up nor the GPU's timing.
        return {1: "a preflight does not look at the GPU machine (run `gputriage env` there)"}

    def self_check(self) -> list[str]:
        problems = []
        if self.stand_in_s < 0:
            problems.append("stand_in: negative stand-in time")
        if self.mode_calls < 0 or (self.mode_call_us is not None and self.mode_call_us < 0):
            problems.append("stand_in: negative mode calls or cost")
        if self.preflight and self.label != PREFLIGHT_LABEL:
            problems.append("stand_in: a preflight must carry its label")
        return problems


# Rungs a preflight judges: placement (2, 3), the op census and syncs (4), the host side of rung 5.
PREFLIGHT_RUNGS = (2, 3, 4, 5)


def preflight_section(backing: str, **measured: Any) -> StandInSection:
    """A preflight's section: what every preflight says of itself, and what this one `measured` (its device, its
    stop, its costs); a job that ended before its `import torch` has nothing measured."""
    return StandInSection(
        preflight=True,
        label=PREFLIGHT_LABEL,
        simulated="cuda",
        backing=backing,
        judged_rungs=list(PREFLIGHT_RUNGS),
        judges=PREFLIGHT_JUDGES,
        cannot_judge=PREFLIGHT_CANNOT,
        **measured,
    )
