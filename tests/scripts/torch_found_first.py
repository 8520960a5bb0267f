"""A script whose first import asks whether torch is installed without importing it, as `import transformers` does
(importlib.util.find_spec("torch")); torch is imported after. Trial 10: the probes never started, and under
--preflight the job saw no CUDA and trained on the CPU."""

import importlib.util

assert importlib.util.find_spec("torch") is not None  # what transformers' is_torch_available() does first

import torch  # noqa: E402
from torch import nn  # noqa: E402

device = "cuda" if torch.cuda.is_available() else "cpu"
print("device", device, flush=True)
model = nn.Linear(8, 2).to(device)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(12):
    x = torch.randn(16, 8)  # never moved
    loss = model(x).sum()  # MARK call
    opt.zero_grad()
    loss.backward()
    opt.step()
print("done")
