"""What the GRU framework tests share: the `impl` fixture (the NumPy oracle and the compiled
kernel behind one signature, that of reference.gru). Paddle's own `gru` op is in
tests/helpers/paddle_gru_op.py."""

from __future__ import annotations

import pytest

from fusebridge import kernels
from fusebridge.kernels import reference


def _kernel(x, wx, wh, bias=None, **kwargs):
    # Looked up at call time: the kernel may be exported after this module is imported.
    return kernels.fusion_gru(x, wx, wh, bias, return_last=True, **kwargs)


@pytest.fixture(name="impl", params=["reference", "kernel"])
def impl_fixture(request):
    """gru(x, wx, wh, bias, *, bias_h, h0, offsets, seq_lens, layout, direction,
    linear_before_reset, origin_mode, activation, gate_activation) -> (hidden, last)."""
    return reference.gru if request.param == "reference" else _kernel
