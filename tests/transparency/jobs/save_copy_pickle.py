"""torch.save of the whole model and of its state_dict, pickle, copy.deepcopy, inspecting the hooks: every step."""

import copy
import pickle

import torch
from common import Net, batches, seeded, train_step

seeded()
model = Net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(6)):
    train_step(model, opt, x, y, step)
    torch.save(model, f"model_{step}.pt")
    torch.save(model.state_dict(), f"state_{step}.pt")
    clone = copy.deepcopy(model)
    back = pickle.loads(pickle.dumps(model))  # the bytes name storages by address: compare what comes back
    weight = model.body[0].weight
    print(
        "pickle equal",
        torch.equal(back.body[0].weight, weight),
        "copy equal",
        torch.equal(clone.body[0].weight, weight),
    )
    print("hooks", dict(model._forward_hooks), dict(model._forward_pre_hooks), dict(model.body[0]._forward_hooks))
loaded = torch.load("model_5.pt", weights_only=False)
print("reloaded", torch.equal(loaded.body[2].bias, model.body[2].bias))
torch.save(opt.state_dict(), "opt.pt")
