"""The stand-in device in this process: a preflight started around each test, and taken down after it."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from preflight_session import Session, session

from gputriage.collectors.preflight import Backing


@pytest.fixture
def stand_in() -> Iterator[Session]:
    yield from session(Backing.CPU)


@pytest.fixture
def meta_stand_in() -> Iterator[Session]:
    yield from session(Backing.META)
