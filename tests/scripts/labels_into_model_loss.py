"""makemore's shape: the model computes its loss inside forward from the targets it is given, and the loop, at the
module's top level, moves the inputs with `args.device` but not the targets. The loss gets `targets.view(-1)`, a
view of the same host tensor: one mistake, at the loop's line, fixed with the script's own `args.device`."""

import argparse
import os

import torch
import torch.nn.functional as F
from torch import nn


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(27, 16)
        self.head = nn.Linear(16, 27)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        device = idx.device
        pos = torch.arange(idx.size(1), device=device)
        logits = self.head(self.emb(idx) + pos.unsqueeze(-1).float())
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), ignore_index=-1)
        return logits, loss


parser = argparse.ArgumentParser()
parser.add_argument("--device", default=os.environ.get("TRIAGE_DEVICE") or "cuda")
parser.add_argument("--steps", type=int, default=30)
args = parser.parse_args()
torch.manual_seed(0)
data = torch.randint(0, 27, (64, 9))
model = Tiny()
model.to(args.device)
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
step = 0
while step < args.steps:
    batch = data[step % 8 * 8 : step % 8 * 8 + 8]
    X, Y = batch[:, :-1].contiguous(), batch[:, 1:].contiguous()
    X = X.to(args.device)

    logits, loss = model(X, Y)  # MARK data-on-cpu

    model.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    step += 1
print("done", flush=True)
