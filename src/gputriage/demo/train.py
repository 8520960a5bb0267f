"""A small image classifier, trained the way many first PyTorch scripts do it.

The classic mistake: `device` is chosen, but neither the model nor the batches are ever moved there, so the whole
job trains on the CPU while the GPU sits idle. The input pipeline also decodes and augments every image in the main
process (num_workers=0). `gputriage demo` runs this file under `gputriage run`.
"""

from __future__ import annotations

import argparse
import os

import torch  # noqa: TID251  (this file is the user's training job, not gputriage's code)
from torch import nn  # noqa: TID251
from torch.utils.data import DataLoader, Dataset  # noqa: TID251

# Sized so that the demo's short run shows every finding in seconds on a laptop CPU: the augmentation keeps the
# input pipeline a large share of each step (the input-pipeline-bound finding), the model stays small.
AUGMENT_PASSES = 80


class NoisyShapes(Dataset[tuple[torch.Tensor, int]]):
    """Synthetic 3x32x32 "images" of 10 classes, with a per-sample augmentation as torchvision pipelines do."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.transform = self.augment

    def __len__(self) -> int:
        return self.size

    def augment(self, image: torch.Tensor) -> torch.Tensor:
        for _ in range(AUGMENT_PASSES):  # stands in for decode + random crop + color jitter
            image = torch.roll(image, shifts=1, dims=2) * 0.99 + 0.01 * torch.rand_like(image)
        return image

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        generator = torch.Generator().manual_seed(index)
        label = index % 10
        image = torch.rand(3, 32, 32, generator=generator) + label / 10
        return self.transform(image), label


class SmallConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )  # fmt: skip
        self.classifier = nn.Linear(16 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.classifier(self.features(x).flatten(1))
        return logits


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    torch.set_num_threads(1)  # (not the mistake: keeps the demo's timings steady on a busy laptop)
    device = os.environ.get("GPUTRIAGE_DEMO_DEVICE", "cuda")  # chosen... and then never used
    print(f"training on {device} for {args.steps} steps")

    loader = DataLoader(NoisyShapes(args.steps * args.batch_size), batch_size=args.batch_size, shuffle=True)
    model = SmallConvNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    for step, (images, labels) in enumerate(loader):
        logits = model(images)
        loss = loss_fn(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 4 == 0:
            print(f"step {step:3d}  loss {loss.item():.3f}")


if __name__ == "__main__":
    main()
