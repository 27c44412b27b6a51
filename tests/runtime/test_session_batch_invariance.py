"""Batch invariance at the Session level: the bundled tagger (embedding, two bidirectional
GRUs, fc, CRF) gives every sentence the same bits, in the GRU output, the emission scores and
the tags, whether it runs alone or inside any batch, at any thread count."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusebridge as fb
from fusebridge import kernels
from fusebridge.models import assets

GRU_OUT, EMISSION, TAGS = "concat_1.tmp_0", "fc_4.tmp_1", "crf_decoding_0.tmp_0"


@pytest.fixture(scope="module")
def session():
    optimized, _ = fb.optimize(fb.load(assets.path("tagger")))
    produced = {v.name: v for node in optimized.graph for v in node.outputs}
    # The last GRU layer's output and the emission scores become outputs too: their bits, not
    # only the tags (which hide most differences), must not depend on the batch.
    optimized.graph.outputs.extend([produced[GRU_OUT], produced[EMISSION]])
    return fb.Session(optimized)


def words(lengths: list[int], seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 1000, (n, 1)) for n in lengths]


def run(session, sentences: list[np.ndarray]) -> list[dict[str, np.ndarray]]:
    """Per sentence: its rows of each output."""
    lengths = [len(s) for s in sentences]
    out = session.run({"words": fb.LoDTensor(np.concatenate(sentences), lengths=lengths)})
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    full = {GRU_OUT: out[GRU_OUT], EMISSION: out[EMISSION], TAGS: out[TAGS].data}
    return [{k: v[a:b] for k, v in full.items()} for a, b in itertools.pairwise(bounds)]


def assert_same(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> None:
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@settings(max_examples=40)
@given(
    lengths=st.lists(st.integers(0, 40), min_size=1, max_size=24),
    pick=st.integers(0, 23),
    count=st.integers(1, 3),
    seed=st.integers(0, 2**31),
)
def test_sentence_alone_equals_in_any_batch(session, threads, lengths, pick, count, seed):
    pick %= len(lengths)
    sentences = words(lengths, seed)
    threads(count)
    in_batch = run(session, sentences)[pick]
    threads(1)
    assert_same(run(session, [sentences[pick]])[0], in_batch)


def test_batches_of_64_63_and_1_agree(session, threads):
    """Where a job's batches end must not matter (near-tied Viterbi paths made 1-2 of 20,000
    sentences change tags when the GRU's bits depended on the batch)."""
    sentences = words(list(np.random.default_rng(7).integers(1, 61, 200)), seed=8)
    results = {}
    for size, count in ((64, 2), (63, 3), (1, 1)):
        threads(count)
        results[size] = [
            r for i in range(0, len(sentences), size) for r in run(session, sentences[i : i + size])
        ]
    for size in (63, 1):
        for a, b in zip(results[64], results[size]):
            assert_same(a, b)


def test_thread_count_holds_in_worker_threads(session, threads):
    """set_num_threads is process-wide: a Session used from a thread pool (a web server, an
    actor's worker thread) runs with the count set, not a per-thread default (OpenMP's
    omp_set_num_threads was per thread, when the kernels ran on it)."""
    from concurrent.futures import ThreadPoolExecutor

    from fusebridge.kernels import _C

    for count in (1, 2, 3):
        threads(count)
        with ThreadPoolExecutor(2) as pool:
            seen = list(pool.map(lambda _: (kernels.get_num_threads(), _C.team_size()), range(4)))
        assert seen == [(count, count)] * 4
    threads(1)
    alone = run(session, words([9, 30], seed=3))
    with ThreadPoolExecutor(1) as pool:
        assert_same(pool.submit(run, session, words([9, 30], seed=3)).result()[1], alone[1])
