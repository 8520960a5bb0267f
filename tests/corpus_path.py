"""Where the shared real-data corpus is: ../shared/corpus next to the checkout, or GPUTRIAGE_CORPUS (a worktree whose
parent has no shared/). Tests that need it skip cleanly where it is absent."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("GPUTRIAGE_CORPUS") or REPO_ROOT.parent / "shared" / "corpus")
