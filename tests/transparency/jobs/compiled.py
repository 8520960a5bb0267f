"""torch.compile of the model (fullgraph, so any graph break would be an error), trained for a few steps."""

import torch
from common import Net, batches, seeded, train_step

seeded()
model = Net()
compiled = torch.compile(model, backend="aot_eager", fullgraph=True)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(6)):
    train_step(compiled, opt, x, y, step)
torch.save(model.state_dict(), "compiled_state.pt")
