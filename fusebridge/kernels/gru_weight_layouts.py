"""Framework GRU weight layouts to the canonical one (docs/gru.md) and back: gate order
(update, reset, candidate), Wx [D, IC, 3*OC], Wh [D, OC, 3*OC] plain row-major, bias and bias_h
[D, 3*OC]. Every function returns NEW arrays: a weight may be shared by other nodes, so it is
never changed in place."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels.arguments import as_float_array, as_int, contiguous, new_array


def _square_gates(a: object, op: str, name: str) -> tuple[np.ndarray, int]:
    arr = as_float_array(a, op, name)
    if arr.ndim != 2 or arr.shape[1] != 3 * arr.shape[0]:
        raise ArgumentError(f"{op}: {name} must have shape [OC, 3*OC], got {arr.shape}")
    return arr, arr.shape[0]


def paddle_weight_h_to_canonical(weight_h: np.ndarray) -> np.ndarray:
    """Paddle gru/fusion_gru Weight(H) -> plain [OC, 3*OC].

    The Paddle variable says [OC, 3*OC] but its memory is a row-major [OC, 2*OC] block (update,
    reset) followed by a row-major [OC, OC] block (candidate): reading it as one [OC, 3*OC]
    matrix mixes gates from different rows."""
    flat_w, oc = _square_gates(weight_h, "paddle_weight_h_to_canonical", "weight_h")
    flat = flat_w.reshape(-1)
    wh = new_array((oc, 3 * oc), flat.dtype, "paddle_weight_h_to_canonical", "wh")
    wh[:, : 2 * oc] = flat[: 2 * oc * oc].reshape(oc, 2 * oc)
    wh[:, 2 * oc :] = flat[2 * oc * oc :].reshape(oc, oc)
    return wh


def canonical_to_paddle_weight_h(wh: np.ndarray) -> np.ndarray:
    """Plain [OC, 3*OC] -> Paddle's Weight(H) memory, shaped [OC, 3*OC] as Paddle declares it;
    the inverse of paddle_weight_h_to_canonical."""
    op = "canonical_to_paddle_weight_h"
    wh, oc = _square_gates(wh, op, "wh")
    out = new_array((oc, 3 * oc), wh.dtype, op, "weight_h")
    flat = out.reshape(-1)
    flat[: 2 * oc * oc] = wh[:, : 2 * oc].reshape(-1)
    flat[2 * oc * oc :] = wh[:, 2 * oc :].reshape(-1)
    return out


def _positive(value: object, op: str, name: str) -> int:
    v = as_int(value, op, name)
    if v < 1:
        raise ArgumentError(f"{op}: {name} must be at least 1, got {v}")
    return v


def mxnet_rnn_params_to_canonical(
    params: np.ndarray,
    *,
    input_size: int,
    hidden_size: int,
    num_layers: int = 1,
    bidirectional: bool = False,
) -> list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]:
    """MXNet RNN(mode='gru') flat parameter vector -> [(wx, wh, bias, bias_h)] per layer.

    MXNet 1.9.1's layout: all weights, then all biases; per layer, per
    direction (forward, backward): W_i2h [3H, I_l] then W_h2h [3H, H] row-major, and b_i2h [3H],
    b_h2h [3H] in the same order; gate rows (r, z, n); I_0 = input_size, I_l = D*H after.
    MXNet's recurrence is the canonical one with linear_before_reset=True and origin_mode=True
    (h' = (1 - z) * n + z * h), z being our update gate and n our candidate."""
    op = "mxnet_rnn_params_to_canonical"
    params = as_float_array(params, op, "params")
    ic = _positive(input_size, op, "input_size")
    h = _positive(hidden_size, op, "hidden_size")
    layers = _positive(num_layers, op, "num_layers")
    dirs = 2 if bidirectional else 1
    inputs = [ic] + [dirs * h] * (layers - 1)
    n_weights = sum(dirs * 3 * h * (i + h) for i in inputs)
    expected = n_weights + layers * dirs * 6 * h
    if params.ndim != 1 or params.size != expected:
        raise ArgumentError(
            f"{op}: params must be a 1-D vector of {expected} values for {layers} layer(s), "
            f"{'bidirectional' if bidirectional else 'one direction'}, input_size {ic}, "
            f"hidden_size {h}, got shape {params.shape}"
        )
    # Rows (r, z, n) -> columns (u = z, r, c = n).
    gates = np.concatenate([np.arange(h, 2 * h), np.arange(h), np.arange(2 * h, 3 * h)])

    def block(start: int, shape: tuple[int, ...]) -> np.ndarray:
        return params[start : start + int(np.prod(shape))].reshape(shape)[gates]

    result = []
    w_at, b_at = 0, n_weights  # where the next weight and the next bias start
    for i in inputs:
        wx = new_array((dirs, i, 3 * h), params.dtype, op, "wx")
        wh = new_array((dirs, h, 3 * h), params.dtype, op, "wh")
        bias = new_array((dirs, 3 * h), params.dtype, op, "bias")
        bias_h = new_array((dirs, 3 * h), params.dtype, op, "bias_h")
        for d in range(dirs):
            wx[d] = block(w_at, (3 * h, i)).T
            w_at += 3 * h * i
            wh[d] = block(w_at, (3 * h, h)).T
            w_at += 3 * h * h
            bias[d] = block(b_at, (3 * h,))
            bias_h[d] = block(b_at + 3 * h, (3 * h,))
            b_at += 6 * h
        result.append((wx, wh, bias, bias_h))
    return result


def negate_update_gate(
    wx: np.ndarray,
    wh: np.ndarray,
    bias: np.ndarray | None = None,
    bias_h: np.ndarray | None = None,
    *,
    gate_activation: str = "sigmoid",
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """(wx, wh, bias, bias_h) as new arrays with the update-gate columns (the first OC of each
    3*OC) negated; None stays None. With a sigmoid gate, sigmoid(-a) = 1 - sigmoid(a) turns
    origin_mode=False into origin_mode=True on these weights; other gates have no such
    identity, so they are refused."""
    op = "negate_update_gate"
    if gate_activation != "sigmoid":
        raise ArgumentError(
            f"{op}: gate_activation must be 'sigmoid' (sigmoid(-a) = 1 - sigmoid(a)), got "
            f"{gate_activation!r}: keep origin_mode=False for this gate instead"
        )
    wh = as_float_array(wh, op, "wh")
    if wh.ndim not in (2, 3) or wh.shape[-1] != 3 * wh.shape[-2]:
        raise ArgumentError(f"{op}: wh must have shape [D, OC, 3*OC] or [OC, 3*OC], got {wh.shape}")
    oc = wh.shape[-2]

    def negated(a: np.ndarray | None, name: str) -> np.ndarray | None:
        if a is None:
            return None
        # A copy: the caller's array stays as it was.
        a = contiguous(as_float_array(a, op, name), op, name, copy=True)
        if a.ndim == 0 or a.shape[-1] != 3 * oc:
            raise ArgumentError(
                f"{op}: {name} must have 3*OC = {3 * oc} columns (OC from wh), got {a.shape}"
            )
        a[..., :oc] *= -1
        return a

    return negated(wx, "wx"), negated(wh, "wh"), negated(bias, "bias"), negated(bias_h, "bias_h")
