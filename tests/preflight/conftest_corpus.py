"""Where the corpus's real training scripts are, if anywhere (import-time: the cases are parametrized from it)."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


def corpus_scripts() -> Path | None:
    root = Path(os.environ.get("GPUTRIAGE_CORPUS") or REPO_ROOT.parent / "shared" / "corpus")
    folder = root / "scripts"
    return folder if (folder / "EXPECTED.tsv").is_file() else None
