"""Primitive caches keyed by immutable descriptors (oneDNN's primitive cache): LRU, thread-safe,
each primitive built once even when many threads ask for it at the same time.

The CPU kernels' primitives live in the compiled runtime's cache (csrc/primitive_cache.hpp,
reached as `core._C.primitive(desc)`), which the Paddle and MXNet op libraries share. The
PrimitiveCache class here is that cache's rule for Python objects: the cuda engine keeps its
primitives (Python objects around device kernels) in `CACHE`. cache_stats and
set_cache_capacity speak of the CPU cache; set_cache_capacity sets both."""

from __future__ import annotations

import os
import threading
import warnings
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any

from fusebridge.errors import ArgumentError
from fusebridge.kernels import core

DEFAULT_CAPACITY = 1024


class _Pending:
    """A primitive some thread is building; others wait for it instead of building it too."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def result(self) -> Any:
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.value


class PrimitiveCache:
    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._lock = threading.Lock()
        self._entries: OrderedDict[Hashable, Any] = OrderedDict()
        self._pending: dict[Hashable, _Pending] = {}
        self._capacity = 0
        self.hits = self.misses = self.evictions = 0
        self.set_capacity(capacity)

    def set_capacity(self, capacity: int) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 0:
            raise ArgumentError(
                f"set_cache_capacity: capacity must be an integer >= 0, got {capacity!r}"
            )
        with self._lock:
            self._capacity = capacity
            self._evict()

    def get(self, key: Hashable, create: Callable[[Hashable], Any]) -> Any:
        """The primitive for `key`, calling `create(key)` only when no one has built it."""
        with self._lock:
            if key in self._entries:
                self.hits += 1
                self._entries.move_to_end(key)
                return self._entries[key]
            pending = self._pending.get(key)
            if pending is not None:
                self.hits += 1
                owner = False
            else:
                self.misses += 1
                owner = self._capacity > 0
                if owner:
                    pending = self._pending[key] = _Pending()
        if pending is None:  # caching is off
            return create(key)
        if not owner:
            return pending.result()
        try:
            pending.value = create(key)
        except BaseException as exc:
            pending.error = exc
            raise
        finally:
            with self._lock:
                del self._pending[key]
                if pending.error is None:
                    self._entries[key] = pending.value
                    self._evict()
            pending.done.set()
        return pending.value

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {
                "capacity": self._capacity,
                "size": len(self._entries),
                "hits": self.hits,
                "misses": self.misses,
                "evictions": self.evictions,
            }

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = self.evictions = 0

    def _evict(self) -> None:
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)
            self.evictions += 1


def _capacity_from_env() -> int:
    raw = os.environ.get("FUSEBRIDGE_PRIMITIVE_CACHE_CAPACITY", str(DEFAULT_CAPACITY))
    try:
        value = int(raw)
        if value < 0:
            raise ValueError
        return value
    except ValueError:
        warnings.warn(
            f"FUSEBRIDGE_PRIMITIVE_CACHE_CAPACITY must be an integer >= 0, got {raw!r}; "
            f"using {DEFAULT_CAPACITY}",
            stacklevel=2,
        )
        return DEFAULT_CAPACITY


# The compiled cache reads the same variable itself (an op library may run without Python);
# here an unreadable value is also reported.
CACHE = PrimitiveCache(_capacity_from_env())


def cache_stats() -> dict[str, int]:
    """Capacity, size, hits, misses and evictions of the CPU kernels' primitive cache, which
    the framework op libraries share."""
    return core._C.cache_stats()


def set_cache_capacity(n: int) -> None:
    """Primitives kept at most, by each engine's cache; 0 turns caching off."""
    CACHE.set_capacity(n)
    core._C.set_cache_capacity(n)


def clear_cache() -> None:
    """Drops every CPU primitive and resets the counters (tests, benchmarks of cold calls)."""
    core._C.clear_cache()
