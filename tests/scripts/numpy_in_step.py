"""NumPy augmentation of every batch inside the training loop, image by image, on the main thread.

The DataLoader only indexes a TensorDataset, so its wait is small; the time goes to the NumPy loop in the step,
which the op census cannot see (it counts torch ops) and which runs before the batch reaches the device.
"""

import os

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def random_shift_flip(images: np.ndarray, max_shift: int = 2) -> np.ndarray:
    out = np.empty_like(images)
    for i, image in enumerate(images):
        dx, dy = np.random.randint(-max_shift, max_shift + 1, size=2)
        padded = np.pad(image, ((0, 0), (max_shift, max_shift), (max_shift, max_shift)), mode="edge")
        shifted = padded[:, max_shift + dy : max_shift + dy + 28, max_shift + dx : max_shift + dx + 28]
        out[i] = shifted[:, :, ::-1] if np.random.rand() < 0.5 else shifted
    return out


def main() -> None:
    device = os.environ.get("DEVICE", "meta")
    data = TensorDataset(torch.randn(64 * 60, 1, 28, 28), torch.randint(0, 10, (64 * 60,)))
    loader = DataLoader(data, batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(28 * 28, 128), nn.ReLU(), nn.Linear(128, 10)).to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for images, labels in loader:
        augmented = torch.from_numpy(random_shift_flip(images.numpy()))  # MARK cpu-compute-in-step
        x, y = augmented.to(device), labels.to(device)
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
