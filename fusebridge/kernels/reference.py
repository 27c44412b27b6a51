"""NumPy oracle for the kernels, written from the formulas (docs/dropout.md for dropout,
docs/gru.md for the GRU), not from the C++: slow, obvious, and independent of how the
kernels tile, thread or vectorize."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels.gru import ACTIVATIONS
from fusebridge.kernels.sequence_layout import as_offsets, as_seq_lens

M32 = np.uint64(0xFFFFFFFF)


def philox4x32(counter: np.ndarray, key: np.ndarray, rounds: int = 10) -> np.ndarray:
    """Random123's Philox4x32: counter uint32 [..., 4], key uint32 [..., 2]."""
    c = [np.asarray(counter, np.uint64)[..., i] for i in range(4)]
    k0 = np.asarray(key, np.uint64)[..., 0]
    k1 = np.asarray(key, np.uint64)[..., 1]
    for r in range(rounds):
        if r:
            k0 = (k0 + np.uint64(0x9E3779B9)) & M32
            k1 = (k1 + np.uint64(0xBB67AE85)) & M32
        p0 = c[0] * np.uint64(0xD2511F53)
        p1 = c[2] * np.uint64(0xCD9E8D57)
        c = [
            (p1 >> np.uint64(32)) ^ c[1] ^ k0,
            p1 & M32,
            (p0 >> np.uint64(32)) ^ c[3] ^ k1,
            p0 & M32,
        ]
    return np.stack(c, axis=-1).astype(np.uint32)


def dropout_words(seed: int, offset: int, idx: np.ndarray) -> np.ndarray:
    """Word r of every element index: block (offset, idx & ~3) under key seed, word idx & 3."""
    seed, offset = seed % 2**64, offset % 2**64
    idx = np.asarray(idx, np.uint64)
    group = idx & ~np.uint64(3)
    counter = np.stack(
        [
            np.full(idx.shape, offset & 0xFFFFFFFF, np.uint64),
            np.full(idx.shape, offset >> 32, np.uint64),
            group & M32,
            group >> np.uint64(32),
        ],
        axis=-1,
    )
    key = np.array([seed & 0xFFFFFFFF, seed >> 32], np.uint64)
    words = philox4x32(counter, key)
    return np.take_along_axis(words, (idx & np.uint64(3)).astype(np.int64)[..., None], -1)[..., 0]


def keep_mask(words: np.ndarray, p: float) -> np.ndarray:
    p = float(np.float32(p))
    if p == 0.0:
        return np.ones(words.shape, bool)
    return words.astype(np.float64) > 4294967295.0 * p


def mask_indices(
    shape: tuple, mask_shape: tuple, global_shape: tuple | None = None, start: tuple | None = None
) -> np.ndarray:
    """Global mask index of every element of the local mask (1 on shared axes)."""
    global_shape = tuple(shape) if global_shape is None else tuple(global_shape)
    start = (0,) * len(shape) if start is None else tuple(start)
    local = tuple(1 if m == 1 else n for n, m in zip(shape, mask_shape))
    if len(local) == 0 or 0 in local:
        return np.zeros(local, np.int64)
    coords = [
        np.zeros_like(c) if m == 1 else c + s
        for c, m, s in zip(np.indices(local, dtype=np.int64), mask_shape, start)
    ]
    return np.ravel_multi_index(coords, mask_shape)


