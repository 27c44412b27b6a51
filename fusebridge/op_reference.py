"""fusebridge-domain ops for onnx.reference, from kernels/reference.py: the oracle backend of
Session(model, backend="reference"). Slow, float64 inside, independent of the C++ kernels."""

from __future__ import annotations

import numpy as np
import onnx
from onnx.reference.op_run import OpRun

from fusebridge import ir as fir
from fusebridge.errors import Error
from fusebridge.kernels import reference
from fusebridge.kernels.sequence_layout import as_offsets, as_seq_lens
from fusebridge.op_kernels import gru_call, inference_dropout_scale, sequence_lengths


class _FusebridgeOp(OpRun):
    """Attributes come from the node and our schema (onnx.reference passes the kwargs of a
    same-named standard op too, which are ignored)."""

    op_domain = fir.DOMAIN

    def run(self, *args, **kwargs):
        """OpRun.run, with an error of ours named by the node (OpRun turns a TypeError, so our
        ArgumentTypeError too, into a TypeError of its own: the original is its cause)."""
        try:
            return super().run(*args, **kwargs)
        except Exception as exc:
            error = exc.__cause__ if isinstance(exc.__cause__, Error) else exc
            if not isinstance(error, Error):
                raise
            where = f"{fir.DOMAIN}.{type(self).__name__} node {self.onnx_node.name!r}"
            raise type(error)(f"Session(backend='reference'): {where}: {error}") from error

    def attrs(self) -> dict[str, object]:
        given = {a.name: onnx.helper.get_attribute_value(a) for a in self.onnx_node.attribute}
        values = {}
        for a in fir.schema(type(self).__name__).attributes:
            v = given.get(a.name, a.default)
            if isinstance(v, bytes):
                v = v.decode()
            values[a.name] = tuple(v) if isinstance(a.default, tuple) else v
        return values


def _lengths_checked(x: np.ndarray, kw: dict) -> None:
    """reference.gru slices sentences by offsets or seq_lens as given (a length past the padded
    steps would be cut short silently): checked here as the kernel checks them."""
    if kw["layout"] == "lod":
        kw["offsets"] = as_offsets(kw["offsets"], "gru", np.shape(x)[0])
    elif kw["seq_lens"] is not None and np.ndim(x) == 3:
        t, n = np.shape(x)[:2] if kw["layout"] == "tnc" else np.shape(x)[1::-1]
        kw["seq_lens"] = as_seq_lens(kw["seq_lens"], "gru", n, t)


class GRU(_FusebridgeOp):
    def _run(self, *inputs, **_):
        (x, wx, wh, bias), kw = gru_call(type(self).__name__, self.attrs(), inputs)
        _lengths_checked(x, kw)
        hidden, last = reference.gru(x, wx, wh, bias, **kw)
        outs = (hidden.astype(np.float32), last.astype(np.float32))
        return outs[: len(self.onnx_node.output)]


class FusionGRU(GRU):
    pass


class Dropout(_FusebridgeOp):
    # seed, offset positionally: onnx.reference also passes ONNX Dropout's `seed` attribute.
    def _run(self, x, *rng, **_):
        seed, offset = (*rng, None, None)[:2]
        a = self.attrs()
        if a["is_test"]:
            return (x * x.dtype.type(inference_dropout_scale(a)),)
        seed = int(np.asarray(seed).reshape(-1)[0])
        offset = 0 if offset is None else int(np.asarray(offset).reshape(-1)[0])
        shared = {axis % x.ndim for axis in a["axes"]}
        mask_shape = tuple(1 if i in shared else n for i, n in enumerate(x.shape))
        y, mask = reference.dropout(x, a["p"], seed, offset, mask_shape, a["mode"])
        return (y.astype(x.dtype), mask)[: len(self.onnx_node.output)]


