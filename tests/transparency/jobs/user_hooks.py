"""The user's own hooks (module, global, with kwargs, state_dict) keep working, in their order."""

import torch
from common import Net, batches, seeded, train_step
from torch.nn.modules import module as module_mod

calls = []
seeded()
model = Net()
model.register_forward_pre_hook(lambda m, a: calls.append("pre"))
model.register_forward_hook(lambda m, a, o: calls.append("post"))
model.register_forward_hook(lambda m, a, k, o: calls.append(f"post-kw{sorted(k)}"), with_kwargs=True)
model.body[0].register_full_backward_hook(lambda m, gi, go: calls.append("backward"))
handle = module_mod.register_module_forward_hook(lambda m, a, o: calls.append(f"global {type(m).__name__}"))
model.register_state_dict_post_hook(lambda m, sd, prefix, local: sd.__setitem__("extra", torch.ones(1)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, (x, y) in enumerate(batches(3)):
    train_step(model, opt, x, y, step)
    print(calls)
    calls.clear()
handle.remove()
print(list(model._forward_hooks), list(model._forward_pre_hooks), sorted(model.state_dict()))
print(module_mod._global_forward_hooks, module_mod._global_forward_pre_hooks)
torch.save(model.state_dict(), "hooked.pt")
