"""origin_mode=False GRU weights turned into origin_mode=True ones (docs/gru.md): the fuse pass
canonical_update_gate and the portable ONNX lowering both use it. New arrays: a weight may be
shared by other nodes, so it is never changed in place."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels.arguments import as_float_array, contiguous


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