def _backward_through_dropout(dy, a: dict, axes, mask, seed, offset) -> np.ndarray:
    """dy * keep * scale, keep from the packed mask or redrawn from (seed, offset)."""
    shared = {axis % dy.ndim for axis in axes}
    mask_shape = tuple(1 if i in shared else n for i, n in enumerate(dy.shape))
    if mask is None:  # recomputed: the bits the forward drew over the same shape
        seed = int(np.asarray(seed).reshape(-1)[0])
        offset = 0 if offset is None else int(np.asarray(offset).reshape(-1)[0])
        ones = np.ones(mask_shape, np.float32)
        mask = reference.dropout(ones, a["p"], seed, offset, mask_shape, a["mode"])[1]
    keep = reference.unpack_mask(mask, mask_shape)
    p32 = float(np.float32(a["p"]))
    upscale = a["mode"] == "upscale_in_train" and p32 < 1.0
    scale = 1.0 / (1.0 - p32) if upscale else 1.0
    return reference.apply(dy, np.broadcast_to(keep, dy.shape), scale)


class DropoutGrad(_FusebridgeOp):
    def _run(self, dy, mask=None, seed=None, offset=None, **_):
        a = self.attrs()
        return (_backward_through_dropout(dy, a, a["axes"], mask, seed, offset),)


class SoftmaxDropoutGrad(_FusebridgeOp):
    def _run(self, dy, x, mask=None, seed=None, offset=None, **_):
        a = self.attrs()
        g = _backward_through_dropout(dy, a, (), mask, seed, offset).astype(np.float64)
        e = np.exp(x.astype(np.float64) - x.max(axis=a["axis"], keepdims=True))
        probs = e / e.sum(axis=a["axis"], keepdims=True)
        dx = probs * (g - (g * probs).sum(axis=a["axis"], keepdims=True))
        return (dx.astype(np.float32),)


def _training_dropout(x: np.ndarray, a: dict, seed, offset, n_out: int) -> tuple:
    """reference.dropout of x under the op's p and mode, (y, mask)[:n_out]."""
    seed = int(np.asarray(seed).reshape(-1)[0])
    offset = 0 if offset is None else int(np.asarray(offset).reshape(-1)[0])
    y, mask = reference.dropout(x, a["p"], seed, offset, x.shape, a["mode"])
    return (y.astype(np.float32), mask)[:n_out]


class MatMulDropout(_FusebridgeOp):
    def _run(self, a, b, bias=None, seed=None, offset=None, **_):
        at = self.attrs()
        a = np.swapaxes(a, -1, -2) if at["transpose_a"] else a
        b = np.swapaxes(b, -1, -2) if at["transpose_b"] else b
        product = np.matmul(a.astype(np.float64), b.astype(np.float64))
        if bias is not None:
            product = product + bias
        return _training_dropout(product, at, seed, offset, len(self.onnx_node.output))


class SoftmaxDropout(_FusebridgeOp):
    def _run(self, x, *rng, **_):
        seed, offset = (*rng, None, None)[:2]
        at = self.attrs()
        x = x.astype(np.float64)
        e = np.exp(x - x.max(axis=at["axis"], keepdims=True))
        probs = e / e.sum(axis=at["axis"], keepdims=True)
        return _training_dropout(probs, at, seed, offset, len(self.onnx_node.output))


class CRFDecoding(_FusebridgeOp):
    def _run(self, emission, offsets, transition, label=None, **_):
        return (reference.crf_decoding(emission, transition, offsets, label),)


class SequencePool(_FusebridgeOp):
    def _run(self, x, offsets, **_):
        a = self.attrs()
        y = reference.sequence_pool(x, offsets, a["pooltype"], a["pad_value"])
        return (np.asarray(y, x.dtype),)


class LoDToPadded(_FusebridgeOp):
    def _run(self, x, offsets, **_):
        return (reference.lod_to_padded(x, offsets, self.attrs()["layout"])[0],)


class PaddedToLoD(_FusebridgeOp):
    def _run(self, padded, offsets, **_):
        return (reference.padded_to_lod(padded, offsets, self.attrs()["layout"]),)


class SequenceLengths(_FusebridgeOp):
    def _run(self, lengths, x, **_):
        return (sequence_lengths(lengths, x, self.attrs()),)


OPS = [
    GRU,
    FusionGRU,
    Dropout,
    DropoutGrad,
    MatMulDropout,
    SoftmaxDropout,
    SoftmaxDropoutGrad,
    CRFDecoding,
    SequencePool,
    SequenceLengths,
    LoDToPadded,
    PaddedToLoD,
]
