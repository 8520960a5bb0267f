"""What trial 9 found a job could tell apart under gputriage: its own global optimizer post-hook (registered after
ours) ended its `opt.step()` when the window closed ("OrderedDict mutated during iteration"); an unbound
`torch.Tensor.tolist` on a tuple raised AttributeError where torch raises the TypeError a job catches; a batch class's
`items()` and a dataset's `__len__` ran more often; a recursion that fits under python ended in RecursionError."""

import torch
from common import Net, seeded
from torch.optim.optimizer import register_optimizer_step_post_hook
from torch.utils.data import DataLoader, Dataset

seeded()
calls = {"post_hook": 0, "items": 0, "len": 0}


def depth(n):
    return 0 if n == 0 else depth(n - 1) + 1


print("recursion", depth(990))  # python allows 998 here; gputriage allowed 983


def as_list(value):
    try:
        return torch.Tensor.tolist(value)
    except TypeError:
        return list(value)


class Batch(dict):
    def items(self):
        calls["items"] += 1
        return super().items()


class Counted(Dataset):
    def __len__(self):
        calls["len"] += 1
        return 16

    def __getitem__(self, i):
        return torch.full((8,), float(i)), torch.tensor(i % 4)


class DictNet(Net):
    def forward(self, batch):
        return super().forward(batch["x"])


def on_step(opt, args, kwargs):
    calls["post_hook"] += 1


model = DictNet()
opt = torch.optim.SGD(model.parameters(), lr=0.05)
register_optimizer_step_post_hook(on_step)  # after gputriage's own: the window ends inside the job's opt.step()
print("tolist", as_list(torch.arange(3)), as_list((4, 5)))
step = 0
for _epoch in range(14):  # 14 x 16 steps: past the window's default 200 steps
    for x, y in DataLoader(Counted(), batch_size=1):
        loss = torch.nn.functional.cross_entropy(model(Batch(x=x)), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
print("tolist after", as_list((6, 7)))
print("steps", step, "loss", f"{loss.item():.6f}", "calls", calls)
