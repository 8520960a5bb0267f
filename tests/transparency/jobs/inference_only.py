"""An evaluation loop: no optimizer, no torch.compile. Which torch modules are loaded is part of the job: a mode of
gputriage's once loaded Dynamo (800 modules, sympy among them) at the first op."""

import sys

import torch
from common import Net, batches, seeded

seeded()
model = Net().eval()
with torch.no_grad():
    for step, (x, _) in enumerate(batches(6)):
        print(f"step {step} out {model(x).sum().item():.6f}")
print("dynamo loaded:", "torch._dynamo" in sys.modules, "sympy loaded:", "sympy" in sys.modules)
