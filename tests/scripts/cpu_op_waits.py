"""Per step, a CPU op that waits without computing (a custom op that sleeps: what a preempted op on a loaded machine
looks like to a wall clock) or, with --work, one that computes (a sort of a big CPU tensor)."""

import sys
import time

import torch
from torch import nn

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")


@torch.library.custom_op("gputriage_test::waits", mutates_args=())
def waits(x: torch.Tensor) -> torch.Tensor:
    time.sleep(0.004)
    return x.clone()


model = nn.Linear(16, 4).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
table = torch.randn(400_000)
for _ in range(12):
    stats = table.sort().values[:16] if "--work" in sys.argv else waits(table[:16])
    x = torch.randn(32, 16, device=device) + stats.to(device)
    loss = model(x).square().mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
