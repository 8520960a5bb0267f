"""DataLoader facts: where each loader was built, how it is configured, and how long the steps waited on it."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Callable
from typing import Any

from torch.utils.data import DataLoader, IterableDataset
from torch.utils.data import dataloader as dataloader_mod

from gputriage.collectors.patching import Patches
from gputriage.collectors.probe.state import ProbeState
from gputriage.collectors.usercode import where_now
from gputriage.record.steps import LoaderInfo


class LoaderProbe:
    """Patches DataLoader creation, iteration and `__next__`.

    `on_batch_start` / `on_batch_end` / `on_exhausted` let the step tracker time the wait and, for loops without an
    optimizer, cut steps at each batch.
    """

    def __init__(self, state: ProbeState) -> None:
        self._state = state
        self._patches = Patches()
        self._sites: weakref.WeakKeyDictionary[DataLoader[Any], str] = weakref.WeakKeyDictionary()
        self._loaders: dict[int, tuple[weakref.ref[DataLoader[Any]], LoaderInfo]] = {}
        self.on_batch_start: Callable[[], None] = lambda: None
        self.on_batch_end: Callable[[], None] = lambda: None
        self.on_exhausted: Callable[[], None] = lambda: None

    def start(self) -> None:
        self._patches.set(DataLoader, "__init__", self._wrap_loader_init(DataLoader.__init__))
        base = dataloader_mod._BaseDataLoaderIter
        self._patches.set(base, "__init__", self._wrap_iter_init(base.__init__))
        self._patches.set(base, "__next__", self._wrap_next(base.__next__))

    def stop(self) -> None:
        self._patches.restore()

    def busiest(self) -> LoaderInfo | None:
        """The loader the observed steps waited on longest (the training loader, usually)."""
        infos = [info for _, info in self._loaders.values() if info.batches > 0]
        return max(infos, key=lambda i: (i.wait_s, i.batches), default=None)

    def _wrap_loader_init(self, orig: Callable[..., None]) -> Callable[..., None]:
        probe = self

        @functools.wraps(orig)
        def __init__(loader: DataLoader[Any], *args: Any, **kwargs: Any) -> None:
            orig(loader, *args, **kwargs)
            if not probe._state.in_child:
                probe._sites[loader] = where_now() or "?"

        return __init__

    def _wrap_iter_init(self, orig: Callable[..., None]) -> Callable[..., None]:
        probe = self

        @functools.wraps(orig)
        def __init__(it: Any, loader: DataLoader[Any]) -> None:
            orig(it, loader)
            it._gputriage_info = probe._info_for(loader)

        return __init__

    def _wrap_next(self, orig: Callable[[Any], Any]) -> Callable[[Any], Any]:
        probe = self
        state = self._state
        clock = state.clock

        @functools.wraps(orig)
        def __next__(it: Any) -> Any:
            info: LoaderInfo | None = getattr(it, "_gputriage_info", None)
            if info is None or state.in_child or threading.get_ident() != state.owner_thread:
                return orig(it)  # a worker process, or a prefetch thread: not the loop's wait
            probe.on_batch_start()
            state.in_loader += 1
            start_s = clock.now()
            clock.push("data_wait")
            try:
                batch = orig(it)
            except StopIteration:
                clock.pop()
                state.in_loader -= 1
                probe.on_exhausted()
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
            probe.on_batch_end()
            return batch

        return __next__

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
