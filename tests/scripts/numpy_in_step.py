"""NumPy augmentation of every batch inside the training loop, image by image, on the main thread.

The DataLoader only indexes a TensorDataset, so its wait is small; the time goes to the NumPy loop in the step,
which the op census cannot see (it counts torch ops) and which runs before the batch reaches the device.
"""

import os

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def random_crop_flip(images: np.ndarray, pad: int = 4) -> np.ndarray:
    """The standard augmentation, one image at a time: pad 4, random 64x64 crop, random horizontal flip, then each
    image standardised on its own (per-channel mean and std)."""
    out = np.empty_like(images)
    for i, image in enumerate(images):
        dx, dy = np.random.randint(0, 2 * pad + 1, size=2)
        padded = np.pad(image, ((0, 0), (pad, pad), (pad, pad)), mode="reflect")
        cropped = padded[:, dy : dy + 64, dx : dx + 64]
        flipped = cropped[:, :, ::-1] if np.random.rand() < 0.5 else cropped
        mean = flipped.mean(axis=(1, 2), keepdims=True)
        out[i] = (flipped - mean) / (flipped.std(axis=(1, 2), keepdims=True) + 1e-6)
    return out


def main() -> None:
    device = os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    data = TensorDataset(torch.randn(64 * 60, 3, 64, 64), torch.randint(0, 200, (64 * 60,)))  # Tiny ImageNet's shape
    loader = DataLoader(data, batch_size=64, shuffle=True)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 64 * 64, 128), nn.ReLU(), nn.Linear(128, 200)).to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    for images, labels in loader:
        augmented = torch.from_numpy(random_crop_flip(images.numpy()))  # MARK cpu-compute-in-step
        x, y = augmented.to(device), labels.to(device)
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


if __name__ == "__main__":
    main()
