"""The model is moved, the batch the loop unpacks is not: the script dies at the model's call, before the loss would
show the labels on the CPU too (the Fabric example without `setup_dataloaders`)."""

import os

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

device = torch.device(os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu"))


class Named(Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor, str]:
        return torch.randn(16), torch.tensor(i % 4), f"sample-{i}"


def main() -> None:
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(Named(), batch_size=8)
    for step, (data, target, names) in enumerate(loader):
        opt.zero_grad()
        out = model(data)  # MARK data-on-cpu
        loss = nn.functional.cross_entropy(out, target)
        loss.backward()
        opt.step()
        if step == 0:
            print(names[0])


if __name__ == "__main__":
    main()
