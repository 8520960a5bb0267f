"""A GPT-style model that makes its position indices on the CPU inside forward (`device=` forgotten).

The meta stand-in lets an embedding take CPU indices, so the run does not crash here; on a GPU the first forward dies
in the position embedding ("Expected all tensors to be on the same device").
"""

import os

import torch
import torch.nn.functional as F
from torch import nn


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 64, block: int = 32, dim: int = 32) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.wpe = nn.Embedding(block, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.lm_head = nn.Linear(dim, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long)  # MARK device-mismatch-error
        x = self.wte(idx) + self.wpe(pos)
        return self.lm_head(x + self.mlp(x))


def main() -> None:
    device = os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    model = TinyGPT().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(8):
        x = torch.randint(0, 64, (4, 16), device=device)
        y = torch.randint(0, 64, (4, 16), device=device)
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
