"""A small CPU training loop for `run --trace`: each step is marked `user_step_N`, so a test can see which steps the
profiler recorded. `--stop-after K` ends the job (sys.exit) after K batches; at the end it says whether a profiler
is still on."""

import argparse
import sys

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--stop-after", type=int, default=None)
    parser.add_argument("--accumulate", type=int, default=1, help="micro-batches per optimizer step")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--own-profiler", action="store_true", help="the job profiles itself the whole time")
    args = parser.parse_args()
    if args.own_profiler:
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]):
            train(args)
    else:
        train(args)
    print(f"profiler_on_at_end={torch.autograd.profiler._is_profiler_enabled}", flush=True)


def train(args: argparse.Namespace) -> None:
    batches = args.steps * args.accumulate
    data = TensorDataset(torch.randn(8 * batches, 32), torch.randint(0, 4, (8 * batches,)))
    loader = DataLoader(data, batch_size=8, pin_memory=args.device == "cuda")
    device = torch.device(args.device)
    model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for batch, (inputs, labels) in enumerate(loader):
        step = batch // args.accumulate
        x, y = inputs.to(device, non_blocking=True), labels.to(device, non_blocking=True)
        with torch.profiler.record_function(f"user_step_{step}"):
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            if (batch + 1) % args.accumulate == 0:
                opt.step()  # MARK window-opens
                opt.zero_grad()
        if args.stop_after is not None and batch + 1 == args.stop_after:
            print(f"stopping after {step + 1} steps", flush=True)
            sys.exit(0)


if __name__ == "__main__":
    main()
