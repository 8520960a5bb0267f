"""Preflight without a GPU: a script written for CUDA runs unchanged on a stand-in device.

- `tensor.py`: the stand-in's tensor (reports `cuda:N`, computes on a CPU or meta backing, raises CUDA's mismatches);
- `redirect.py`: where "cuda" lands (a torch-function mode for device=/.to()/.cuda(), and host reads);
- `cuda_api.py`, `autocast.py`, `parallel.py`, `loading.py`: the torch.cuda API, autocast, DataParallel and
  torch.load as a script sees them during the preflight;
- `placeholders.py`: host reads of tensors without values (meta);
- `observer.py`: the observers `gputriage run` starts (`--preflight`, and `--expect-device meta`).
"""

from __future__ import annotations

from gputriage.collectors.preflight.observer import MetaStandIn, Preflight
from gputriage.collectors.preflight.state import Backing

__all__ = ["Backing", "MetaStandIn", "Preflight"]
