"""A Dataset that moves each sample to the GPU in __getitem__, read by DataLoader worker processes (fork): CUDA
cannot be used in a forked child once the parent initialised it, and the job dies in the first batch."""

import torch
from torch.utils.data import DataLoader, Dataset

device = "cuda" if torch.cuda.is_available() else "cpu"


class Samples(Dataset):
    def __len__(self) -> int:
        return 64

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        features = torch.randn(8)
        return features.to(device), i % 2  # MARK device-in-loader-worker


if __name__ == "__main__":
    model = torch.nn.Linear(8, 2).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for features, labels in DataLoader(Samples(), batch_size=8, num_workers=2, multiprocessing_context="fork"):
        loss = torch.nn.functional.cross_entropy(model(features), labels.to(device))
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done")
