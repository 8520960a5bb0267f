"""Shared test set-up: corpus location, and skipping `gpu` tests on machines without an NVIDIA GPU."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from contract import catalogue_problems
from corpus_path import CORPUS
from gputriage import diagnosis
from gputriage.findings import Finding


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


@pytest.fixture(autouse=True, scope="session")
def _findings_follow_the_catalogue() -> Iterator[None]:
    """Every finding any test makes the rules produce in this process is checked against the finding catalogue
    (docs/contract.md): its code, rung, severity and evidence fields. (The CLI runs in subprocesses are checked on
    their report.json by the tests that read them.)"""
    real = diagnosis.evaluate_job

    def checked(run: Any) -> list[Finding]:
        found = real(run)
        problems = catalogue_problems(f.to_json() for f in found)
        assert problems == [], problems
        return found

    diagnosis.evaluate_job = checked  # type: ignore[assignment]
    yield
    diagnosis.evaluate_job = real  # type: ignore[assignment]
