"""vit-pytorch's decorrelation loss samples tokens with an index made on the CPU (`torch.randn(...).argsort()`, no
device) and indexes the device's tokens with it: CUDA copies the index over from pageable memory, and such a copy
first waits for the device, every step (and again in backward, which indexes with the same saved index)."""

import os

import torch
from torch import nn

DEVICE = os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


class Sampled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 16)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.proj(tokens)
        keep = torch.randn(h.shape[1]).argsort()[: h.shape[1] // 2]
        return h[:, keep].square().mean()  # MARK host-sync-in-loop


def main() -> None:
    torch.manual_seed(0)
    device = torch.device(DEVICE)
    model = Sampled().to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(40):
        loss = model(torch.randn(8, 32, 16, device=device))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done", flush=True)


if __name__ == "__main__":
    main()
