"""The device the job is meant to use: `--expect-device`, or the first accelerator this torch can reach."""

from __future__ import annotations

import torch

from gputriage.errors import InputError
from gputriage.hardware.nvml import nvidia_gpu_count

# The order people mean by "the GPU": NVIDIA/AMD first, then the other accelerators torch knows.
ACCELERATOR_ORDER = ("cuda", "xpu", "mps", "npu", "hpu", "mtia")


def resolve_expected_device(requested: str | None) -> str:
    """The device type the probes judge placement against ("cuda", "meta", ..., or "cpu" with no accelerator)."""
    if requested is not None:
        try:
            return torch.device(requested).type
        except (RuntimeError, ValueError) as exc:
            raise InputError(
                f"--expect-device {requested!r} is not a device torch knows (cuda, cuda:1, mps, xpu, meta, cpu)"
            ) from exc
    accelerator = first_accelerator()
    if accelerator is not None:
        return accelerator
    # torch reaches no accelerator, yet the machine has an NVIDIA GPU (a CPU-only wheel, a broken driver...): the
    # job is still meant for that GPU, so rung 1 is judged for cuda and names why torch cannot use it.
    return "cuda" if nvidia_gpu_count() > 0 else "cpu"


def first_accelerator() -> str | None:
    if _cuda_gpus_without_starting_cuda():
        return "cuda"
    try:
        if torch.cuda.is_available():
            return "cuda"
    except Exception:  # a broken CUDA init is rung 1's to explain; here it only means "not cuda"
        return None
    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None:
        try:
            current = accelerator.current_accelerator(check_available=True)
        except Exception:
            current = None
        if current is not None:
            return str(current.type)
    for name in ACCELERATOR_ORDER[1:]:
        backend = getattr(torch, name, None)
        try:
            if backend is not None and backend.is_available():
                return name
        except Exception:
            continue
    return None


def _cuda_gpus_without_starting_cuda() -> bool:
    """A CUDA build on a machine whose NVML lists GPUs, told without starting CUDA. torch.cuda.is_available() starts
    it (cudaGetDeviceCount), and CUDA reads CUDA_VISIBLE_DEVICES once, when it starts: asked before the job's first
    line, it fixed the GPUs before a script's own `os.environ["CUDA_VISIBLE_DEVICES"] = "1"` at its top could choose
    them, and the job ran on GPU 0. Where NVML lists none (or cannot start), torch's own answer is asked."""
    if torch.version.cuda is None or torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        return False
    return nvidia_gpu_count() > 0
