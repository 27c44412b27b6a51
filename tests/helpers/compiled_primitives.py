"""Compiled primitives made directly, as callers of _C make them: for the core's own checks,
which the Python faces would have refused first."""

from __future__ import annotations

from fusebridge.kernels import core

# Everything but the geometry and the dtype: p 0.5, the first mode, training, scalar ISA.
DROPOUT_SETTINGS = {
    "p": 0.5,
    "mode": core._C.DropoutMode.upscale_in_train,
    "training": True,
    "isa": core._C.Isa.scalar,
    "stream_min_bytes": 0,
}


def dropout_primitive(shape, dtype=0, *, global_shape=None, start=None):
    """A DropoutPrimitive of a block `shape` (the whole tensor unless global_shape is given) at
    `start` (zeros by default), its mask the whole tensor's; dtype 0 is float32."""
    global_shape = shape if global_shape is None else global_shape
    desc = core._C.DropoutDescriptor(
        shape=shape,
        global_shape=global_shape,
        start=[0] * len(shape) if start is None else start,
        mask_shape=global_shape,
        dtype=core._C.DType(dtype),
        **DROPOUT_SETTINGS,
    )
    return core._C.DropoutPrimitive(desc)
