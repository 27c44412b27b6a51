"""The cuda engine's sequence ops against the cpu engine, bit for bit: crf_decoding's paths
(the same float32 sums and compares, the same tie rule) and the LoD <-> padded reorders
(copies). The same list runs on a GPU (gpu_cases.run_all) and in tests/cuda under the CPU
emulation of the kernels, in the result format of gpu_cases."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from fusebridge import cuda, kernels
from fusebridge.cuda.gpu_cases import Arrays, _case, _same_bits


def _offsets(lengths: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)


def _crf_inputs(rng: np.random.Generator, tags: int, words: int, ties: bool):
    """(emission, transition): standard normal scores, or (ties) small integers, which make
    many sums equal, with banned transitions (-inf), an unreachable word (a row of -inf) and a
    NaN, all of which the tie rule decides the same way on both engines."""
    if not ties:
        e = rng.standard_normal((words, tags)).astype(np.float32)
        return e, rng.standard_normal((tags + 2, tags)).astype(np.float32)
    e = rng.integers(-1, 2, (words, tags)).astype(np.float32)
    t = rng.integers(-1, 2, (tags + 2, tags)).astype(np.float32)
    t[2:, 1] = -np.inf  # no tag is followed by tag 1
    t[0, 2] = -np.inf  # no sentence starts with tag 2
    if words > 3:
        e[3] = -np.inf
        e[2, 0] = np.nan
    return e, t


def crf_cases(io: Arrays, small: bool = False) -> Iterator[dict]:
    rng = np.random.default_rng(5)
    # (tags, sentence lengths, ties): 1 tag; lengths 0 and 1; more tags than a block's threads;
    # a long sentence.
    plans = [(5, [0, 1, 3], False)]
    if not small:
        plans += [
            (1, [3, 0, 1], False),
            (5, [0, 1, 2, 7, 0], False),
            (6, [4, 9, 1, 6], True),
            (57, [1, 12, 30, 0, 5], False),
            (300, [2, 0, 3, 1], False),
            (8, [200, 1], False),
        ]
    for tags, lengths, ties in plans:
        offsets = _offsets(lengths)
        words = int(offsets[-1])
        emission, transition = _crf_inputs(rng, tags, words, ties)
        want = kernels.crf_decoding(emission, transition, offsets)
        name = f"crf_decoding tags={tags} lengths={lengths}" + (" ties" if ties else "")
        path = cuda.crf_decoding(io.dev(emission), io.dev(transition), offsets)
        yield _case(name, _same_bits(io.host(path), want))
        # Every third label differs from the path (and one is out of range): both 0 and 1.
        label = want.copy()
        label[::3] = (label[::3] + 1) % tags if tags > 1 else -1
        want = kernels.crf_decoding(emission, transition, offsets, label)
        path = cuda.crf_decoding(io.dev(emission), io.dev(transition), offsets, io.dev(label))
        yield _case(f"{name} label", _same_bits(io.host(path), want))
    if small:
        return
    # Every score equal: every step and the last tag are ties, tag 0 wins them all.
    offsets = _offsets([3, 1, 0])
    zeros = np.zeros((4, 4), np.float32), np.zeros((6, 4), np.float32)
    want = kernels.crf_decoding(*zeros, offsets)
    path = cuda.crf_decoding(*map(io.dev, zeros), offsets)
    yield _case("crf_decoding all ties", _same_bits(io.host(path), want))
    # Scores near -FLT_MAX, where the maxima start, so that only a start at -FLT_MAX (not
    # above it) gives the cpu's path: tag 3 is reached by a finite -2e38 from every tag but 0
    # (-inf) and its end score makes it the last tag; then every last tag ends at -2e38 or
    # below (tag 0: -inf).
    emission, transition = _crf_inputs(rng, 4, 5, False)
    offsets = _offsets([3, 2])
    transition[3:, 3], transition[2, 3], transition[1, 3] = -2e38, -np.inf, 3e38
    for what in ("step", "last tag"):
        if what == "last tag":
            transition[1] = [-np.inf, -2e38, -2e38, -2e38]
        want = kernels.crf_decoding(emission, transition, offsets)
        path = cuda.crf_decoding(io.dev(emission), io.dev(transition), offsets)
        yield _case(f"crf_decoding near -FLT_MAX, {what}", _same_bits(io.host(path), want))
    # float64 scores (rounded to float32 first, as the cpu engine does), an int32 label and
    # the offsets as a device array (downloaded).
    offsets = _offsets([3, 4])
    emission, transition = _crf_inputs(rng, 4, 7, False)
    e64, t64 = emission.astype(np.float64) * 1.1, transition.astype(np.float64) * 1.1
    label = rng.integers(0, 4, (7, 1)).astype(np.int32)
    want = kernels.crf_decoding(e64, t64, offsets, label)
    path = cuda.crf_decoding(io.dev(e64), io.dev(t64), io.dev(offsets), io.dev(label))
    yield _case(
        "crf_decoding float64, int32 label, device offsets", _same_bits(io.host(path), want)
    )


# (dtype, a word's shape): widths 1 and odd, and rows that move in each unit (16, 8, 4, 2 and
# 1 bytes).
ROWS = [
    (np.float32, (7,)),
    (np.float32, ()),
    (np.float32, (1,)),
    (np.float32, (4,)),
    (np.float32, (3, 5)),
    (np.int64, (3,)),
    (np.float16, (5,)),
    (np.bool_, (3,)),
]
LAYOUTS = [(layout, side) for layout in ("tnc", "ntc") for side in ("right", "left")]


def _reorder_case(
    io: Arrays, x: np.ndarray, lengths: list[int], layout: str, side: str, name: str
) -> Iterator[dict]:
    """Both reorders of x [words, C...] under one layout: the padded batch, the lengths, the
    data back and the offsets, each equal to the cpu engine's."""
    offsets = _offsets(lengths)
    want, want_lens = kernels.lod_to_padded(x, offsets, layout, side)
    padded, lens = cuda.lod_to_padded(io.dev(x), offsets, layout, side)
    ok = _same_bits(io.host(padded), want) and np.array_equal(lens, want_lens)
    yield _case(f"lod_to_padded {name} {layout} {side}", ok)
    data, offs = cuda.padded_to_lod(io.dev(want), want_lens, layout, side)
    want_data, want_offs = kernels.padded_to_lod(want, want_lens, layout, side)
    ok = _same_bits(io.host(data), want_data) and np.array_equal(offs, want_offs)
    yield _case(f"padded_to_lod {name} {layout} {side}", ok)


