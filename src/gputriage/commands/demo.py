"""`gputriage demo`: the bundled training job with a classic mistake, run under `gputriage run`."""

from __future__ import annotations

import argparse
import os
import sys

from gputriage import envnames
from gputriage.collectors.runner import Target
from gputriage.commands.common import add_verbose, out_folder, require_torch, whole_number
from gputriage.commands.run import DEFAULT_OUT, RunConfig, execute
from gputriage.demo import TRAIN_SCRIPT

DEMO_STEPS = 12  # enough steady steps for rung 5's timing after the probes' warm-up window


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "demo",
        help="triage a bundled small training job that has a classic mistake (under a minute on a laptop CPU)",
    )
    p.add_argument(
        "--out", type=out_folder, default=DEFAULT_OUT, metavar="DIR", help="report folder (default ./gputriage-out)"
    )
    p.add_argument(
        "--steps", type=whole_number(1), default=DEMO_STEPS, metavar="N", help=f"training steps (default {DEMO_STEPS})"
    )
    add_verbose(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    require_torch()
    from gputriage.collectors.probe.devices import first_accelerator

    device = first_accelerator()
    if device is None:
        device = "meta"
        print(
            "gputriage demo: no accelerator on this machine, so the meta device stands in for the GPU "
            "(PyTorch runs real dispatch there with no real compute; placement and op census behave as on a GPU).",
            file=sys.stderr,
        )
    os.environ[envnames.DEMO_DEVICE] = device
    print(
        f"gputriage demo: gputriage run --expect-device {device} {TRAIN_SCRIPT.name} --steps {args.steps}",
        file=sys.stderr,
    )
    target = Target(name=str(TRAIN_SCRIPT), args=["--steps", str(args.steps)])
    config = RunConfig(target, device, args.steps, args.out, [str(TRAIN_SCRIPT), "--steps", str(args.steps)])
    config.verbose = args.verbose
    return execute(config)
