"""A healthy loop: model, inputs and labels on the device, a cheap in-memory dataset. Takes arguments."""

import argparse
import os
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument(
        "--device", default=os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
    )
    parser.add_argument("--tag", default="")
    args = parser.parse_args()
    print(f"argv={sys.argv!r} path0={sys.path[0]} name={__name__}", flush=True)
    print(f"spec={__spec__!r} file={__file__}", flush=True)
    device = torch.device(args.device)
    data = TensorDataset(torch.randn(96, 16), torch.randint(0, 4, (96,)))
    loader = DataLoader(data, batch_size=8, shuffle=True)  # MARK loader
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(args.epochs):
        for batch_x, batch_y in loader:
            x, y = batch_x.to(device, non_blocking=True), batch_y.to(device, non_blocking=True)
            loss = nn.functional.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
    print(f"done {args.tag}", flush=True)


if __name__ == "__main__":
    main()
