"""A healthy job right at the input-pipeline threshold: one DataLoader worker that is just a bit slower than the step.

The model's forward stands in for 80 ms of GPU work; the worker needs about 105 ms per batch (sleeping, so that the
machine's load moves it little), so the step waits about 20 ms for data: a share near 20%, the input-pipeline-bound
threshold. Single runs land on either side of it by chance, so gputriage must call it borderline (info), never a
warning.
"""

import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

BATCH = 5
LOAD_S_PER_SAMPLE = 0.0215
COMPUTE_S = 0.080


class SlowDataset(Dataset[tuple[torch.Tensor, int]]):
    def __len__(self) -> int:
        return BATCH * 40

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(LOAD_S_PER_SAMPLE)  # decoding a sample
        return torch.randn(16), index % 4


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(COMPUTE_S)  # the GPU's work in the step
        return self.fc(x)


def main() -> None:
    device = os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    loader = DataLoader(SlowDataset(), batch_size=BATCH, num_workers=1, persistent_workers=True)
    model = Net().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for inputs, targets in loader:
        x, y = inputs.to(device, non_blocking=True), targets.to(device, non_blocking=True)
        loss = nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