def reorder_cases(io: Arrays, small: bool = False) -> Iterator[dict]:
    rng = np.random.default_rng(6)
    lengths = [3, 0, 1, 5, 2]
    words = sum(lengths)
    for i, (dtype, row) in enumerate(ROWS[:1] if small else ROWS):
        x = (rng.standard_normal((words, *row)) * 10).astype(dtype)
        name = f"{np.dtype(dtype).name} {(words, *row)}"
        # Every layout for the first rows, one each for the rest.
        for layout, side in LAYOUTS if i < 3 else [LAYOUTS[i % 4]]:
            yield from _reorder_case(io, x, lengths, layout, side, name)
    if small:
        return
    # No words at all; no sentences at all.
    for lens in ([0, 0], []):
        x = np.zeros((0, 3), np.float32)
        yield from _reorder_case(io, x, lens, "tnc", "right", f"lengths {lens}")
    # Rows of 16 bytes on a 4-byte boundary: they move in 4-byte units.
    x = rng.standard_normal((words, 4)).astype(np.float32)
    flat = io.dev(np.concatenate([np.zeros(1, np.float32), x.reshape(-1)]))
    xd = flat[1:].reshape(x.shape)
    want, _ = kernels.lod_to_padded(x, _offsets(lengths), "ntc", "left")
    padded, _ = cuda.lod_to_padded(xd, _offsets(lengths), "ntc", "left")
    yield _case("lod_to_padded of an unaligned view", _same_bits(io.host(padded), want))
    # seq_lens None: every sentence T long; lengths as a device array (downloaded).
    p = rng.standard_normal((4, 3, 2)).astype(np.float32)
    data, offs = cuda.padded_to_lod(io.dev(p), None, "tnc")
    want_data, want_offs = kernels.padded_to_lod(p, None, "tnc")
    ok = _same_bits(io.host(data), want_data) and np.array_equal(offs, want_offs)
    yield _case("padded_to_lod seq_lens=None", ok)
    seq = np.array([2, 0, 4], np.int64)
    data, offs = cuda.padded_to_lod(io.dev(p), io.dev(seq), "tnc", "left")
    want_data, want_offs = kernels.padded_to_lod(p, seq, "tnc", "left")
    ok = _same_bits(io.host(data), want_data) and np.array_equal(offs, want_offs)
    yield _case("padded_to_lod device seq_lens", ok)


def run_all(io: Arrays, small: bool = False) -> list[dict]:
    """Every case (small: one or two per kernel, for compute-sanitizer)."""
    results = []
    for cases in (crf_cases, reorder_cases):
        try:
            results.extend(cases(io, small))
        except Exception as exc:  # a crash is a failed case, reported with the rest
            results.append(_case(f"{cases.__name__} raised", False, error=repr(exc)))
    return results
