"""A typed, identity-keyed weak map for user objects (modules, tensors)."""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast

K = TypeVar("K")
V = TypeVar("V")


class IdentityMap(Generic[K, V]):
    """Maps an object to a value without keeping it alive and without calling its `__hash__`/`__eq__`.

    User classes may override those (torchmetrics' Metric hashes attributes its `__init__` has not set yet), so a
    WeakKeyDictionary could raise inside the user's constructor. torch's WeakIdKeyDictionary keys by `id()`.
    """

    def __init__(self) -> None:
        from torch.utils.weak import WeakIdKeyDictionary  # torch is imported by whoever has objects to key

        self._map: Any = WeakIdKeyDictionary()

    def __setitem__(self, key: K, value: V) -> None:
        self._map[key] = value

    def get(self, key: K) -> V | None:
        return cast("V | None", self._map.get(key))

    def setdefault(self, key: K, default: V) -> V:
        return cast("V", self._map.setdefault(key, default))
