"""DataLoader facts: where each loader was built, how it is configured, and how long the steps waited on it."""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any

from torch.utils.data import DataLoader, IterableDataset
from torch.utils.data import dataloader as dataloader_mod

from gputriage.collectors.identity import IdentityMap
from gputriage.collectors.patching import Patches
from gputriage.collectors.probe.state import ProbeState
from gputriage.collectors.usercode import where_now
from gputriage.record.steps import LoaderInfo


class LoaderProbe:
    """Patches DataLoader creation, iteration and `__next__` (torch's classes; what it learns about a loader or an
    iterator is kept here, keyed by identity, never set on them).

    `on_batch_start` / `on_batch_end` / `on_exhausted` let the step tracker time the wait and, for loops without an
    optimizer, cut steps at each batch.
    """

    def __init__(self, state: ProbeState) -> None:
        self._state = state
        self._patches = Patches()
        self._sites: IdentityMap[DataLoader[Any], str] = IdentityMap()
        self._iterators: IdentityMap[Any, LoaderInfo] = IdentityMap()
        self._loaders: dict[int, tuple[weakref.ref[DataLoader[Any]], LoaderInfo]] = {}
        self.on_batch_start: Callable[[], None] = lambda: None
        self.on_batch_end: Callable[[], None] = lambda: None
        self.on_exhausted: Callable[[], None] = lambda: None

    def start(self) -> None:
        self._patches.wrap(DataLoader, "__init__", self._loader_init)
        base = dataloader_mod._BaseDataLoaderIter
        self._patches.wrap(base, "__init__", self._iter_init)
        self._patches.wrap(base, "__next__", self._next)

    def stop(self) -> None:
        self._patches.restore()

    def busiest(self) -> LoaderInfo | None:
        """The loader the observed steps waited on longest (the training loader, usually)."""
        infos = [info for _, info in self._loaders.values() if info.batches > 0]
        return max(infos, key=lambda i: (i.wait_s, i.batches), default=None)

    def _loader_init(self, original: Any, loader: DataLoader[Any], *args: Any, **kwargs: Any) -> None:
        original(loader, *args, **kwargs)
        if not self._state.in_child:
            self._sites[loader] = where_now() or "?"

    def _iter_init(self, original: Any, it: Any, loader: DataLoader[Any], *args: Any, **kwargs: Any) -> None:
        original(it, loader, *args, **kwargs)
        if not self._state.in_child:
            self._iterators[it] = self._info_for(loader)

    def _next(self, original: Any, it: Any) -> Any:
        state = self._state
        info = self._iterators.get(it) if not state.in_child else None
        if info is None or threading.get_ident() != state.owner_thread:
            return original(it)  # a worker process, or a prefetch thread: not the loop's wait
        clock = state.clock
        self.on_batch_start()
        state.in_loader += 1
        start_s = clock.now()
        clock.push("data_wait")
        try:
            batch = original(it)
        except StopIteration:
            clock.pop()
            state.in_loader -= 1
            self.on_exhausted()
            raise
        except BaseException:
            clock.pop()
            state.in_loader -= 1
            raise
        clock.pop()
        state.in_loader -= 1
        if clock.running:
            info.batches += 1
            info.wait_s += clock.now() - start_s
        self.on_batch_end()
        return batch

    def _info_for(self, loader: DataLoader[Any]) -> LoaderInfo:
        known = self._loaders.get(id(loader))
        if known is not None and known[0]() is loader:
            return known[1]
        info = describe_loader(loader, self._sites.get(loader))
        self._loaders[id(loader)] = (weakref.ref(loader), info)
        return info


def describe_loader(loader: DataLoader[Any], where: str | None) -> LoaderInfo:
    dataset = loader.dataset
    try:
        dataset_len: int | None = len(dataset)  # type: ignore[arg-type]
    except TypeError:
        dataset_len = None
    sampler = getattr(loader.batch_sampler, "sampler", None) or loader.sampler
    return LoaderInfo(
        dataset_class=type(dataset).__name__,
        dataset_len=dataset_len,
        # A custom batch_sampler (HF accelerate, bucketing samplers) leaves loader.batch_size None.
        batch_size=loader.batch_size
        if loader.batch_size is not None
        else getattr(loader.batch_sampler, "batch_size", None),
        num_workers=loader.num_workers,
        pin_memory=bool(loader.pin_memory),
        persistent_workers=bool(loader.persistent_workers),
        prefetch_factor=loader.prefetch_factor,
        sampler_class=type(sampler).__name__,
        is_iterable_dataset=isinstance(dataset, IterableDataset),
        where=where,
        has_transform=getattr(dataset, "transform", None) is not None,
    )
