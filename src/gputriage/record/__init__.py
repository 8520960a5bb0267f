"""The Run record: the one serialisable evidence tree at the centre of gputriage.

Collectors fill it, rules only read it, renderers only read it and the findings. It saves to and loads from JSON
(msgspec handles the dataclass tree both ways), carries its schema version, and checks its own invariants.
"""

from __future__ import annotations

from gputriage.record.decode import load_run, run_from_dict
from gputriage.record.run import RUN_SCHEMA, Run, run_to_dict, save_run

__all__ = ["RUN_SCHEMA", "Run", "load_run", "run_from_dict", "run_to_dict", "save_run"]
