"""A healthy spatial-transformer loop (the shape of PyTorch's tutorial): a localisation net predicts an affine
transform, F.affine_grid and F.grid_sample warp the batch, and the loss backpropagates through both. Their backward
builds its base grid inside torch's C++ with the operand's options; on a GPU that grid is on the GPU. Neither call
passes align_corners, so torch warns at the two lines below, and a run under gputriage must print the same."""

import os

import torch
import torch.nn.functional as F
from torch import nn

DEVICE = os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


class Warp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.loc = nn.Sequential(nn.Flatten(), nn.Linear(16 * 16, 32), nn.ReLU(), nn.Linear(32, 6))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(16 * 16, 10))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        theta = self.loc(x).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.size())  # MARK affine_grid
        return self.head(F.grid_sample(x, grid))  # MARK grid_sample


def main() -> None:
    torch.manual_seed(0)
    device = torch.device(DEVICE)
    model = Warp().to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    images, labels = torch.randn(256, 1, 16, 16), torch.randint(0, 10, (256,))
    for step in range(40):
        x = images[step % 8 * 32 : step % 8 * 32 + 32].to(device)
        y = labels[step % 8 * 32 : step % 8 * 32 + 32].to(device)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done", flush=True)


if __name__ == "__main__":
    main()
