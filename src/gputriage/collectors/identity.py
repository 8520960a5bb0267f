"""A typed, identity-keyed weak map for user objects (modules, tensors, loaders, iterators)."""

from __future__ import annotations

import weakref
from typing import Any, Generic, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class IdentityMap(Generic[K, V]):
    """Maps an object to a value without keeping it alive and without calling its `__hash__`/`__eq__`.

    User classes may override those (torchmetrics' Metric hashes attributes its `__init__` has not set yet), so a
    WeakKeyDictionary could raise inside the user's constructor. Entries are keyed by `id()` and hold a weak reference
    that must still point at the same object (an id can be reused once its object is gone); the reference's callback
    drops the entry. Nothing is set on the object: the only trace is in its weak-reference list, which pickle, copy and
    torch.save do not see. A lookup is one dict access and one dereference: the probes do one per module call.
    """

    def __init__(self) -> None:
        self._entries: dict[int, tuple[weakref.ref[Any], V]] = {}

    def __setitem__(self, key: K, value: V) -> None:
        ident = id(key)
        entries = self._entries

        def forget(ref: weakref.ref[Any], ident: int = ident) -> None:
            entry = entries.get(ident)
            if entry is not None and entry[0] is ref:
                del entries[ident]

        entry = entries.get(ident)
        ref = entry[0] if entry is not None and entry[0]() is key else weakref.ref(key, forget)
        entries[ident] = (ref, value)

    def get(self, key: K) -> V | None:
        entry = self._entries.get(id(key))
        if entry is None or entry[0]() is not key:
            return None
        return entry[1]

    def setdefault(self, key: K, default: V) -> V:
        found = self.get(key)
        if found is not None:
            return found
        self[key] = default
        return default

    def items(self) -> list[tuple[K, V]]:
        """The live entries (a snapshot: iterating may run callbacks that drop entries)."""
        out = []
        for ref, value in list(self._entries.values()):
            key = ref()
            if key is not None:
                out.append((key, value))
        return out
