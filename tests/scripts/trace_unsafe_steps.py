"""Steps whose boundaries torch's profiler cannot be driven from: `backward` steps the optimizers from a gradient
hook (PyTorch's "optimizer in backward" tutorial), `thread` runs the training loop in a worker thread. `run --trace`
opened its window there, and the job died of SIGSEGV with no report (the seventh trial's P3)."""

import sys
import threading

import torch
from torch import nn


def in_backward(steps: int) -> None:
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    opts = {p: torch.optim.SGD([p], lr=0.01) for p in model.parameters()}

    def step_in_backward(p: torch.Tensor) -> None:
        opts[p].step()
        opts[p].zero_grad()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(step_in_backward)
    for _ in range(steps):
        model(torch.randn(8, 4)).pow(2).mean().backward()


def in_thread(steps: int) -> None:
    model = nn.Linear(4, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)

    def loop() -> None:
        for _ in range(steps):
            loss = model(torch.randn(8, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    worker = threading.Thread(target=loop)
    worker.start()
    worker.join()


if __name__ == "__main__":
    torch.manual_seed(0)
    (in_backward if sys.argv[1] == "backward" else in_thread)(int(sys.argv[2]))
    print("done")
