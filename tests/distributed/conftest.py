"""Fixtures for the distributed tests: rank records and a folder to write a job's records into."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from dist_records import RankFactory

from gputriage.commands.rank_report import write_rank_record
from gputriage.record import Run
from gputriage.record.process import ProcessSection
from gputriage.record.ranks import ModelWrap, RankInfo
from gputriage.record.steps import StepsSection


@pytest.fixture
def make_rank() -> RankFactory:
    def make(rank: int, world_size: int, **info: Any) -> Run:
        steps = info.pop("steps", None)
        run = Run(command="run", argv=["train.py"], expect_device=info.pop("expect_device", "cuda"))
        run.rank_info = RankInfo(
            rank=rank,
            world_size=world_size,
            local_rank=info.pop("local_rank", rank),
            local_world_size=info.pop("local_world_size", world_size),
            node=info.pop("node", "node-a"),
            job_id=info.pop("job_id", "job-1"),
            pid=info.pop("pid", 1000 + rank),
            backend=info.pop("backend", "nccl"),
            wrap=info.pop("wrap", ModelWrap(kind="ddp", module_class="Net", where="train.py:30")),
            **info,
        )
        run.process = ProcessSection(exit_code=0)
        if steps is not None:
            run.steps = StepsSection(steps=steps)
        return run

    return make


@pytest.fixture
def write_job(tmp_path: Path) -> Callable[[list[Run]], Path]:
    def write(runs: list[Run]) -> Path:
        for run in runs:
            write_rank_record(run, tmp_path)
        return tmp_path

    return write
