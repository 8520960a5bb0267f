"""Everything is on the device, but each sample takes milliseconds to read and decode in the main process."""

import os
import time

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

device = torch.device(
    os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
)  # written for CUDA; the tests pin meta


class SlowImages(Dataset):
    def __len__(self) -> int:
        return 48

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        # Stands in for reading a JPEG (I/O: a sleep) and decoding and augmenting it (CPU work in Python). Half of the
        # time is CPU work: when other processes share the cores it slows down as the training step does, so the
        # step's share of waiting for data depends less on the machine's load than a sleep alone would make it.
        time.sleep(0.002)
        pixel = 0
        for i in range(10_000):
            pixel = (pixel + (index * 31 + i) * 2654435761) % 251
        return torch.full((16,), pixel / 251.0), index % 4


def main() -> None:
    loader = DataLoader(SlowImages(), batch_size=4, num_workers=0)  # MARK input-pipeline-bound
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for batch_x, batch_y in loader:
        x, y = batch_x.to(device), batch_y.to(device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()


if __name__ == "__main__":
    main()
