"""A DataLoader whose samples take 30 ms each to read (a sleep: waiting like a slow disk, not computing), batches of
4: each batch takes about 120 ms to load, and one worker cannot keep up with a step whose own work is about 8 ms.
num_workers from argv."""

import sys
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

SAMPLE_READ_S = 0.030
STEP_WORK_S = 0.008


class SlowDisk(Dataset):
    def __len__(self) -> int:
        return 4 * 20

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(SAMPLE_READ_S)
        return torch.full((8,), float(index)), index % 2


def main() -> None:
    loader = DataLoader(SlowDisk(), batch_size=4, num_workers=int(sys.argv[1]))  # MARK input-pipeline-bound
    model = nn.Linear(8, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in loader:
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        time.sleep(STEP_WORK_S)


if __name__ == "__main__":
    main()
