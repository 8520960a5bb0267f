"""The job profiles itself with cProfile across its steps: under `run --trace`, torch's profiler (with stacks) took the
Python profile hook at the window and left none, so the job's cProfile saw nothing from step 4 on (the seventh
trial's P8). The window is not opened, with a note."""

import cProfile
import pstats
import sys

from common import Net, batches, seeded, train_step


def marker(step: int) -> int:
    return step


profiler = cProfile.Profile()
profiler.enable()
seeded()
model = Net()
import torch  # noqa: E402

opt = torch.optim.SGD(model.parameters(), lr=0.1)
hooked = []
for step, (x, y) in enumerate(batches(10)):
    train_step(model, opt, x, y, step)
    marker(step)
    hooked.append(sys.getprofile() is not None)
profiler.disable()
calls = {f[2]: v[1] for f, v in pstats.Stats(profiler).stats.items() if f[2] == "marker"}  # type: ignore[attr-defined]
print("marker calls profiled:", calls, "hooked each step:", all(hooked))
