"""The accuracy tests: hand-built records, and real scripts run through the real CLI by bench/accuracy.py's runner.

bench/accuracy.py is loaded as the module `bench_accuracy` (the name `accuracy` is this test folder's).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCH_ACCURACY = Path(__file__).resolve().parents[2] / "bench" / "accuracy.py"


def _load_bench() -> None:
    if "bench_accuracy" in sys.modules:
        return
    spec = importlib.util.spec_from_file_location("bench_accuracy", BENCH_ACCURACY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_accuracy"] = module  # before exec: its dataclasses look their module up
    spec.loader.exec_module(module)


_load_bench()
