"""What one step is: an optimizer step, unless each DataLoader batch holds several of them (a WGAN's critic loop), then
the batch; micro-batches of gradient accumulation fold into their optimizer step. Whatever the unit, the census counts
on the final count only (trial 9: a WGAN-GP's per-batch `.item()` fell between three census steps of its critic loop,
and the job was judged HEALTHY)."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from gputriage.collectors.probe import RunProbe  # noqa: E402
from gputriage.record import Run  # noqa: E402


def observed(job: Any, steps_limit: int | None = None) -> Run:
    """`job(read)` under the probes; `read()` is a host read of a device value as the census sees one (on this CPU
    machine a CPU tensor's `.item()` reads nothing from a device)."""
    probe = RunProbe("cpu", steps_limit=steps_limit)
    run = Run(command="run")
    probe.start(run)
    try:
        job(lambda: probe.record_host_sync("item", "cuda"))
    finally:
        probe.finish(run)
    return run


def critic_loop(read: Any, critic_steps: int, batches: int = 8) -> None:
    critic, gen = nn.Linear(8, 1), nn.Linear(4, 8)
    opt_critic = torch.optim.SGD(critic.parameters(), lr=0.01)
    opt_gen = torch.optim.SGD(gen.parameters(), lr=0.01)
    for (real,) in DataLoader(TensorDataset(torch.randn(batches * 4, 8)), batch_size=4):
        for _ in range(critic_steps):
            loss_critic = critic(gen(torch.randn(4, 4)).detach()).mean() - critic(real).mean()
            opt_critic.zero_grad()
            loss_critic.backward()
            opt_critic.step()
        loss_gen = -critic(gen(torch.randn(4, 4))).mean()
        opt_gen.zero_grad()
        loss_gen.backward()
        opt_gen.step()
        read()  # once per batch: loss_critic.item()


def syncs_per_step(run: Run) -> dict[str, float]:
    assert run.compute is not None and run.compute.window_steps
    return {s.kind: s.count / run.compute.window_steps for s in run.compute.syncs}


def test_several_optimizer_steps_per_batch_make_the_batch_the_step() -> None:
    run = observed(lambda read: critic_loop(read, 5))
    assert run.steps is not None
    assert run.steps.optimizer_steps_per_batch == 5
    assert run.steps.step_source == "dataloader"
    assert len(run.steps.steps) == 8  # one per batch, not 40 critic steps
    assert run.steps.unit_note() == "a step is one DataLoader batch, which held 5 steps of the first optimizer"
    # the read once per batch is in every census step, counted on batches
    assert syncs_per_step(run) == {"item": 1.0}
    assert run.compute is not None and run.compute.window_steps == 3


def test_steps_limit_counts_batches_once_the_batch_is_the_step() -> None:
    run = observed(lambda read: critic_loop(read, 5, batches=12), steps_limit=6)
    assert run.steps is not None and run.steps.steps_observed == 6


def test_one_optimizer_step_per_batch_stays_the_optimizer_step() -> None:
    run = observed(lambda read: critic_loop(read, 1))
    assert run.steps is not None
    assert run.steps.optimizer_steps_per_batch is None and run.steps.step_source == "optimizer"
    assert len(run.steps.steps) == 8
    assert syncs_per_step(run) == {"item": 1.0}


def test_an_evaluation_loader_between_training_chunks_does_not_regroup_the_steps() -> None:
    """Training on tensors it slices itself, with a validation loader (not under no_grad) every 4 steps: the loader's
    batches hold no training step, and the steps between two validations are no batch of theirs."""

    def job(read: Any) -> None:
        model = nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        data, val = torch.randn(64, 8), DataLoader(TensorDataset(torch.randn(8, 8)), batch_size=4)
        for i in range(16):
            if i % 4 == 0:
                for (x,) in val:
                    model(x).mean()
            loss = model(data[i * 4 : i * 4 + 4]).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    run = observed(job)
    assert run.steps is not None
    assert run.steps.optimizer_steps_per_batch is None and run.steps.step_source == "optimizer"
    assert len(run.steps.steps) == 16


def test_gradient_accumulation_counts_syncs_on_optimizer_steps_only() -> None:
    """Four micro-batches per optimizer step, a read per micro-batch: four reads per step, none of the micro-batches
    counted before the first optimizer step re-based the count."""

    def job(read: Any) -> None:
        model = nn.Linear(8, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.01)
        for i, (x,) in enumerate(DataLoader(TensorDataset(torch.randn(96, 8)), batch_size=2)):
            loss = model(x).mean() / 4
            loss.backward()
            read()
            if i % 4 == 3:
                opt.step()
                opt.zero_grad()

    run = observed(job)
    assert run.steps is not None and run.steps.step_source == "optimizer"
    assert run.steps.optimizer_steps_per_batch is None
    assert syncs_per_step(run) == {"item": 4.0}


def test_a_preflight_finds_the_read_once_per_batch_of_a_critic_loop(tmp_path: Any) -> None:
    from run_cases import Case, mark_line, run_case

    result = run_case(Case(["critic_loop.py"]), tmp_path, preflight=True, steps=6)
    finding = result.finding("host-sync-in-loop")
    assert finding["where"] == mark_line("critic_loop.py", "sync")
    assert finding["evidence"]["syncs_per_step"] == 2
    assert result.report["steps"]["optimizer_steps_per_batch"] == 5
    # the preflight's own account of where it ended the job says what its steps were
    assert (
        "(a step is one DataLoader batch, which held 5 steps of the first optimizer)"
        in result.report["verdict"]["scope"]
    )