def dropout(
    x: np.ndarray,
    p: float,
    seed: int,
    offset: int = 0,
    mask_shape: tuple | None = None,
    mode: str = "upscale_in_train",
    training: bool = True,
    shard: tuple | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(y, packed local mask). mask_shape is the whole tensor's mask shape."""
    global_shape, start = shard if shard is not None else (x.shape, None)
    mask_shape = tuple(global_shape) if mask_shape is None else tuple(mask_shape)
    p32 = float(np.float32(p))
    idx = mask_indices(x.shape, mask_shape, global_shape, start)
    if not training:
        keep = np.ones(idx.shape, bool)
    elif p32 == 1.0:
        keep = np.zeros(idx.shape, bool)
    else:
        keep = keep_mask(dropout_words(seed, offset, idx), p32)
    upscale = mode == "upscale_in_train"
    if not training:
        scale = 1.0 if upscale else 1.0 - p32
    else:
        scale = 1.0 / (1.0 - p32) if upscale and p32 < 1.0 else 1.0
    y = apply(x, np.broadcast_to(keep, x.shape), scale)
    return y, np.packbits(keep.reshape(-1), bitorder="little")


def apply(x: np.ndarray, keep: np.ndarray, scale: float) -> np.ndarray:
    """x * scale where kept, +0 elsewhere, multiplied in float32 (float64 for float64 data)
    and rounded once to x's dtype."""
    compute = np.float64 if x.dtype == np.float64 else np.float32
    if scale == 1.0:
        scaled = x
    else:
        with np.errstate(over="ignore"):  # float16 overflows to inf, as the kernel does
            scaled = (x.astype(compute) * compute(scale)).astype(x.dtype)
    return np.where(keep, scaled, np.zeros((), x.dtype)).astype(x.dtype)


def unpack_mask(packed: np.ndarray, shape: tuple) -> np.ndarray:
    n = int(np.prod(shape))
    return np.unpackbits(packed, bitorder="little", count=n).astype(bool).reshape(shape)


# GRU: written straight from the canonical semantics (docs/gru.md), one sentence and one
# step at a time, in float64. Gate columns are (update, reset, candidate) everywhere.

_FORMULAS = {
    # 0.5 * (1 + tanh(a / 2)) is exactly the logistic function, without exp overflowing.
    "sigmoid": lambda a: 0.5 * (1.0 + np.tanh(0.5 * a)),
    "tanh": np.tanh,
    "relu": lambda a: np.maximum(a, 0.0),
    "identity": lambda a: a,
}
# Keyed by the kernel's names, in its order: a name the kernel lacks fails here, at import.
GRU_ACTIVATIONS = {name: _FORMULAS[name] for name in ACTIVATIONS}
GRU_DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}
GRU_LAYOUTS = ("lod", "tnc", "ntc")


def _gru_stack(a: np.ndarray | None, ndim: int, shape: tuple[int, ...], name: str) -> np.ndarray:
    """A per-direction array with its leading D axis; None is zeros, a missing D axis is D = 1."""
    if a is None:
        return np.zeros(shape)
    a = np.asarray(a, np.float64)
    if a.ndim == ndim - 1:
        a = a[None]
    if a.shape != shape:
        raise ArgumentError(f"gru: {name} must have shape {shape}, got {a.shape}")
    return a


def gru_sentences(x: np.ndarray, layout: str, offsets: object, seq_lens: object) -> tuple:
    """(each sentence's rows of x, place): place(outputs, cols) puts per-sentence rows of cols
    columns back into the input's layout (padded positions zero). Offsets and lengths are
    checked as the kernels check them."""
    if layout == "lod":
        if offsets is None:
            raise ArgumentError("gru: layout 'lod' needs offsets")
        # The kernels' own checks: offsets that slice past x would be silently wrong here.
        offsets = as_offsets(offsets, "reference.gru", x.shape[0])
        sentences = [x[offsets[i] : offsets[i + 1]] for i in range(len(offsets) - 1)]
        hidden_shape = (x.shape[0],)
    else:
        t_max, n = x.shape[:2] if layout == "tnc" else x.shape[1::-1]
        lens = as_seq_lens(seq_lens, "reference.gru", n, t_max)
        seq_major = x if layout == "ntc" else x.transpose(1, 0, 2)
        sentences = [seq_major[i, : lens[i]] for i in range(n)]
        hidden_shape = x.shape[:2]

    def place(outputs: list[np.ndarray], cols: int) -> np.ndarray:
        hidden = np.zeros(hidden_shape + (cols,), x.dtype)
        for i, out in enumerate(outputs):
            if layout == "lod":
                hidden[offsets[i] : offsets[i + 1]] = out
            elif layout == "tnc":
                hidden[: len(out), i] = out
            else:
                hidden[i, : len(out)] = out
        return hidden

    return sentences, place


