"""A debugging setting left at the top of a training script (causes.md F.17: WavTokenizer, BernoulliDiffusion): with
CUDA_LAUNCH_BLOCKING=1 every kernel launch waits for its kernel, and the GPU idles between kernels."""

import os

os.environ["CUDA_LAUNCH_BLOCKING"] = "1"  # MARK launch-blocking

import torch
from torch import nn

DEVICE = os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")


def main() -> None:
    device = torch.device(DEVICE)
    model = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(60):
        x, y = torch.randn(32, 16, device=device), torch.randint(0, 4, (32,), device=device)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done", flush=True)


if __name__ == "__main__":
    main()
