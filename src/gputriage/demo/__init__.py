"""The bundled demo job: a small image classifier that trains with a classic mistake (see train.py)."""

from __future__ import annotations

from pathlib import Path

TRAIN_SCRIPT = Path(__file__).resolve().parent / "train.py"