def gru(
    x: np.ndarray,
    wx: np.ndarray,
    wh: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    bias_h: np.ndarray | None = None,
    h0: np.ndarray | None = None,
    offsets: np.ndarray | None = None,
    seq_lens: np.ndarray | None = None,
    layout: str = "lod",
    direction: str = "forward",
    linear_before_reset: bool = False,
    origin_mode: bool = True,
    activation: str = "tanh",
    gate_activation: str = "sigmoid",
) -> tuple[np.ndarray, np.ndarray]:
    """(hidden, last) in float64. hidden has the input's layout with D*OC columns (forward
    first) and exact zeros at padded positions; last [D, N, OC] is each sentence's final state
    per direction (after its first word for reverse; h0 for an empty sentence)."""
    if layout not in GRU_LAYOUTS:
        raise ArgumentError(f"gru: layout must be one of {GRU_LAYOUTS}, got {layout!r}")
    if direction not in GRU_DIRECTIONS:
        raise ArgumentError(
            f"gru: direction must be one of {sorted(GRU_DIRECTIONS)}, got {direction!r}"
        )
    if activation not in GRU_ACTIVATIONS or gate_activation not in GRU_ACTIVATIONS:
        raise ArgumentError(
            f"gru: activations must be among {sorted(GRU_ACTIVATIONS)}, "
            f"got {activation!r} and {gate_activation!r}"
        )
    act, gate_act = GRU_ACTIVATIONS[activation], GRU_ACTIVATIONS[gate_activation]
    x = np.asarray(x, np.float64)
    reverses = GRU_DIRECTIONS[direction]
    dirs = len(reverses)

    sentences, place = gru_sentences(x, layout, offsets, seq_lens)
    n = len(sentences)
    ic = x.shape[-1]
    oc = np.shape(wh)[-2]

    wx = _gru_stack(wx, 3, (dirs, ic, 3 * oc), "wx")
    wh = _gru_stack(wh, 3, (dirs, oc, 3 * oc), "wh")
    bias = _gru_stack(bias, 2, (dirs, 3 * oc), "bias")
    bias_h = _gru_stack(bias_h, 2, (dirs, 3 * oc), "bias_h")
    h0 = _gru_stack(h0, 3, (dirs, n, oc), "h0")
    u, r, c = slice(0, oc), slice(oc, 2 * oc), slice(2 * oc, 3 * oc)

    outputs = [np.zeros((len(s), dirs * oc)) for s in sentences]
    last = np.zeros((dirs, n, oc))
    for d, reverse in enumerate(reverses):
        cols = slice(d * oc, (d + 1) * oc)
        for i, words in enumerate(sentences):
            g = words @ wx[d] + bias[d]
            h = h0[d, i]
            steps = range(len(words) - 1, -1, -1) if reverse else range(len(words))
            for t in steps:
                hw = h @ wh[d]
                update = gate_act(g[t, u] + hw[u] + bias_h[d, u])
                reset = gate_act(g[t, r] + hw[r] + bias_h[d, r])
                if linear_before_reset:
                    cand = act(g[t, c] + reset * (hw[c] + bias_h[d, c]))
                else:
                    cand = act(g[t, c] + (reset * h) @ wh[d][:, c] + bias_h[d, c])
                if origin_mode:
                    h = update * h + (1.0 - update) * cand
                else:
                    h = (1.0 - update) * h + update * cand
                outputs[i][t, cols] = h
            last[d, i] = h

    hidden = place(outputs, dirs * oc)
    return hidden, last


