"""DataLoader facts: where each loader was built, how it is configured, how long the steps waited on it, and how long
it takes to produce one batch.

The load time per batch (LoaderInfo.batch_load_s) is what the worker advice rests on. It is measured where it can be
seen from the training loop, without reaching into worker processes (whose start method, fork or spawn, decides what
a patch would reach):
- num_workers=0: the loop loads each batch itself inside __next__, so the wait is the load time (median over the
  batches after the first, which pays for lazy initialisation);
- num_workers=N: a batch the loop had to wait for (at least WAITED_SHARE of the time since the one before) was not
  ready, so every worker was busy; the batches then arrive one per load time / N, and the load time is N times the
  median interval between them. Batches that were ready when asked say only that the loader keeps up, so with fewer
  than MIN_WAITED_BATCHES of them waited for, the load time stays unknown.
With num_workers=0 the thread's CPU time in __next__ is measured too (batch_load_cpu_s): it tells loading that
computes (CPU-bound: no more workers than cores help) from loading that waits for files (more workers still help).
"""

from __future__ import annotations

import contextlib
import inspect
import math
import sys
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import msgspec
import torch
from torch import Tensor
from torch.utils.data import DataLoader, IterableDataset
from torch.utils.data import dataloader as dataloader_mod

from gputriage.collectors.identity import IdentityMap
from gputriage.collectors.patching import Patches
from gputriage.collectors.probe.placement import device_name, iter_tensors
from gputriage.collectors.probe.state import ProbeState
from gputriage.collectors.usercode import is_own_file, is_user_file, where_now
from gputriage.record.steps import LoaderInfo
from gputriage.stdlib import statistics

WAITED_SHARE = 0.25  # a batch waited for this share of its interval or more was not ready: every worker was busy
MIN_WAITED_BATCHES = 3
MAX_TIMED_BATCHES = 10_000  # per loader: more than any observed window, and bounded for one that sets --steps huge


class BatchTimes(msgspec.Struct):
    """One loader's per-batch times while steps were observed (bounded), for LoaderInfo.batch_load_s."""

    waits_s: list[float] = msgspec.field(default_factory=list)
    cpu_s: list[float] = msgspec.field(default_factory=list)  # the loop thread's CPU time in __next__
    waited_intervals_s: list[float] = msgspec.field(
        default_factory=list
    )  # between batches, for those the loop waited for
    last_end_s: float | None = None
    last_iterator: int | None = None  # id() of the iterator of the last batch: an interval never spans two epochs

    def add(self, iterator: int, wait_s: float, end_s: float, cpu_s: float) -> None:
        if len(self.waits_s) < MAX_TIMED_BATCHES:
            self.waits_s.append(wait_s)
            self.cpu_s.append(cpu_s)
        if self.last_end_s is not None and self.last_iterator == iterator:
            interval_s = end_s - self.last_end_s
            if (
                interval_s > 0
                and wait_s >= WAITED_SHARE * interval_s
                and len(self.waited_intervals_s) < MAX_TIMED_BATCHES
            ):
                self.waited_intervals_s.append(interval_s)
        self.last_end_s, self.last_iterator = end_s, iterator


class LoadTime(msgspec.Struct, frozen=True):
    load_s: float  # LoaderInfo.batch_load_s
    source: str  # LoaderInfo.batch_load_source
    cpu_s: float | None = None  # LoaderInfo.batch_load_cpu_s


