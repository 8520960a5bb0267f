"""Set-up of the integration tests: offline, and the plain loops' shared `tiny` module importable."""

from __future__ import annotations

import os
import sys

import pytest
from integration_helpers import SCRIPTS


@pytest.fixture(scope="session", autouse=True)
def _offline_and_importable() -> None:
    """No test may reach the Hugging Face Hub; the framework tests import the plain loops' shared `tiny` module."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
