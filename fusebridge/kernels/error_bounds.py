"""How far a float32 result may lie from the exact one: error bounds that follow from the
arithmetic, for the tests (and the GPU check) that compare us with another library (Paddle,
MXNet, ONNX Runtime, torch, our cuda engine), which picks other kernels, other summation orders
and other activation routines, and picks them by CPU (AVX512-FP16, AMX and VNNI machines run
other code paths than this one).

- A sum of k products: |fl - exact| <= gamma_k * sum |a_i b_i|, gamma_k = k u / (1 - k u),
  u = 2^-24 (Higham, Accuracy and Stability of Numerical Algorithms, 3.1), in any order.
- A recurrence (GRU, LSTM): running error analysis (Higham 3.3, Wilkinson): the reference
  formula is evaluated in float64 beside a bound e on each value's error, step by step. A
  step's products and sums add their gamma terms; an activation adds its library's own error
  and passes on the error of its argument through its slope (the largest over the argument's
  error interval); the state carries its bound to the next step. So the bound grows with the
  steps and with the recurrence's growth (an identity-gated LSTM reaches 1e23 in 7 steps, and
  its error bound with it), where a fixed rtol fails on one CPU and passes on another.
  First-order: the products of two error terms are dropped (they are below u^2).

Two implementations each within their bound of the exact result differ by at most the sum of
the two bounds; `assert_within` checks that, element by element."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Sequence

import numpy as np

U = 2.0**-24  # float32's unit roundoff


def gamma(k: int, u: float = U) -> float:
    """gamma_k = k u / (1 - k u): the bound of k roundings (u: float64's 2^-53 for doubles)."""
    return k * u / (1 - k * u)


def unit(dtype) -> float:
    """The unit roundoff of a float dtype."""
    return float(np.finfo(dtype).eps) / 2


def gemm_error_bound(abs_product: np.ndarray, k: int, extra_terms: int = 0) -> np.ndarray:
    """The bound of a float32 matrix product: abs_product is |a| @ |b| in float64 (plus |bias|
    for a fused bias: extra_terms = 1 more addition)."""
    return gamma(k + extra_terms) * abs_product


@dataclasses.dataclass(frozen=True)
class Activations:
    """How one library computes sigmoid and tanh: within rel * |f(z)| + abs of the exact value
    (relu and identity are exact); Paddle's CPU kernels clamp sigmoid's argument first."""

    name: str
    rel: float
    abs: float
    sigmoid_clamp: tuple[float, float] | None = None


# Ours: within 1.4e-7 relative of float64 (docs/gru.md), 4 u after the final rounding.
FUSEBRIDGE = Activations("fusebridge", 4 * U, 0.0)
# The cuda engine: CUDA's expf and tanhf are within 2 ulp (CUDA C++ Programming Guide, "Mathematical
# Functions"), the CPU emulation's glibc within 1; sigmoid = 1 / (1 + exp(-z)) adds two roundings.
CUDA = Activations("cuda", 8 * U, 0.0)
# Vectorized exp / tanh approximations (Eigen's, MLAS's, MKL's in their fast modes) stay within
# a few units in the last place; tanh computed as 2 / (1 + exp(-2z)) - 1 loses its relative
# accuracy near 0 to the cancellation, to about u absolute. 16 u and 4 u hold for all of them.
LIBRARY = dict(rel=16 * U, abs=4 * U)
ONNXRUNTIME = Activations("onnxruntime", **LIBRARY)
TORCH = Activations("torch", **LIBRARY)
MXNET = Activations("mxnet", **LIBRARY)
# Paddle's CPU gru and lstm kernels (phi/kernels/funcs/detail/activation_functions.h) clamp
# sigmoid's argument to [-40, 13]: sigmoid(20) comes out as sigmoid(13), 2.3e-6 below 1.
PADDLE = Activations("paddle", **LIBRARY, sigmoid_clamp=(-40.0, 13.0))


def _slope(kind: str, z: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The largest |f'| over [z - e, z + e] (each f' here peaks at 0 and falls off with |z|)."""
    nearest = np.where(np.abs(z) <= e, 0.0, np.abs(z) - e)  # the point closest to 0
    if kind in ("sigmoid", "tanh"):
        s = 1 / (1 + np.exp(-nearest))
        return s * (1 - s) if kind == "sigmoid" else 1 - np.tanh(nearest) ** 2
    if kind == "erf":
        return 2 / np.sqrt(np.pi) * np.exp(-(nearest**2))
    if kind == "relu":
        return (z + e > 0).astype(np.float64)
    return np.ones_like(z)


def activate(
    kind: str, z: np.ndarray, e: np.ndarray, lib: Activations
) -> tuple[np.ndarray, np.ndarray]:
    """(f(z), the bound of its error) for an argument z (float64) known within e."""
    f = {
        "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
        "tanh": np.tanh,
        "erf": np.vectorize(math.erf, otypes=[np.float64]),
        "relu": lambda v: np.maximum(v, 0.0),
        "identity": lambda v: v,
    }[kind]
    value = f(z)
    bound = _slope(kind, z, e) * e
    if kind in ("sigmoid", "tanh", "erf"):
        bound = bound + lib.rel * np.abs(value) + lib.abs
    if kind == "sigmoid" and lib.sigmoid_clamp is not None:
        low, high = lib.sigmoid_clamp
        bound = bound + np.where(z + e > high, f(z + e) - f(high), 0.0)
        bound = bound + np.where(z - e < low, f(low) - f(z - e), 0.0)
    return value, bound


def _product(a: np.ndarray, ea: np.ndarray, b: np.ndarray, eb: np.ndarray):
    """a * b and its bound: the operands' errors, and the product's rounding."""
    value = a * b
    return value, np.abs(a) * eb + np.abs(b) * ea + U * np.abs(value)


def _sum(terms: Sequence[tuple[np.ndarray, np.ndarray]]):
    """The sum of (value, bound) terms, rounded in any order."""
    value = sum(v for v, _ in terms)
    bound = sum(e for _, e in terms) + gamma(len(terms) - 1) * sum(np.abs(v) for v, _ in terms)
    return value, bound


def _matvec(h: np.ndarray, eh: np.ndarray, w: np.ndarray):
    """h @ w (h [H], w [H, M]) and its bound: h's error through |w|, and the sum's rounding."""
    return h @ w, eh @ np.abs(w) + gamma(w.shape[0]) * (np.abs(h) @ np.abs(w))


def _propagate(step, states: np.ndarray, inputs: np.ndarray, input_bounds: np.ndarray):
    """Runs step(state, state_error, x, x_error) -> (next state, its bound) over the steps of S
    sequences at once (states [S, n], inputs [S, T, m]); returns the states [S, T, n] and their
    error bounds. The error committed at step s (its rounding and its input's error: step's
    bound from an exact state) reaches step t through the exact Jacobians of the steps between,
    and is bounded by the absolute value of their product as a whole, |J_t ... J_s+1| rho_s.
    (The product of their absolute values compounds by the norm of |Wh| at every step where the
    recurrence itself contracts: an abs-valued bound of 20 GRU steps came out 1e4 times too
    large.) The Jacobians are central differences of the float64 step."""
    count, n = states.shape
    eye = np.broadcast_to(np.eye(n), (count, 1, n, n))
    products = np.zeros((count, 0, n, n))  # J_t ... J_s+1 for each step s so far
    locals_ = np.zeros((count, 0, n))  # rho_s
    values, bounds = [], []
    for x, ex in zip(inputs.transpose(1, 0, 2), input_bounds.transpose(1, 0, 2)):
        new, local = step(states, np.zeros_like(states), x, ex)
        eps = 1e-6 * np.maximum(1.0, np.abs(states))  # [S, n]
        shift = eps[:, :, None] * np.eye(n)  # [S, n (probe), n]
        probes = np.concatenate([states[:, None] + shift, states[:, None] - shift], 1)
        repeat = lambda a: np.repeat(a, 2 * n, axis=0)  # noqa: E731
        moved = step(probes.reshape(-1, n), np.zeros((2 * n * count, n)), repeat(x), repeat(ex))[0]
        moved = moved.reshape(count, 2 * n, n)
        jac = ((moved[:, :n] - moved[:, n:]) / (2 * eps)[:, :, None]).transpose(0, 2, 1)
        products = np.concatenate([jac[:, None] @ products, eye], 1)
        locals_ = np.concatenate([locals_, local[:, None]], 1)
        values.append(new)
        bounds.append(np.einsum("ksij,ksj->ki", np.abs(products), locals_))
        states = new
    return np.stack(values, 1), np.stack(bounds, 1)


def _run(step, starts: list[np.ndarray], lengths, reverse: bool, gx, egx, width: int):
    """The outputs [words, width] and bounds of sentences one after the other (their projected
    inputs gx [words, m], bounds egx), each from its start state; a step's output is the first
    `width` entries of its state. Sentences of one length run together."""
    out, err = np.zeros((len(gx), width)), np.zeros((len(gx), width))
    begins = np.concatenate([[0], np.cumsum(lengths)])
    for length in sorted(set(lengths) - {0}):
        which = [i for i, m in enumerate(lengths) if m == length]
        rows = begins[which][:, None] + np.arange(length)[None]  # [S, T] in step order
        rows = rows[:, ::-1] if reverse else rows
        values, bounds = _propagate(step, np.stack([starts[i] for i in which]), gx[rows], egx[rows])
        out[rows], err[rows] = values[..., :width], bounds[..., :width]
    return out, err


def _projected(x, wx, bias, x_error, width):
    """x @ wx + bias (x itself when wx is None) and its bound."""
    x = np.asarray(x, np.float64)
    bias = np.zeros(width) if bias is None else np.asarray(bias, np.float64).reshape(width)
    ex = np.zeros_like(x) if x_error is None else np.asarray(x_error, np.float64)
    if wx is None:
        return _sum([(x, ex), (bias, 0 * bias)])
    wx = np.asarray(wx, np.float64)
    bound = ex @ np.abs(wx) + gamma(wx.shape[0] + 1) * (np.abs(x) @ np.abs(wx) + np.abs(bias))
    return x @ wx + bias, bound


def _starts(h0, n: int, width: int) -> list[np.ndarray]:
    return [np.zeros(width) if h0 is None else np.asarray(h0[k], np.float64) for k in range(n)]


def gru_bound(
    x: np.ndarray,
    wx: np.ndarray | None,
    wh: np.ndarray,
    bias: np.ndarray | None = None,
    *,
    bias_h: np.ndarray | None = None,
    h0: np.ndarray | None = None,
    lengths: Sequence[int],
    reverse: bool = False,
    linear_before_reset: bool = False,
    origin_mode: bool = True,
    activation: str = "tanh",
    gate_activation: str = "sigmoid",
    lib: Activations = FUSEBRIDGE,
    x_error: np.ndarray | None = None,
    clip: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(hidden in float64, the bound of its error) of one direction of a GRU over LoD input x
    [words, IC] (sentences of `lengths`, one after the other), canonical weights wx [IC, 3H]
    (None: x is the projected [words, 3H]), wh [H, 3H], gates (update, reset, candidate).
    x_error: a bound on x's own error (a projection computed before, say). clip: ONNX's, of
    every activation's argument to [-clip, clip] (a clamp moves no value further away)."""
    limit = np.inf if clip is None else clip
    wh = np.asarray(wh, np.float64)
    h = wh.shape[0]
    bias_h = np.zeros(3 * h) if bias_h is None else np.asarray(bias_h, np.float64).reshape(3 * h)
    gx, egx = _projected(x, wx, bias, x_error, 3 * h)
    u_, r_, c_ = (slice(k * h, (k + 1) * h) for k in range(3))

    def step(state, e_state, g, eg):
        hw, ehw = _matvec(state, e_state, wh)
        gates = []
        for s in (u_, r_):
            z, ez = _sum([(g[..., s], eg[..., s]), (hw[..., s], ehw[..., s]), (bias_h[s], 0)])
            gates.append(activate(gate_activation, np.clip(z, -limit, limit), ez, lib))
        (u, eu), (r, er) = gates
        if linear_before_reset:
            inner = _sum([(hw[..., c_], ehw[..., c_]), (bias_h[c_], 0)])
            z, ez = _sum([(g[..., c_], eg[..., c_]), _product(r, er, *inner)])
        else:
            rh, erh = _product(r, er, state, e_state)
            p, ep = _matvec(rh, erh, wh[:, c_])
            z, ez = _sum([(g[..., c_], eg[..., c_]), (p, ep), (bias_h[c_], 0)])
        c, ec = activate(activation, np.clip(z, -limit, limit), ez, lib)
        keep, take = ((u, eu), (1 - u, eu + U * np.abs(1 - u)))[:: 1 if origin_mode else -1]
        return _sum([_product(*keep, state, e_state), _product(*take, c, ec)])

    return _run(step, _starts(h0, len(lengths), h), lengths, reverse, gx, egx, h)


def lstm_bound(
    x: np.ndarray,
    weight: np.ndarray,
    bias: np.ndarray,
    h0: np.ndarray | None = None,
    c0: np.ndarray | None = None,
    *,
    lengths: Sequence[int],
    use_peepholes: bool = True,
    reverse: bool = False,
    gate_activation: str = "sigmoid",
    cell_activation: str = "tanh",
    candidate_activation: str = "tanh",
    lib: Activations = FUSEBRIDGE,
    x_error: np.ndarray | None = None,
    with_cell: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """(hidden in float64, the bound of its error) of Paddle's lstm op (tests/
    paddle_lstm_models.reference_lstm's formula): x [words, 4H] the projected gates (c, i, f,
    o), weight [H, 4H], bias [1, 4H] or [1, 7H] with the peepholes W_ic, W_fc, W_oc. The
    state the steps carry is (h, c): with_cell, all of it, [words, 2H] (h, then c)."""
    weight = np.asarray(weight, np.float64)
    h = weight.shape[0]
    bias = np.asarray(bias, np.float64).reshape(-1)
    peep = np.split(bias[4 * h :], 3) if use_peepholes else [0.0] * 3
    gx, egx = _projected(x, None, bias[: 4 * h], x_error, 4 * h)

    def step(state, e_state, g, eg):
        hp, cp, ehp, ecp = state[..., :h], state[..., h:], e_state[..., :h], e_state[..., h:]
        hw, ehw = _matvec(hp, ehp, weight)
        pre, epre = _sum([(g, eg), (hw, ehw)])
        (gc, egc), (gi, egi), (gf, egf), (go, ego) = zip(
            np.split(pre, 4, axis=-1), np.split(epre, 4, axis=-1)
        )

        def gate(g, eg, w, cell, ecell):
            z, ez = _sum([(g, eg), _product(w, 0, cell, ecell)]) if use_peepholes else (g, eg)
            return activate(gate_activation, z, ez, lib)

        i, ei = gate(gi, egi, peep[0], cp, ecp)
        f, ef = gate(gf, egf, peep[1], cp, ecp)
        cand, ecand = activate(candidate_activation, gc, egc, lib)
        c, ec = _sum([_product(f, ef, cp, ecp), _product(i, ei, cand, ecand)])
        o, eo = gate(go, ego, peep[2], c, ec)
        hn, ehn = _product(o, eo, *activate(cell_activation, c, ec, lib))
        return np.concatenate([hn, c], -1), np.concatenate([ehn, ec], -1)

    starts = [
        np.concatenate([a, b])
        for a, b in zip(_starts(h0, len(lengths), h), _starts(c0, len(lengths), h))
    ]
    return _run(step, starts, lengths, reverse, gx, egx, 2 * h if with_cell else h)


def rnn_bound(
    x: np.ndarray,
    wx: np.ndarray,
    wh: np.ndarray,
    bias: np.ndarray,
    *,
    h0: np.ndarray | None = None,
    lengths: Sequence[int],
    reverse: bool = False,
    activation: str = "tanh",
    lib: Activations = FUSEBRIDGE,
    x_error: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(hidden, its bound) of sequences x [words, I] (one after the other) through
    h = f(x W + h R + b), wx [I, H], wh [H, H], bias [H] (ONNX's two biases summed)."""
    wh = np.asarray(wh, np.float64)
    gx, egx = _projected(x, wx, bias, x_error, wh.shape[0])

    def step(state, e_state, g, eg):
        z, ez = _sum([(g, eg), _matvec(state, e_state, wh)])
        return activate(activation, z, ez, lib)

    starts = _starts(h0, len(lengths), wh.shape[0])
    return _run(step, starts, lengths, reverse, gx, egx, wh.shape[0])


def pool_bound(
    x: np.ndarray, offsets: Sequence[int], pooltype: str, ex=None, u: float | None = None
) -> np.ndarray:
    """The bound of sequence_pool's rows [N, C] over LoD x [words, C] (known within ex), computed
    with unit roundoff u (x's precision when None): a sum of a sentence's n rows (and AVERAGE's
    or SQRT's scale) rounds by gamma_{n+2}; MAX, LAST and FIRST pick one element, whose own
    error they keep; an empty sentence is its pad value."""
    if u is None:
        u = unit(x.dtype) if np.asarray(x).dtype.kind == "f" else U
    x = np.abs(np.asarray(x, np.float64))
    ex = np.zeros_like(x) if ex is None else np.asarray(ex, np.float64)
    rows = []
    for s, t in itertools.pairwise(offsets):
        n = int(t - s)
        if n == 0:
            rows.append(np.zeros(x.shape[1:]))
        elif pooltype in ("MAX", "LAST", "FIRST"):
            pick = {"LAST": t - 1, "FIRST": s}.get(pooltype)
            rows.append(ex[s:t].max(axis=0) if pick is None else ex[pick])
        else:
            scale = {"SUM": 1.0, "AVERAGE": 1.0 / n, "SQRT": 1.0 / np.sqrt(n)}[pooltype]
            rows.append(scale * (ex[s:t].sum(axis=0) + gamma(n + 2, u) * x[s:t].sum(axis=0)))
    return np.array(rows).reshape(len(offsets) - 1, *x.shape[1:])


def viterbi_margin(emission: np.ndarray, transition: np.ndarray, offsets) -> np.ndarray:
    """Per sentence: the best path's score less the second best's (2-best Viterbi in float64;
    inf for a sentence of one path or none), over Paddle's transition [tags + 2, tags] (start,
    end, then from -> to)."""
    x, trans = np.asarray(emission, np.float64), np.asarray(transition, np.float64)
    start, end, w = trans[0], trans[1], trans[2:]
    margins = []
    for s, t in itertools.pairwise(offsets):
        if t - s == 0:
            margins.append(np.inf)
            continue
        best = np.stack([start + x[s], np.full(len(start), -np.inf)])  # [2, tags] per tag
        for xk in x[s + 1 : t]:
            # every (rank, from) continuation into each tag: keep the two highest
            cand = (best[:, :, None] + w[None]).reshape(-1, w.shape[1])
            best = -np.sort(-cand, axis=0)[:2] + xk
        final = np.sort((best + end).reshape(-1))[::-1]
        margins.append(final[0] - final[1] if np.isfinite(final[1]) else np.inf)
    return np.array(margins)


def path_score_bound(emission, transition, offsets, emission_error) -> np.ndarray:
    """Per sentence: a bound on the error of any path's float32 score (its 2L + 1 terms summed,
    and the emissions' own errors along it)."""
    x, trans = np.abs(np.asarray(emission, np.float64)), np.abs(np.asarray(transition))
    ex = np.asarray(emission_error, np.float64)
    bounds = []
    for s, t in itertools.pairwise(offsets):
        n = int(t - s)
        if n == 0:
            bounds.append(0.0)
            continue
        terms = trans[0].max() + trans[1].max() + (n - 1) * trans[2:].max() + x[s:t].max(1).sum()
        bounds.append(gamma(2 * n + 1) * terms + ex[s:t].max(1).sum())
    return np.array(bounds)


def softmax_sum_bound(n: int, lib: Activations) -> float:
    """How far the float32 sum of n softmax probabilities may lie from 1: each probability
    within its exp's error (twice: the numerator and inside the sum), the normalizing sum's and
    the division's rounding; then the n probabilities' own sum."""
    return 2 * lib.rel + gamma(n) + 2 * U + gamma(n - 1) + n * lib.abs


def softmax_backward_bound(y, g, axis: int, lib: Activations) -> np.ndarray:
    """The bound of one implementation's dx = y (g - sum(g y)) along `axis` (softmax's
    gradient, g carrying one rounding: a dropout's scale): y's own error (its exp's and its
    sum's), g's, and the backward's products and sum of n terms."""
    y, g = np.abs(np.asarray(y, np.float64)), np.abs(np.asarray(g, np.float64))
    n = y.shape[axis]
    ey = (2 * lib.rel + gamma(n) + 2 * U) * y + lib.abs
    eg = U * g
    total = lambda a: a.sum(axis=axis, keepdims=True)  # noqa: E731
    through = ey * (g + total(g * y)) + y * (eg + total(g * ey + y * eg))
    return through + gamma(n + 3) * y * (g + total(g * y))


def assert_within(
    got: np.ndarray, want: np.ndarray, bound: np.ndarray | None, where: str = ""
) -> None:
    """|got - want| <= bound everywhere (NaN nowhere), naming the worst element; a bound of
    None (an exact output: integers, indices) asks for equality."""
    bound = 0.0 if bound is None else bound
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    want = np.broadcast_to(want, got.shape) if want.ndim == 0 else want  # a value for all
    assert got.shape == want.shape, f"{where}: shapes {got.shape} and {want.shape}"
    excess = np.abs(got - want) - np.broadcast_to(bound, got.shape)
    if not np.all(excess <= 0):
        k = np.unravel_index(int(np.nanargmax(np.nan_to_num(excess, nan=np.inf))), got.shape)
        raise AssertionError(
            f"{where}: |{got[k]:.9g} - {want[k]:.9g}| = {abs(got[k] - want[k]):.3g} at "
            f"{list(k)} exceeds its bound {np.broadcast_to(bound, got.shape)[k]:.3g}"
        )


def fraction_of_bound(got: np.ndarray, want: np.ndarray, bound: np.ndarray) -> float:
    """max |got - want| / bound: how much of its bound a comparison used (0 for no elements)."""
    diff = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    return float(np.max(diff / np.maximum(bound, 1e-300), initial=0.0))


def padded_gru_bound(
    x: np.ndarray,
    wx: np.ndarray,
    wh: np.ndarray,
    bias: np.ndarray | None,
    *,
    bias_h: np.ndarray | None = None,
    h0: np.ndarray | None = None,
    seq_lens: Sequence[int],
    direction: str = "forward",
    lib: Activations = FUSEBRIDGE,
    **attrs,
) -> tuple[np.ndarray, np.ndarray]:
    """The error bounds of a GRU over padded x [T, N, IC] (canonical weights [D, ...] as
    kernels.fusion_gru takes them): (of hidden [T, N, D*H], 0 at padding; of last [D, N, H],
    0 for an empty sentence, whose state is its h0)."""
    t_max, n = x.shape[:2]
    reverses = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[direction]
    d, h = len(reverses), np.shape(wh)[-2]
    hidden, last = np.zeros((t_max, n, d * h)), np.zeros((d, n, h))

    for k, reverse in enumerate(reverses):
        for i, length in enumerate(seq_lens):
            if not length:
                continue
            _, e = gru_bound(
                x[:length, i],
                np.reshape(wx, (d, -1, 3 * h))[k],
                np.reshape(wh, (d, h, 3 * h))[k],
                None if bias is None else np.reshape(bias, (d, 3 * h))[k],
                bias_h=None if bias_h is None else np.reshape(bias_h, (d, 3 * h))[k],
                h0=None if h0 is None else np.reshape(h0, (d, n, h))[k, i : i + 1],
                lengths=[length],
                reverse=reverse,
                lib=lib,
                **attrs,
            )
            hidden[:length, i, k * h : (k + 1) * h] = e
            last[k, i] = e[0 if reverse else length - 1]
    return hidden, last
