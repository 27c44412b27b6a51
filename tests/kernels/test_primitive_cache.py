"""The primitive caches: the compiled one of the CPU kernels (csrc/primitive_cache.hpp, shared
with the framework op libraries) and the Python one the cuda engine keeps its primitives in:
LRU by descriptor, capacity 0 = off, one build under concurrency, and concurrent execution from
many Python threads (the GIL is released in kernels)."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from fusebridge import ArgumentError, kernels
from fusebridge.kernels import core, reference
from fusebridge.kernels.primitive_cache import PrimitiveCache, clear_cache


@pytest.fixture
def fresh_cache():
    """The compiled cache, empty, with room (FUSEBRIDGE_PRIMITIVE_CACHE_CAPACITY may turn it
    off); its capacity restored after."""
    before = kernels.cache_stats()["capacity"]
    kernels.set_cache_capacity(64)
    clear_cache()
    yield
    kernels.set_cache_capacity(before)


def _gru_descriptor(oc: int) -> object:
    return kernels.GRUDescriptor(
        layout=core._C.SeqLayout.tnc, ic=8, oc=oc, directions=1, reverse=False,
        linear_before_reset=False, origin_mode=True, act=core._C.GruAct.tanh,
        gate=core._C.GruAct.sigmoid, projection=True, isa=core._C.Isa[core.isa()],
    )  # fmt: skip


def test_compiled_cache_lru_by_descriptor(fresh_cache):
    kernels.set_cache_capacity(2)
    a, b, c = (_gru_descriptor(oc) for oc in (4, 5, 6))
    first = core._C.primitive(a)
    assert core._C.primitive(_gru_descriptor(4)) is first  # an equal descriptor: the same one
    core._C.primitive(b)
    core._C.primitive(a)  # a hit: "a" becomes the most recent
    core._C.primitive(c)  # evicts "b", the least recently used
    assert kernels.cache_stats() == {
        "capacity": 2, "size": 2, "hits": 2, "misses": 3, "evictions": 1
    }  # fmt: skip
    assert core._C.primitive(a) is first
    core._C.primitive(b)  # built again
    assert kernels.cache_stats()["misses"] == 4
    kernels.set_cache_capacity(0)
    assert kernels.cache_stats()["size"] == 0
    assert core._C.primitive(a) is not core._C.primitive(a)  # off: a new one each time
    with pytest.raises(ArgumentError, match="capacity"):
        core._C.set_cache_capacity(-1)


def test_compiled_cache_builds_once_under_concurrency(fresh_cache):
    desc = _gru_descriptor(16)
    gate = threading.Barrier(16)

    def worker(_):
        gate.wait()
        return core._C.primitive(desc)

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(worker, range(16)))
    assert all(r is results[0] for r in results)
    assert kernels.cache_stats()["misses"] == 1 and kernels.cache_stats()["hits"] == 15


def test_compiled_cache_keeps_no_failed_build(fresh_cache):
    bad = _gru_descriptor(0)
    for _ in range(2):
        with pytest.raises(ArgumentError, match="hidden size"):
            core._C.primitive(bad)
    assert kernels.cache_stats()["size"] == 0 and kernels.cache_stats()["misses"] == 2


def test_hits_misses_and_lru_eviction():
    cache = PrimitiveCache(2)
    built = []
    make = lambda k: built.append(k) or f"prim-{k}"  # noqa: E731
    assert cache.get("a", make) == "prim-a"
    assert cache.get("b", make) == "prim-b"
    assert cache.get("a", make) == "prim-a"  # hit; "a" becomes most recent
    cache.get("c", make)  # evicts "b", the least recently used
    assert cache.stats() == {"capacity": 2, "size": 2, "hits": 1, "misses": 3, "evictions": 1}
    cache.get("a", make)
    cache.get("b", make)
    assert built == ["a", "b", "c", "b"]


def test_capacity_zero_turns_caching_off():
    cache = PrimitiveCache(0)
    built = []
    for _ in range(3):
        cache.get("k", lambda k: built.append(k) or k)
    assert built == ["k", "k", "k"]
    assert cache.stats()["size"] == 0
    with pytest.raises(ArgumentError, match="capacity"):
        cache.set_capacity(-1)


def test_built_once_under_concurrency():
    cache = PrimitiveCache(8)
    calls = []
    gate = threading.Barrier(16)

    def slow_build(key):
        calls.append(key)
        time.sleep(0.05)
        return object()

    def worker(_):
        gate.wait()
        return cache.get("same", slow_build)

    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(worker, range(16)))
    assert len(calls) == 1
    assert all(r is results[0] for r in results)


def test_a_failed_build_is_not_cached():
    cache = PrimitiveCache(4)

    def broken(key):
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        cache.get("k", broken)
    assert cache.get("k", lambda k: 7) == 7


def test_dropout_uses_the_cache_by_descriptor(fresh_cache):
    x = np.ones((8, 8), np.float32)
    kernels.dropout(x, 0.5, seed=1)
    kernels.dropout(x, 0.5, seed=2, offset=9)  # seed and offset are arguments, not keys
    assert kernels.cache_stats()["misses"] == 1 and kernels.cache_stats()["hits"] == 1
    kernels.dropout(x, 0.25, seed=1)  # another p is another primitive
    assert kernels.cache_stats()["misses"] == 2
    kernels.set_cache_capacity(0)
    kernels.dropout(x, 0.5, seed=1)
    assert kernels.cache_stats()["size"] == 0


def test_concurrent_calls_from_many_threads(fresh_cache, each_isa):
    shapes = [(300, 17), (5, 999), (4096,)]
    xs = [
        np.random.default_rng(i).standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)
    ]
    expected = [reference.dropout(x, 0.3, seed, 5)[0] for seed, x in enumerate(xs)]

    def worker(i):
        k = i % len(xs)
        return k, kernels.dropout(xs[k], 0.3, seed=k, offset=5)

    with ThreadPoolExecutor(8) as pool:
        for k, y in pool.map(worker, range(96)):
            np.testing.assert_array_equal(y, expected[k])
    assert kernels.cache_stats()["misses"] == len(xs)
