"""An inference loop with no optimizer, no DataLoader and no backward: no step ever ends, and step 0's dispatch mode
stayed on every op of the run (3.3x slower in the seventh trial's P5, and on the mode stack the script can read). It
is taken out after its budget of ops; the stack the script reads at the end is its own."""

import torch
from torch import nn
from torch.utils._python_dispatch import _get_current_dispatch_mode_stack

torch.manual_seed(0)
torch.set_num_threads(1)
model = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
x = torch.randn(4, 8)
with torch.no_grad():
    for _ in range(12_000):
        x = model(x) + 0.01
print([type(m).__name__ for m in _get_current_dispatch_mode_stack()], round(float(x.sum()), 4))