def batch_load_time(num_workers: int | None, times: BatchTimes) -> LoadTime | None:
    """The time to produce one batch, and how it was found (see the module docstring); None when unknown."""
    if not num_workers:
        if not times.waits_s:
            return None
        skip = 1 if len(times.waits_s) > 1 else 0  # the first batch pays for lazy initialisation
        return LoadTime(statistics.median(times.waits_s[skip:]), "main-process", statistics.median(times.cpu_s[skip:]))
    if len(times.waited_intervals_s) < MIN_WAITED_BATCHES:
        return None
    return LoadTime(num_workers * statistics.median(times.waited_intervals_s), "workers-derived")


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
        self._builders: IdentityMap[DataLoader[Any], str] = IdentityMap()  # the library that called DataLoader(...)
        self._iterators: IdentityMap[Any, LoaderInfo] = IdentityMap()
        self._loaders: dict[int, tuple[weakref.ref[DataLoader[Any]], LoaderInfo]] = {}
        # (id of the dataset, the line that built the loader) -> the record of the loaders built there over it
        self._families: dict[tuple[int, str | None], tuple[weakref.ref[Any], LoaderInfo]] = {}
        self._times: dict[int, BatchTimes] = {}  # by id() of the LoaderInfo
        # id() of the LoaderInfos that handed a batch with autograd on: the training loaders. Once one exists, a batch
        # fetched under no_grad is an evaluation's (a callback's run over a test set), not what the step waits for.
        self._training: set[int] = set()
        # Loaders found evaluating (no backward between two of their batches while a training loader exists: HF's
        # evaluation loop fetches with autograd on), by id() of their LoaderInfo: never the training loader again.
        self._evaluating: set[int] = set()
        # id() of the info -> (info, {step index: (wait s, batches)}): kept by step, so that only the recorded
        # steps' share counts (an evaluation after the --steps window is in none of them)
        self._eval: dict[int, tuple[LoaderInfo, dict[int, tuple[float, int]]]] = {}
        self._backwards_at: IdentityMap[Any, int] = IdentityMap()  # iterator -> backward count at its last batch
        self.on_batch_start: Callable[[int], None] = lambda iterator: None  # the id() of the batch's iterator
        self.on_batch_end: Callable[[], None] = lambda: None
        self.on_exhausted: Callable[[], None] = lambda: None
        self.on_wait_stand_in: Callable[[float], None] = lambda seconds: None
        # The tensors of the last batch handed to the loop (see PlacementSection.batch_tensors)
        self.last_batch_tensors: list[bool] | None = None

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
        infos = [info for info in infos if id(info) in self._training] or infos  # a training loader, where one is
        busiest = max(infos, key=lambda i: (i.wait_s, i.batches), default=None)
        if busiest is None:
            return None
        load = batch_load_time(busiest.num_workers, self._times.get(id(busiest), BatchTimes()))
        if load is not None:
            busiest.batch_load_s = load.load_s
            busiest.batch_load_source = load.source
            busiest.batch_load_cpu_s = load.cpu_s
        return busiest

    def _loader_init(self, original: Any, loader: DataLoader[Any], /, *args: Any, **kwargs: Any) -> None:
        original(loader, *args, **kwargs)
        if not self._state.in_child:
            self._sites[loader] = where_now() or "?"
            builder = _builder_package()
            if builder is not None:
                self._builders[loader] = builder

    def _iter_init(self, original: Any, it: Any, loader: DataLoader[Any], /, *args: Any, **kwargs: Any) -> None:
        original(it, loader, *args, **kwargs)
        if not self._state.in_child:
            self._iterators[it] = self._info_for(loader)

    def _next(self, original: Any, it: Any) -> Any:
        state = self._state
        info = self._iterators.get(it) if not state.in_child else None
        if info is None or threading.get_ident() != state.owner_thread:
            return original(it)  # a worker process, or a prefetch thread: not the loop's wait
        clock = state.clock
        if self._evaluation(it, info):
            # an evaluation inside the training loop: its wait is no data wait of the step, nor this loader the one
            # the step is fed by (minGPT's eval from its iteration callback: "36% data wait", the eval loader shown);
            # its collation is still no op of the model's. Its wait is kept apart: the GPU idles through it too.
            return self._evaluation_batch(original, it, info)
        self.on_batch_start(id(it))
        if torch.is_grad_enabled():
            self._training.add(id(info))
        state.in_loader += 1
        start_s = clock.now()
        cpu_start_s = time.thread_time()
        stand_in = state.stand_in_clock
        stand_in_start_s = stand_in() if stand_in is not None else 0.0
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
        if stand_in is not None:
            self.on_wait_stand_in(stand_in() - stand_in_start_s)
        if info.batch_device is None:
            info.batch_device = _batch_device(batch)
        self.last_batch_tensors = _batch_tensors(batch)
        if clock.running:
            end_s = clock.now()
            info.batches += 1
            info.wait_s += end_s - start_s
            cpu_s = time.thread_time() - cpu_start_s
            self._times.setdefault(id(info), BatchTimes()).add(id(it), end_s - start_s, end_s, cpu_s)
        self.on_batch_end()
        return batch

    def _evaluation(self, it: Any, info: LoaderInfo) -> bool:
        """A batch of an evaluation pass: fetched under no_grad once a training loader exists, or by a loader whose
        last batch was followed by no backward while another loader trains."""
        key = id(info)
        backwards = self._state.clock.backwards
        last = self._backwards_at.get(it)
        self._backwards_at[it] = backwards
        if key in self._evaluating:
            return True
        others_train = bool(self._training - {key})
        if (not torch.is_grad_enabled() and self._training) or (others_train and last == backwards):
            self._evaluating.add(key)
            self._training.discard(key)
            return True
        return False

    def _evaluation_batch(self, original: Any, it: Any, info: LoaderInfo) -> Any:
        state, clock = self._state, self._state.clock
        start_s = clock.now()
        state.in_loader += 1
        handed = 0  # the call that ends the pass (StopIteration) waited too, but handed no batch
        try:
            batch = original(it)
            handed = 1
            return batch
        finally:
            state.in_loader -= 1
            if clock.running:
                by_step = self._eval.setdefault(id(info), (info, {}))[1]
                wait_s, batches = by_step.get(state.step, (0.0, 0))
                by_step[state.step] = (wait_s + clock.now() - start_s, batches + handed)

    def busiest_evaluation(self, steps: set[int]) -> LoaderInfo | None:
        """The evaluation loader the job waited on longest in the recorded `steps`, with that wait and its batches."""
        found = []
        for info, by_step in self._eval.values():
            kept = [value for step, value in by_step.items() if step in steps]
            if kept:
                found.append((info, math.fsum(w for w, _ in kept), sum(n for _, n in kept)))
        if not found:
            return None
        info, wait_s, batches = max(found, key=lambda entry: entry[1])
        return msgspec.structs.replace(info, wait_s=wait_s, batches=batches)

    def _info_for(self, loader: DataLoader[Any]) -> LoaderInfo:
        known = self._loaders.get(id(loader))
        if known is not None and known[0]() is loader:
            return known[1]
        info = self._family_of(loader)
        self._loaders[id(loader)] = (weakref.ref(loader), info)
        return info

    def _family_of(self, loader: DataLoader[Any]) -> LoaderInfo:
        """The record of this loader: that of one made before at the same line over the same dataset object, which
        this one is again (Hugging Face's Trainer builds its evaluation loader at every evaluate(); a loop that
        rebuilds its loader each epoch), or a new one. One loader to the user, one record: a trial's evaluation
        counted one pass's batches of three."""
        dataset = vars(loader).get("dataset")
        site = self._sites.get(loader)
        key = (id(dataset), site)
        known = self._families.get(key)
        if known is not None and known[0]() is dataset:
            return known[1]
        info = describe_loader(loader, site)
        info.built_by = self._builders.get(loader)
        with contextlib.suppress(TypeError):  # a dataset that takes no weak reference is not followed
            self._families[key] = (weakref.ref(dataset), info)
        return info


