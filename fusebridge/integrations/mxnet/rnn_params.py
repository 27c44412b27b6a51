"""MXNet's RNN(mode='gru') parameter packing to the canonical GRU weights (docs/gru.md): gate
order (update, reset, candidate), Wx [D, IC, 3*OC], Wh [D, OC, 3*OC] plain row-major, bias and
bias_h [D, 3*OC]. Every result is a NEW array. MXNet's blocks are read here; the reordering and
the layouts are the recurrence toolkit's (ops/recurrence.py)."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels.arguments import as_float_array, as_int
from fusebridge.ops.recurrence import GRU_RZN, LayerWeights


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
    """MXNet RNN(mode='gru') flat parameter vector -> [(wx, wh, bias, bias_h)] per layer
    (FusionGRU's inputs); mxnet_gru_params gives the toolkit's LayerWeights."""
    sizes = (input_size, hidden_size, num_layers, bidirectional)
    layers = _gru_layers(params, *sizes, "mxnet_rnn_params_to_canonical")
    return [layer.fusion_gru() for layer in layers]


def mxnet_gru_params(
    params: np.ndarray,
    *,
    input_size: int,
    hidden_size: int,
    num_layers: int = 1,
    bidirectional: bool = False,
) -> list[LayerWeights]:
    """MXNet RNN(mode='gru') flat parameter vector -> the layers' canonical weights."""
    sizes = (input_size, hidden_size, num_layers, bidirectional)
    return _gru_layers(params, *sizes, "mxnet_gru_params")


def _gru_layers(
    params: np.ndarray, input_size, hidden_size, num_layers, bidirectional, op: str
) -> list[LayerWeights]:
    """The layers of the flat vector (`op`: the function called, for messages).

    MXNet 1.9.1's layout: all weights, then all biases; per layer, per
    direction (forward, backward): W_i2h [3H, I_l] then W_h2h [3H, H] row-major, and b_i2h [3H],
    b_h2h [3H] in the same order; gate rows (r, z, n); I_0 = input_size, I_l = D*H after.
    MXNet's recurrence is the canonical one with linear_before_reset=True and origin_mode=True
    (h' = (1 - z) * n + z * h), z being our update gate and n our candidate."""
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

    def take(start: int, shape: tuple[int, ...]) -> np.ndarray:
        return params[start : start + int(np.prod(shape))].reshape(shape)

    result = []
    w_at, b_at = 0, n_weights  # where the next weight and the next bias start
    for i in inputs:
        blocks = []
        for _ in range(dirs):
            w_ih, w_hh = take(w_at, (3 * h, i)), take(w_at + 3 * h * i, (3 * h, h))
            w_at += 3 * h * (i + h)
            blocks.append((w_ih, w_hh, take(b_at, (3 * h,)), take(b_at + 3 * h, (3 * h,))))
            b_at += 6 * h
        result.append(LayerWeights.from_blocks(blocks, GRU_RZN))
    return result
