"""gputriage: why is my GPU idle while PyTorch trains, and what exactly do I change?"""

from __future__ import annotations

__version__ = "0.1.0"
