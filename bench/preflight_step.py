"""The preflight stand-in's cost per training step, against the same step on plain CPU tensors, in this process.

A small transformer classifier (2 encoder layers, d_model 64, batch 8 x 64 tokens, AdamW), one thread, thread CPU
time (steadier than wall time on a shared machine), best of several rounds. Three ways: plain CPU tensors, the
stand-in computing on the CPU (the default `--preflight`), the stand-in on a meta backing (`--preflight-backing
meta`). The stand-in's cost is its Python dispatch per op; meta's kernels are largely Python too, so on a small model
the meta backing is the slower one.

    .venv/bin/python bench/preflight_step.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import torch
from torch import nn

from gputriage.collectors.preflight import Backing, Preflight
from gputriage.collectors.probe.state import ProbeState
from gputriage.record import Run

STEPS_PER_ROUND = 5


class _Probe:
    """What the preflight asks of the run probe; nothing is recorded here."""

    def __init__(self) -> None:
        self.state = ProbeState(expected_device="cuda")
        self.step_listeners: list[Callable[[int], None]] = []

    def record_host_sync(self, kind: str, device: str) -> None:
        return None


def make_step(device: str) -> Callable[[], None]:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(d_model=64, nhead=2, dim_feedforward=128, batch_first=True)
    model = nn.Sequential(nn.Embedding(1000, 64), nn.TransformerEncoder(layer, num_layers=2)).to(device)
    head = nn.Linear(64, 2).to(device)
    opt = torch.optim.AdamW([*model.parameters(), *head.parameters()], lr=1e-4)
    tokens = torch.randint(0, 1000, (8, 64)).to(device)
    labels = torch.randint(0, 2, (8,)).to(device)

    def step() -> None:
        loss = nn.functional.cross_entropy(head(model(tokens).mean(dim=1)), labels)
        loss.backward()
        opt.step()
        opt.zero_grad()

    return step


def best_step_s(step: Callable[[], None], rounds: int) -> float:
    step()  # warm-up
    times = []
    for _ in range(rounds):
        start_s = time.thread_time()
        for _ in range(STEPS_PER_ROUND):
            step()
        times.append((time.thread_time() - start_s) / STEPS_PER_ROUND)
    return min(times)


def on_stand_in(backing: Backing, rounds: int) -> float:
    preflight = Preflight(_Probe(), stop_after_steps=None, backing=backing)
    run = Run(command="run")
    preflight.start(run)
    try:
        return best_step_s(make_step("cuda"), rounds)
    finally:
        preflight.finish(run)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    plain_s = best_step_s(make_step("cpu"), args.rounds)
    cpu_s = on_stand_in(Backing.CPU, args.rounds)
    meta_s = on_stand_in(Backing.META, args.rounds)
    print(f"small transformer, one thread, best of {args.rounds} rounds of {STEPS_PER_ROUND} steps (thread CPU time)")
    print(f"plain CPU tensors          {plain_s * 1e3:7.1f} ms/step")
    print(f"stand-in, CPU backing      {cpu_s * 1e3:7.1f} ms/step  ×{cpu_s / plain_s:.2f}")
    print(f"stand-in, meta backing     {meta_s * 1e3:7.1f} ms/step  ×{meta_s / plain_s:.2f}")


if __name__ == "__main__":
    main()
