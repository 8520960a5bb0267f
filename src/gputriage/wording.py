"""Sentences built from counts, with the grammar right at 0, 1 and 2: "1 step", "rung 4 was", "rungs 2 and 4 were".

Every layer writes such sentences (the verdict, the rules' titles, the renderers), so this lives at the base.
"""

from __future__ import annotations

from collections.abc import Sequence


def counted(count: int, singular: str, plural: str | None = None) -> str:
    """ "1 step", "0 steps", "2 steps"; `plural` for the nouns that do not just take an s ("1 process")."""
    return f"{count} {singular if count == 1 else plural or singular + 's'}"


def listed(items: Sequence[object], conjunction: str = "and") -> str:
    """ "4", "2 and 4", "2, 3 and 4": a list as a sentence says it."""
    words = [str(item) for item in items]
    if len(words) <= 1:
        return "".join(words)
    return f"{', '.join(words[:-1])} {conjunction} {words[-1]}"


def numbered(singular: str, items: Sequence[object], plural: str | None = None) -> str:
    """ "rung 4", "rungs 2 and 4": a noun followed by the items it names."""
    noun = singular if len(items) == 1 else plural or singular + "s"
    return f"{noun} {listed(items)}"


def was_were(items: Sequence[object] | int) -> str:
    count = items if isinstance(items, int) else len(items)
    return "was" if count == 1 else "were"