def _builder_package(limit: int = 60) -> str | None:
    """The installed package the user's code called that built the DataLoader (transformers' Trainer, through
    accelerate's prepare), or None when the user's own code called DataLoader(...): the fix goes where the user sets
    the loader's options (TrainingArguments)."""
    frame: FrameType | None = sys._getframe(2)
    called: str | None = None  # the package nearest the user's frame so far
    for _ in range(limit):
        if frame is None:
            break
        name = frame.f_code.co_filename
        if is_user_file(name):
            return called
        parts = Path(name).parts
        marker = next((m for m in ("site-packages", "dist-packages") if m in parts), None)
        if marker is not None and not is_own_file(name) and parts.index(marker) + 1 < len(parts):
            package = parts[parts.index(marker) + 1].removesuffix(".py")
            called = package if package != "torch" else called
        frame = frame.f_back
    return called


def dataset_length(dataset: Any, sampler: Any) -> int | None:
    """len(dataset) where the DataLoader asks it anyway: torch's own sampler over a map-style dataset reads it each
    epoch. Elsewhere (an IterableDataset, the user's own sampler) Python's DataLoader never calls the dataset's
    `__len__`, which may be costly, count something, or raise (a stream with no length): it is left uncalled."""
    if isinstance(dataset, IterableDataset) or not own_object(sampler):
        return None
    return length(dataset)


