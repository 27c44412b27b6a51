"""Batch invariance: a sentence's outputs are bit-identical whether it runs alone or inside any
batch, beside any other sentences, at any thread count, on every ISA path. A server that
batches requests, or a job whose batches fall where an engine's blocks end, must give each
sentence the same answer."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from test_gru import random_gru

from fusebridge import kernels
from fusebridge.kernels.gru import ACTIVATIONS


@st.composite
def batches(draw, max_len=40):
    """Sentence lengths of a batch and which one to look at."""
    lens = draw(st.lists(st.integers(0, max_len), min_size=1, max_size=24))
    return lens, draw(st.integers(0, len(lens) - 1))


def offsets_of(lens) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


@given(
    batch=batches(),
    layout=st.sampled_from(["lod", "tnc", "ntc"]),
    direction=st.sampled_from(["forward", "reverse", "bidirectional"]),
    lbr=st.booleans(),
    origin=st.booleans(),
    acts=st.tuples(st.sampled_from(sorted(ACTIVATIONS)), st.sampled_from(sorted(ACTIVATIONS))),
    ic=st.sampled_from([1, 7, 24, 70]),
    oc=st.sampled_from([3, 16, 33, 70]),
    count=st.integers(1, 3),
    seed=st.integers(0, 2**31),
)
def test_fusion_gru_sentence_alone_equals_in_batch(
    each_isa, threads, batch, layout, direction, lbr, origin, acts, ic, oc, count, seed
):
    lens, pick = batch
    rng = np.random.default_rng(seed)
    d = 2 if direction == "bidirectional" else 1
    steps = max(lens) + 1
    x, args = random_gru(rng, d, ic, oc, lens, layout=layout, steps=steps, scale=0.25)
    attrs = {
        "layout": layout,
        "direction": direction,
        "linear_before_reset": lbr,
        "origin_mode": origin,
        "gate_activation": acts[0],
        "activation": acts[1],
    }
    threads(count)
    hidden, last = kernels.fusion_gru(x, **args, **attrs, return_last=True)

    n = lens[pick]
    alone = {**args, "h0": args["h0"][:, pick : pick + 1]}
    if layout == "lod":
        begin = int(offsets_of(lens)[pick])
        x1, alone["offsets"] = x[begin : begin + n], offsets_of([n])
        mine = hidden[begin : begin + n]
    else:
        # Alone, padded only to its own length: the batch's padding is not part of the answer.
        x1 = x[:n, pick : pick + 1] if layout == "tnc" else x[pick : pick + 1, :n]
        alone["seq_lens"] = np.array([n])
        mine = hidden[:n, pick] if layout == "tnc" else hidden[pick, :n]
    threads(1)
    hidden1, last1 = kernels.fusion_gru(x1, **alone, **attrs, return_last=True)
    if layout == "tnc":
        hidden1 = hidden1[:, 0]
    elif layout == "ntc":
        hidden1 = hidden1[0]
    np.testing.assert_array_equal(hidden1, mine)
    np.testing.assert_array_equal(last1[:, 0], last[:, pick])


@given(
    batch=batches(max_len=30),
    tags=st.integers(1, 40),
    count=st.integers(1, 3),
    seed=st.integers(0, 2**31),
)
def test_crf_decoding_sentence_alone_equals_in_batch(threads, batch, tags, count, seed):
    lens, pick = batch
    rng = np.random.default_rng(seed)
    emission = rng.standard_normal((sum(lens), tags)).astype(np.float32)
    transition = rng.standard_normal((tags + 2, tags)).astype(np.float32)
    threads(count)
    path = kernels.crf_decoding(emission, transition, offsets_of(lens))
    begin, n = int(offsets_of(lens)[pick]), lens[pick]
    threads(1)
    alone = kernels.crf_decoding(emission[begin : begin + n], transition, offsets_of([n]))
    np.testing.assert_array_equal(alone, path[begin : begin + n])


@given(
    rows=st.integers(1, 70),
    pick=st.integers(0, 69),
    width=st.integers(1, 300),
    count=st.integers(1, 3),
    seed=st.integers(0, 2**31),
)
def test_softmax_row_alone_equals_in_batch(each_isa, threads, rows, pick, width, count, seed):
    """Softmax over the last axis, the inference form of softmax + dropout."""
    pick %= rows
    x = np.random.default_rng(seed).standard_normal((rows, width)).astype(np.float32) * 4
    threads(count)
    batch = kernels.softmax(x)
    threads(1)
    np.testing.assert_array_equal(kernels.softmax(x[pick : pick + 1])[0], batch[pick])
