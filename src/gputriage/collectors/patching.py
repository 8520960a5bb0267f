"""Replace attributes of torch (never of the user's objects) for a while, and put the originals back.

One helper for every collector that patches: the probes and the distributed observer.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

_MISSING = object()


class Patches:
    """A set of attribute replacements, restored together, last first."""

    def __init__(self) -> None:
        self._saved: list[tuple[Any, str, Any, Any]] = []
        self.active = False

    def set(self, owner: Any, name: str, value: Any) -> None:
        # Look in the owner's own __dict__: an inherited method is restored by deleting the override.
        self._saved.append((owner, name, owner.__dict__.get(name, _MISSING), value))
        setattr(owner, name, value)
        self.active = True

    def wrap(self, owner: Any, name: str, make: Callable[..., Any]) -> None:
        """Replace `owner.name` by a wrapper calling `make(original, *args, **kwargs)` while these patches are active,
        and the original once they are restored: if another library wrapped ours meanwhile, ours stays in its chain
        but does nothing."""
        original = getattr(owner, name, None)
        if original is None:
            return

        @functools.wraps(original)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if not self.active:
                return original(*args, **kwargs)
            return make(original, *args, **kwargs)

        self.set(owner, name, wrapper)

    def restore(self) -> None:
        self.active = False
        while self._saved:
            owner, name, old, ours = self._saved.pop()
            if owner.__dict__.get(name, _MISSING) is not ours:
                continue  # wrapped again by someone else since: taking ours out would drop theirs
            if old is _MISSING:
                delattr(owner, name)
            else:
                setattr(owner, name, old)

    def __bool__(self) -> bool:
        return bool(self._saved)
