"""DataLoader worker processes (start method from argv: fork or spawn) feeding a model that was never moved."""

import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset


class Squares(Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return torch.full((16,), float(index)) / 64, index % 4


def main() -> None:
    method = sys.argv[1]
    loader = DataLoader(Squares(), batch_size=8, num_workers=2, multiprocessing_context=method)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    batches = 0
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)  # MARK data-on-cpu
        opt.zero_grad()
        loss.backward()
        opt.step()
        batches += 1
    print(f"batches={batches} method={method}", flush=True)


if __name__ == "__main__":
    main()
