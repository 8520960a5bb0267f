"""Step timing: where each training step's wall time went.

The phases follow the sequence people draw for this problem: load data -> send data -> perform computation (forward)
-> return results (host syncs) -> backpropagate (backward + optimizer). Time no probe attributed lands in `other_s`,
so the phases always add up to the step's wall time (checked by `self_check`).
"""

from __future__ import annotations

import msgspec

from gputriage.record.inconclusive import Inconclusive

# Timer resolution and float sums allow this much slack when checking that phases add up to wall time.
PHASE_SUM_TOLERANCE_S = 1e-6


def stand_in_within(stand_in_s: float | None, wall_s: float) -> float:
    """A stand-in's compute time within the wall time it was part of: a record from a file may say less than 0 or more
    than the whole span, and the stand-in then takes no more than the wall time, nor adds any."""
    return min(max(stand_in_s or 0.0, 0.0), max(wall_s, 0.0))


class Step(msgspec.Struct):
    index: int
    start_s: float  # seconds since the run started
    wall_s: float
    data_wait_s: float = 0.0  # blocked in DataLoader.__next__
    h2d_s: float = 0.0  # copying the batch to the device (.to / .cuda)
    forward_s: float = 0.0
    sync_s: float = 0.0  # blocked on the device: .item(), .cpu(), .tolist(), synchronize
    backward_s: float = 0.0
    optimizer_s: float = 0.0
    other_s: float = 0.0
    rank: int | None = None
    # On a stand-in device (run --preflight): host time inside its ops, which the host computes for real but a GPU
    # would run asynchronously, and its mode's cost on the step's other torch calls, which a GPU run does not pay
    # (record/stand_in.py). Part of the phases, not a phase of its own. None on a real device.
    stand_in_s: float | None = None
    # Of stand_in_s, the part spent inside the data wait (a collate_fn or Dataset that builds the batch on the device).
    wait_stand_in_s: float | None = None
    # Of stand_in_s, the part in each phase (data_wait, h2d, forward, sync, backward, optimizer, other; only those with
    # some), read by the phase clock at each phase change. None on a real device and in records made before it.
    stand_in_phases_s: dict[str, float] | None = None

    def stand_in_spent_s(self) -> float:
        """The stand-in's compute in this step, within what the step can hold (see `stand_in_within`)."""
        return stand_in_within(self.stand_in_s, self.wall_s)

    def host_s(self) -> float:
        """The step's time on the host as a GPU run would spend it: the wall time without the stand-in's compute."""
        return self.wall_s - self.stand_in_spent_s()

    def phase_sum_s(self) -> float:
        return (
            self.data_wait_s
            + self.h2d_s
            + self.forward_s
            + self.sync_s
            + self.backward_s
            + self.optimizer_s
            + self.other_s
        )


# Step 0 pays for worker start-up, lazy initialisation and allocator growth: it is never part of a step number.
WARMUP_STEPS = 1


# Steps after warm-up that a judgement of rung 5 (a finding, or a pass) needs: fewer are too thin to tell a wait from
# the noise of one slow step, and say too little about a pipeline that prefetches a few batches ahead (rules/steps.py
# uses the same count for its warnings).
MIN_JUDGED_STEPS = 5


def steady_steps(steps: list[Step]) -> list[Step]:
    """The steps after warm-up (none when only the warm-up step completed). Every step number rests on these."""
    return list(steps[WARMUP_STEPS:])


