"""Paddle's GRU weight layout to the canonical one (docs/gru.md): gate order (update, reset,
candidate), Wh [OC, 3*OC] plain row-major. The result is a NEW array: a weight may be shared by
other nodes, so it is never changed in place."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels.arguments import as_float_array, new_array


def paddle_weight_h_to_canonical(weight_h: np.ndarray) -> np.ndarray:
    """Paddle gru/fusion_gru Weight(H) -> plain [OC, 3*OC].

    The Paddle variable says [OC, 3*OC] but its memory is a row-major [OC, 2*OC] block (update,
    reset) followed by a row-major [OC, OC] block (candidate): reading it as one [OC, 3*OC]
    matrix mixes gates from different rows."""
    op = "paddle_weight_h_to_canonical"
    arr = as_float_array(weight_h, op, "weight_h")
    if arr.ndim != 2 or arr.shape[1] != 3 * arr.shape[0]:
        raise ArgumentError(f"{op}: weight_h must have shape [OC, 3*OC], got {arr.shape}")
    oc, flat = arr.shape[0], arr.reshape(-1)
    wh = new_array((oc, 3 * oc), flat.dtype, op, "wh")
    wh[:, : 2 * oc] = flat[: 2 * oc * oc].reshape(oc, 2 * oc)
    wh[:, 2 * oc :] = flat[2 * oc * oc :].reshape(oc, oc)
    return wh
