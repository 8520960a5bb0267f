"""Replace attributes for a while and put the originals back, whatever happens."""

from __future__ import annotations

from typing import Any

_MISSING = object()


class Patches:
    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any]] = []

    def set(self, owner: Any, name: str, value: Any) -> None:
        # Look in the owner's own __dict__: an inherited method is restored by deleting the override.
        self._saved.append((owner, name, owner.__dict__.get(name, _MISSING)))
        setattr(owner, name, value)

    def restore(self) -> None:
        while self._saved:
            owner, name, old = self._saved.pop()
            if old is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, old)

    def __bool__(self) -> bool:
        return bool(self._saved)
