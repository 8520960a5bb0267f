"""The terminal tests render the report tests' records (tests/report/report_records.py)."""

from __future__ import annotations

import sys
from pathlib import Path

REPORT_TESTS = str(Path(__file__).resolve().parents[1] / "report")
if REPORT_TESTS not in sys.path:
    sys.path.insert(0, REPORT_TESTS)
