"""Shared test set-up: corpus location, and skipping `gpu` tests on machines without an NVIDIA GPU."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
# ../shared/corpus next to the checkout; GPUTRIAGE_CORPUS points elsewhere (a git worktree has no ../shared).
CORPUS = Path(os.environ.get("GPUTRIAGE_CORPUS") or REPO_ROOT.parent / "shared" / "corpus")


def _nvidia_gpu_present() -> bool:
    # The device nodes are the cheapest honest signal; NVML itself is what the gpu-marked tests then exercise.
    return Path("/dev/nvidiactl").exists()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _nvidia_gpu_present():
        return
    skip = pytest.mark.skip(reason="needs a real NVIDIA GPU and driver")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def corpus() -> Path:
    """The shared real-data corpus; tests that need it skip cleanly where it is absent."""
    if not CORPUS.is_dir():
        pytest.skip(f"corpus not found at {CORPUS}")
    return CORPUS
