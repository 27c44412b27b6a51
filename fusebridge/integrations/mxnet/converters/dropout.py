"""MXNet's Dropout as our Dropout: mode 'training' is an identity at inference (is_test), 'always'
drops at inference too."""

from __future__ import annotations

from fusebridge import conventions
from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.mxnet.converters.common import (
    CONVERTERS,
    check_axes,
    dropout_p,
)
from fusebridge.integrations.mxnet.symbol import MXNode


@CONVERTERS.register("Dropout")
def _dropout(cx, node: MXNode) -> None:
    """mode 'training' drops only while training: nothing at inference (is_test); 'always'
    drops at inference too (our Philox dropout, which needs a seed to run)."""
    mode = cx.attr("mode", "str", "training")
    if mode not in ("training", "always"):
        raise UnsupportedOpError(f"{cx.where()}: mode {mode!r}, expected training or always")
    x = cx.input(0)
    attrs = {"p": dropout_p(cx, 0.5), "is_test": int(mode == "training")}
    axes = cx.attr("axes", "ints", ()) or ()
    check_axes(cx, "axes", axes, cx.rank(x), negative=False)
    if axes:
        attrs["axes"] = list(axes)
    cx.define(cx.add("Dropout", [x], attrs, domain=conventions.DOMAIN))
