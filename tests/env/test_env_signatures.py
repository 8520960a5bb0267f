"""The error-signature catalogue (data/error_signatures.py): every entry is sourced, matchable and points to a finding
of the catalogue, or is named as not a rung-1 cause."""

from __future__ import annotations

import pytest

from gputriage.data.catalogue import CATALOGUE
from gputriage.data.error_signatures import (
    INTEL_XPU,
    NO_DEVICE,
    NO_DRIVER,
    SIGNATURES,
    ErrorSignature,
    match_signatures,
)

RUNG_ONE = {entry.code for entry in CATALOGUE if entry.rung == 1}

# The error texts issue #14 names, as the tools print them: each must be recognised.
REQUIRED = {
    "cuda-3": "RuntimeError: CUDA error: initialization error",
    "cuda-100": "RuntimeError: CUDA error: no CUDA-capable device is detected",
    "cuda-101": "RuntimeError: CUDA error: invalid device ordinal",
    "cuda-35": "CUDA driver version is insufficient for CUDA runtime version",
    "cuda-46": "RuntimeError: CUDA error: all CUDA-capable devices are busy or unavailable",
    "cuda-802": "RuntimeError: Unexpected error from cudaGetDeviceCount(). Error 802: system not yet initialized",
    "cuda-804": "Error 804: forward compatibility was attempted on non supported HW",
    "cuda-999": "RuntimeError: CUDA unknown error - this may be due to an incorrectly set up environment",
    "cuda-209": "RuntimeError: CUDA error: no kernel image is available for execution on the device",
    "no-driver": "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU",
    "torch-driver-too-old": "The NVIDIA driver on your system is too old (found version 11040).",
    "nvml-mismatch": "Failed to initialize NVML: Driver/library version mismatch",
    "smi-no-driver": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.",
    "libcuda-missing": "OSError: libcuda.so.1: cannot open shared object file: No such file or directory",
    "ctk-no-driver-library": "nvidia-container-cli: initialization error: load library failed: libnvidia-ml.so.1: "
    "cannot open shared object file: no such file or directory: unknown.",
    "docker-no-gpu-runtime": 'docker: Error response from daemon: could not select device driver "" with '
    "capabilities: [[gpu]].",
    "cuda-oom": "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB",
}


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: s.key)
def test_every_entry_is_sourced_and_points_to_a_finding(sig: ErrorSignature) -> None:
    assert sig.source.startswith("https://") and (
        "/issues/" in sig.source or "/pull/" in sig.source or "forum" in sig.source
    )
    assert sig.finding is None or sig.finding in RUNG_ONE | {NO_DEVICE, NO_DRIVER, INTEL_XPU}
    assert sig.meaning and sig.fix
    for fragment in sig.fragments:
        assert fragment == fragment.lower() and fragment.strip() == fragment and len(fragment) >= 10
        assert sig in match_signatures(f"runtimeerror: {fragment} (seen in a log)")
    if sig.finding is None:
        assert "not why" in sig.meaning  # named as such, not forced into a rung-1 code


def test_keys_are_unique_and_cuda_numbers_match_their_keys() -> None:
    keys = [s.key for s in SIGNATURES]
    assert len(keys) == len(set(keys))
    for sig in SIGNATURES:
        if sig.key.startswith("cuda-") and sig.key[5:].isdigit() and sig.cuda_error is not None:
            assert sig.cuda_error == int(sig.key[5:])


@pytest.mark.parametrize(("key", "text"), REQUIRED.items(), ids=list(REQUIRED))
def test_the_texts_of_the_issue_are_recognised(key: str, text: str) -> None:
    assert key in [s.key for s in match_signatures(text.lower())]


def test_one_scan_finds_several_errors_on_one_line_in_catalogue_order() -> None:
    line = "cuda error: no kernel image is available for execution on the device; cuda out of memory"
    assert [s.key for s in match_signatures(line)] == ["cuda-209", "cuda-oom"]