def crf_decoding(
    emission: np.ndarray,
    transition: np.ndarray,
    offsets: np.ndarray,
    label: np.ndarray | None = None,
) -> np.ndarray:
    """Viterbi path int64 [words, 1] of a linear-chain CRF in float64, one sentence at a time:
    alpha_0 = start + x_0, alpha_k[j] = max_i(alpha_{k-1}[i] + w[i, j]) + x_k[j], the last tag
    argmax(alpha + end), then back along the argmaxes; the first of equal maxima wins. With a
    label, 1 where the path equals it and 0 elsewhere."""
    x = np.asarray(emission, np.float64)
    trans = np.asarray(transition, np.float64)
    start, end, w = trans[0], trans[1], trans[2:]
    offsets = as_offsets(offsets, "reference.crf_decoding", x.shape[0])
    path = np.zeros((x.shape[0], 1), np.int64)
    for s in range(len(offsets) - 1):
        words = x[offsets[s] : offsets[s + 1]]
        if len(words) == 0:
            continue
        alpha, back = start + words[0], []
        for xk in words[1:]:
            scores = alpha[:, None] + w  # [from, to]
            back.append(np.argmax(scores, axis=0))
            alpha = scores.max(axis=0) + xk
        tags = [int(np.argmax(alpha + end))]
        for b in reversed(back):
            tags.append(int(b[tags[-1]]))
        path[offsets[s] : offsets[s + 1], 0] = tags[::-1]
    if label is not None:
        path = (path == np.asarray(label)).astype(np.int64)
    return path


def sequence_pool(
    x: np.ndarray, offsets: np.ndarray, pooltype: str, pad_value: float = 0.0
) -> np.ndarray:
    """Each sentence of LoD x [words, ...] pooled into one row of [N, ...] in float64:
    SUM, AVERAGE, SQRT (sum / sqrt(length)), MAX, LAST or FIRST; pad_value for an empty one."""
    x = np.asarray(x, np.float64)
    offsets = as_offsets(offsets, "reference.sequence_pool", x.shape[0])
    pool = {
        "SUM": lambda s: s.sum(axis=0),
        "AVERAGE": lambda s: s.sum(axis=0) / len(s),
        "SQRT": lambda s: s.sum(axis=0) / np.sqrt(len(s)),
        "MAX": lambda s: s.max(axis=0),
        "LAST": lambda s: s[-1],
        "FIRST": lambda s: s[0],
    }[pooltype.upper()]
    out = np.full((len(offsets) - 1,) + x.shape[1:], float(pad_value))
    for i in range(len(offsets) - 1):
        rows = x[offsets[i] : offsets[i + 1]]
        if len(rows):
            out[i] = pool(rows)
    return out


def lod_to_padded(
    x: np.ndarray, offsets: np.ndarray, layout: str = "tnc"
) -> tuple[np.ndarray, np.ndarray]:
    """(padded, seq_lens): sentence i's rows copied one by one to steps 0.. of column i."""
    x = np.asarray(x)
    offsets = as_offsets(offsets, "reference.lod_to_padded", x.shape[0])
    lens = offsets[1:] - offsets[:-1]
    n, t = len(lens), int(lens.max(initial=0))
    padded = np.zeros((n, t) + x.shape[1:], x.dtype)
    for i in range(n):
        for step in range(lens[i]):
            padded[i, step] = x[offsets[i] + step]
    return (padded if layout == "ntc" else padded.swapaxes(0, 1).copy()), lens


def padded_to_lod(padded: np.ndarray, offsets: np.ndarray, layout: str = "tnc") -> np.ndarray:
    """The rows of each sentence's real steps, sentence after sentence."""
    padded = np.asarray(padded)
    seq_major = padded if layout == "ntc" else padded.swapaxes(0, 1)
    # The offsets' end is the number of rows they make; each sentence fits in the padded steps.
    op = "reference.padded_to_lod"
    ends = np.asarray(offsets)
    offsets = as_offsets(offsets, op, int(ends[-1]) if ends.ndim == 1 and ends.size else 0)
    as_seq_lens(np.diff(offsets), op, seq_major.shape[0], seq_major.shape[1])
    rows = [
        seq_major[i, step]
        for i in range(len(offsets) - 1)
        for step in range(offsets[i + 1] - offsets[i])
    ]
    return np.array(rows, padded.dtype).reshape((int(offsets[-1]),) + padded.shape[2:])