def own_object(obj: Any) -> bool:
    """An object of torch's own classes (a SequentialSampler, a DistributedSampler), not the job's."""
    return type(obj).__module__.startswith("torch.")


def length(obj: Any) -> int | None:
    try:
        return len(obj)
    except Exception:  # len() of user datasets and samplers can raise anything
        return None


def describe_loader(loader: DataLoader[Any], where: str | None) -> LoaderInfo:
    dataset = loader.dataset
    sampler = _static(loader.batch_sampler, "sampler")
    if sampler is None:  # not `or`: a truth test calls the job's sampler's __len__
        sampler = loader.sampler
    # a dataset of the job's: its __len__ (a folder scan, a database count, a counter) runs once per epoch under
    # python, and would run once more for us; torch's own (TensorDataset, Subset) only
    dataset_len = dataset_length(dataset, sampler) if own_object(dataset) else None
    return LoaderInfo(
        dataset_class=type(dataset).__name__,
        dataset_len=dataset_len,
        # A custom batch_sampler (HF accelerate, bucketing samplers) leaves loader.batch_size None.
        batch_size=loader.batch_size if loader.batch_size is not None else _static(loader.batch_sampler, "batch_size"),
        num_workers=loader.num_workers,
        pin_memory=bool(loader.pin_memory),
        persistent_workers=bool(loader.persistent_workers),
        prefetch_factor=loader.prefetch_factor,
        sampler_class=type(sampler).__name__,
        is_iterable_dataset=isinstance(dataset, IterableDataset),
        where=where,
        has_transform=_static(dataset, "transform") is not None,
    )


def _static(obj: Any, name: str) -> Any:
    """`obj.name` read without running the job's code: a Dataset whose `__getattr__` looks names up in a dict raised
    KeyError for `transform` into the job's loop (a trial), and a property would run for us. A property or other
    descriptor is returned as it is (not None: the attribute exists)."""
    try:
        return inspect.getattr_static(obj, name, None)
    except Exception:  # an odd __class__ or __mro__: the job's object, never the job's failure
        return None


# A batch with more elements than this is not one a loop unpacks by name.
MAX_BATCH_ELEMENTS = 16


def _batch_tensors(batch: Any) -> list[bool] | None:
    """Which elements of a tuple or list batch are tensors (`(data, target)` -> [True, True]); None otherwise."""
    if type(batch) not in (tuple, list) or not 0 < len(batch) <= MAX_BATCH_ELEMENTS:
        return None  # a namedtuple, a dict, a model-specific batch: unpacked by attribute or key, not by position
    with contextlib.suppress(Exception):  # an element's odd __class__ must never break the user's loop
        return [isinstance(element, Tensor) for element in batch]
    return None


def _batch_device(batch: Any) -> str | None:
    """The device of the batch's first tensor (a collate_fn may build it on the GPU), or None when it holds none."""
    with contextlib.suppress(Exception):  # an odd batch type must never break the user's loop
        for _, t in iter_tensors(batch):
            return device_name(t)
    return None
