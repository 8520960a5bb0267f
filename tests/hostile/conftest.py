"""The hostile-input tests build their cases from the report and distributed tests' own records."""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent.parent
for _folder in (_TESTS / "report", _TESTS / "distributed"):
    if str(_folder) not in sys.path:
        sys.path.insert(0, str(_folder))