class LoaderInfo(msgspec.Struct):
    """The DataLoader feeding the steps, as the user configured it."""

    dataset_class: str | None = None
    dataset_len: int | None = None
    batch_size: int | None = None
    num_workers: int | None = None
    pin_memory: bool | None = None
    persistent_workers: bool | None = None
    prefetch_factor: int | None = None
    sampler_class: str | None = None
    is_iterable_dataset: bool | None = None
    where: str | None = None  # file:line where the DataLoader was created
    has_transform: bool | None = None  # the dataset carries a `transform` (torchvision style)
    batches: int = 0  # batches this loader handed to the observed steps
    wait_s: float = 0.0  # time the observed steps waited in its __next__
    # Time to produce one batch (fetch, transform, collate), which the worker advice weighs against the step: the median
    # wait in __next__ with num_workers=0 ("main-process": the loop loads the batch itself), or with workers, derived
    # from the pace the batches arrived at while the loop waited for them ("workers-derived": num_workers x the median
    # interval). None when not known: the loader kept up, or too few batches were seen. See collectors/probe/loader.py.
    batch_load_s: float | None = None
    batch_load_source: str | None = None  # main-process | workers-derived
    # With num_workers=0: the CPU time the loop's thread spent producing one batch (median). Near batch_load_s, the
    # loading is CPU work, and workers beyond the cores cannot speed it up; far below, it waits (files, network) and
    # more workers than cores still help. None with workers: their CPU time is not seen from the loop.
    batch_load_cpu_s: float | None = None
    # The device of the first tensor of the first batch the loop received: not "cpu" when the Dataset or the collate_fn
    # makes the batch on the device itself (then workers cannot help until that moves into the loop). None: not seen.
    batch_device: str | None = None
    # The installed package that built the loader (transformers' Trainer from TrainingArguments): its options are set
    # there, not in a DataLoader(...) call of the user's. None: the user's own code built it.
    built_by: str | None = None


class StepsSection(msgspec.Struct):
    steps: list[Step] = msgspec.field(default_factory=list)
    loader: LoaderInfo | None = None
    # The evaluation loader the job waited on longest between training steps (batches fetched with no backward
    # between them, or under no_grad, while another loader trains): its wait_s and batches are the evaluation's, in
    # the measured steps (their "other" part). None: no evaluation ran in them.
    eval_loader: LoaderInfo | None = None
    steps_observed: int = 0  # how many steps the probes watched (--steps)
    steps_total: int | None = None  # how many steps the job ran in all, when counted
    step_source: str | None = None  # optimizer | dataloader | backward: how steps were detected
    # When each DataLoader batch held several steps of the first optimizer (a GAN's critic loop, several updates per
    # rollout), steps follow the batches: how many optimizer steps the first batch held. None: one or fewer.
    optimizer_steps_per_batch: int | None = None
    cpu_count: int | None = None  # CPU cores this process may use (sched_getaffinity), for the num_workers fix

    def unit_note(self) -> str | None:
        """What one step is, where it is not one optimizer step as a reader would assume (None there)."""
        per_batch = self.optimizer_steps_per_batch
        if per_batch is None:
            return None
        return f"a step is one DataLoader batch, which held {per_batch} steps of the first optimizer"

    def measured_rungs(self) -> set[int]:
        """Rung 5 rests on the steps after warm-up (step 0 pays for start-up and is never judged), at least
        MIN_JUDGED_STEPS of them."""
        return {5} if len(steady_steps(self.steps)) >= MIN_JUDGED_STEPS else set()

    def unmeasured_rungs(self) -> dict[int, str]:
        steady = len(steady_steps(self.steps))
        if steady >= MIN_JUDGED_STEPS:
            return {}
        if steady:
            # a pass on 3 steps read "healthy" over an 89% data wait that 6 steps called critical (a trial)
            return {
                5: Inconclusive(
                    f"too few steps to judge: {steady} after the warm-up step, of the {MIN_JUDGED_STEPS} a judgement "
                    "of what the step waits for needs (run more steps: `--steps 12`, or a longer job)"
                )
            }
        return {5: "only the warm-up step completed" if self.steps else "no step completed"}

    def self_check(self) -> list[str]:
        problems = []
        for step in self.steps:
            slack_s = PHASE_SUM_TOLERANCE_S + 1e-9 * step.wall_s
            if abs(step.phase_sum_s() - step.wall_s) > slack_s:
                problems.append(
                    f"step {step.index}: phases sum to {step.phase_sum_s():.9f}s, wall is {step.wall_s:.9f}s"
                )
            if step.wall_s < 0 or min(step.data_wait_s, step.forward_s, step.other_s) < 0:
                problems.append(f"step {step.index}: negative time")
            if step.stand_in_s is not None and not 0 <= step.stand_in_s <= step.wall_s + slack_s:
                problems.append(f"step {step.index}: stand-in time {step.stand_in_s}s outside 0..{step.wall_s}s")
        return problems
