"""torch.compile of the model (fullgraph, so any graph break would be an error), trained for a few steps; the graphs
Dynamo made are counted."""

import torch
from common import Net, batches, seeded, train_step
from torch._dynamo.utils import counters

seeded()
model = Net()
compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(6)):
    train_step(compiled, opt, x, y, step)
torch.save(model.state_dict(), "compiled_state.pt")
# How many graphs Dynamo made and how many calls it captured: a guard on gputriage's own state (read by its
# nn.Module.__call__ wrapper while Dynamo traced through it) made a second compile when that state changed
print("graphs", counters["stats"]["unique_graphs"], "calls captured", counters["stats"]["calls_captured"])
