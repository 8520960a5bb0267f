"""Silence a framework's static guesses while gputriage measures the same thing, and only then."""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from typing import Any, cast


class WarningFilter:
    """`ignore` filters for given message patterns, added and later removed one by one.

    `warnings.catch_warnings` would restore the whole filter list on exit and so undo filters the user or the
    framework added in between; this removes exactly the entries it added.
    """

    def __init__(self, message_patterns: Sequence[str]) -> None:
        self._patterns = list(message_patterns)
        self._entries: list[Any] = []

    @property
    def active(self) -> bool:
        return bool(self._entries)

    def install(self) -> None:
        if self._entries:
            return
        for pattern in self._patterns:
            warnings.filterwarnings("ignore", message=pattern)
            self._entries.append(warnings.filters[0])

    def remove(self) -> None:
        filters = cast(list[Any], warnings.filters)  # a list at runtime; typeshed calls it a Sequence
        for entry in self._entries:
            if entry in filters:
                filters.remove(entry)
        self._entries.clear()
        # The module caches filter decisions per call site; tell it the list changed (as filterwarnings does).
        mutated = getattr(warnings, "_filters_mutated", None) or getattr(warnings, "_filters_mutated_lock_held", None)
        if mutated is not None:
            mutated()


def literal_prefix(text: str) -> str:
    """A pattern for `filterwarnings(message=...)` that matches messages starting with `text` literally."""
    return re.escape(text)
