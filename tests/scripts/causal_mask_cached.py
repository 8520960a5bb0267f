"""A small GPT-style block that builds its causal mask inside forward, on the CPU, and caches it in a plain attribute.

`torch.ones(t, t)` without `device=` makes the mask on the CPU; `scaled_dot_product_attention` on a GPU then fails
("Expected all tensors to be on the same device") or, for ops that accept it, copies it every step.
"""

import os

import torch
import torch.nn.functional as F
from torch import nn


class CausalSelfAttention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.mask = None

    def causal_mask(self, t: int) -> torch.Tensor:
        if self.mask is None or self.mask.shape[-1] < t:
            self.mask = torch.ones(t, t, dtype=torch.bool).tril()  # MARK model-partly-on-cpu
        return self.mask[:t, :t]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=self.causal_mask(t))
        return self.proj(y.transpose(1, 2).reshape(b, t, c))


class TinyGPT(nn.Module):
    def __init__(self, vocab: int = 64, dim: int = 32) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.attn = CausalSelfAttention(dim, heads=2)
        self.head = nn.Linear(dim, vocab)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.head(self.attn(self.tok(idx)))


def main() -> None:
    device = os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    model = TinyGPT().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(8):
        idx = torch.randint(0, 64, (4, 16), device=device)
        targets = torch.randint(0, 64, (4, 16), device=device)
        logits = model(idx)
        loss = F.cross_entropy(logits.view(-1, 64), targets.view(-1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
