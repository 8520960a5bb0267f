"""`python -m trainpkg.train`: the model moves to the device, the inputs do not."""

import os
import sys

import torch
from torch import nn

from trainpkg import __name__ as package_name

device = torch.device(
    os.environ.get("TRIAGE_DEVICE") or ("cuda" if torch.cuda.is_available() else "cpu")
)  # written for CUDA; the tests pin meta


def main() -> None:
    print(f"argv={sys.argv!r} name={__name__} package={package_name}", flush=True)
    model = nn.Sequential(nn.Linear(16, 4)).to(device)
    x = torch.randn(8, 16)
    model(x)  # MARK data-on-cpu


if __name__ == "__main__":
    main()
