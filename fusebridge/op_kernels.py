"""fusebridge-domain nodes on the compiled kernels, prepared once per Session.

`prepare(node, constants)` does at Session creation what must not happen per run (schema
checks, attribute decoding, GRU weight packing) and returns run(inputs) -> outputs, where
inputs are the node's input arrays in schema order (None for absent optional inputs)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence

import ml_dtypes
import numpy as np
import onnx_ir as ir

from fusebridge import ir as fir
from fusebridge import kernels
from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels.sequence_layout import as_offsets

Run = Callable[[Sequence[np.ndarray | None]], list[np.ndarray]]


@functools.cache
def _identity_projection(directions: int, oc: int) -> np.ndarray:
    eye = np.eye(3 * oc, dtype=np.float32)
    eye.flags.writeable = False
    return np.broadcast_to(eye, (directions, 3 * oc, 3 * oc))


def gru_call(op_type: str, attrs: dict, inputs: Sequence[np.ndarray | None]) -> tuple[list, dict]:
    """(x, wx, wh, bias) and the keyword arguments of kernels.fusion_gru / reference.gru for a
    GRU or FusionGRU node. The GRU op's input is already projected: its Wx is the identity."""
    if op_type == "GRU":
        x, lengths, wh, bias, bias_h, h0 = (list(inputs) + [None] * 6)[:6]
        wx = _identity_projection(np.shape(wh)[0], np.shape(wh)[-2])
    else:
        x, lengths, wx, wh, bias, bias_h, h0 = (list(inputs) + [None] * 7)[:7]
    layout = attrs["layout"]
    kwargs = {
        "bias_h": bias_h,
        "h0": h0,
        ("offsets" if layout == "lod" else "seq_lens"): lengths,
        "layout": layout,
        "direction": attrs["direction"],
        "linear_before_reset": bool(attrs["linear_before_reset"]),
        "origin_mode": bool(attrs["origin_mode"]),
        "activation": attrs["activation"],
        "gate_activation": attrs["gate_activation"],
    }
    return [x, wx, wh, bias], kwargs


def inference_dropout_scale(attrs: dict) -> float:
    """What an is_test Dropout multiplies by: 1 (upscale_in_train) or 1 - p."""
    return 1.0 if attrs["mode"] == "upscale_in_train" else 1.0 - attrs["p"]


def _gru(node: ir.Node, attrs: dict, constants: dict[int, np.ndarray], reuse_output: bool) -> Run:
    if node.op_type == "GRU" and attrs["direction"] == "bidirectional":
        raise ArgumentError(
            f"fusebridge.GRU {node.name!r}: a projected input [words, 3*OC] serves one "
            "direction; use FusionGRU for bidirectional"
        )
    n_out = len(node.outputs)
    weight_slots = (2, 3, 4) if node.op_type == "GRU" else (2, 3, 4, 5)
    packed = None
    if all(i in constants or i >= len(node.inputs) or node.inputs[i] is None for i in weight_slots):
        probe = [constants.get(i) for i in range(len(node.inputs))]
        (_, wx, wh, bias), kw = gru_call(node.op_type, attrs, probe)
        packed = kernels.pack_gru_weights(wx, wh, bias, kw["bias_h"])

    buffers = threading.local()  # per thread: runs of one Session may overlap in threads

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        (x, wx, wh, bias), kw = gru_call(node.op_type, attrs, inputs)
        if packed is not None:
            weights, kw["bias_h"] = (packed,), None
        else:
            weights = (wx, wh, bias)
        if reuse_output:
            # Y is an intermediate nobody keeps after the run: writing it into last run's
            # buffer saves the page faults of a fresh one and the trim when it is freed.
            last = getattr(buffers, "y", None)
            kw["out"] = last if last is not None and last.shape[:-1] == x.shape[:-1] else None
        out = kernels.fusion_gru(x, *weights, return_last=n_out == 2, **kw)
        y = out[0] if n_out == 2 else out
        if reuse_output:
            buffers.y = y
        return list(out) if n_out == 2 else [out]

    return run


def _dropout(
    node: ir.Node, attrs: dict, constants: dict[int, np.ndarray], reuse_output: bool
) -> Run:
    if attrs["is_test"]:
        scale = inference_dropout_scale(attrs)
        if len(node.outputs) > 1:
            raise ArgumentError(f"fusebridge.Dropout {node.name!r}: is_test has no mask output")

        def run_test(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
            x = inputs[0]
            return [x if scale == 1.0 else x * x.dtype.type(scale)]

        return run_test
    _rng_inputs(node, 1)
    with_mask = len(node.outputs) > 1

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        x, seed, offset = (list(inputs) + [None] * 3)[:3]
        out = kernels.dropout(
            x,
            attrs["p"],
            seed=_scalar(seed, "seed"),
            offset=_scalar(offset, "offset"),
            axes=attrs["axes"],
            mode=attrs["mode"],
            return_mask=with_mask,
        )
        return list(out) if with_mask else [out]

    return run


def _mask_or_seed(node: ir.Node, mask_slot: int) -> None:
    """A dropout backward takes the forward's mask, or its seed to recompute the bits."""
    given = [
        i < len(node.inputs) and node.inputs[i] is not None for i in (mask_slot, mask_slot + 1)
    ]
    if given[0] == given[1]:
        raise ArgumentError(
            f"fusebridge.{node.op_type} {node.name!r}: give one of mask (kept by the forward) "
            f"and seed (to recompute it), got {'both' if given[0] else 'neither'}"
        )


def _rng_or_mask(mask: np.ndarray | None, seed: np.ndarray | None) -> dict:
    return {"mask": mask} if mask is not None else {"seed": _scalar(seed, "seed")}


def _dropout_grad(
    node: ir.Node, attrs: dict, constants: dict[int, np.ndarray], reuse_output: bool
) -> Run:
    _mask_or_seed(node, 1)

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        dy, mask, seed, offset = (list(inputs) + [None] * 4)[:4]
        dx = kernels.dropout_backward(
            dy,
            attrs["p"],
            offset=_scalar(offset, "offset"),
            axes=attrs["axes"],
            mode=attrs["mode"],
            **_rng_or_mask(mask, seed),
        )
        return [dx]

    return run


def _softmax_dropout_grad(
    node: ir.Node, attrs: dict, constants: dict[int, np.ndarray], reuse_output: bool
) -> Run:
    _mask_or_seed(node, 2)

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        dy, x, mask, seed, offset = (list(inputs) + [None] * 5)[:5]
        dx = kernels.softmax_dropout_backward(
            dy,
            attrs["p"],
            x=x,
            offset=_scalar(offset, "offset"),
            axis=attrs["axis"],
            mode=attrs["mode"],
            **_rng_or_mask(mask, seed),
        )
        return [dx]

    return run


def _rng_inputs(node: ir.Node, first: int) -> None:
    """Training dropouts draw from an explicit (seed, offset): the seed input is required."""
    if len(node.inputs) <= first or node.inputs[first] is None:
        raise ArgumentError(
            f"fusebridge.{node.op_type} {node.name!r}: training dropout needs a seed input "
            "(int64); run fusebridge.fuse_passes.explicit_rng to give every dropout its stream"
        )


def _scalar(a: np.ndarray | None, name: str, default: int = 0) -> int:
    """The one integer in a seed or offset input (int64 by the schema; a graph may compute it)."""
    if a is None:
        return default
    arr = np.asarray(a)
    if arr.dtype.kind not in "iu":
        raise ArgumentTypeError(f"input {name} must be an integer, got {arr.dtype}")
    if arr.size != 1:
        raise ArgumentError(f"input {name} must hold one integer, got shape {arr.shape}")
    return int(arr.reshape(-1)[0])


def _matmul_dropout(
    node: ir.Node, attrs: dict, constants: dict[int, np.ndarray], reuse_output: bool
) -> Run:
    _rng_inputs(node, 3)
    with_mask = len(node.outputs) > 1

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        a, b, bias, seed, offset = (list(inputs) + [None] * 5)[:5]
        out = kernels.matmul_dropout(
            a,
            b,
            attrs["p"],
            seed=_scalar(seed, "seed"),
            offset=_scalar(offset, "offset"),
            bias=bias,
            transpose_a=bool(attrs["transpose_a"]),
            transpose_b=bool(attrs["transpose_b"]),
            mode=attrs["mode"],
            return_mask=with_mask,
        )
        return list(out) if with_mask else [out]

    return run


def _softmax_dropout(
    node: ir.Node, attrs: dict, constants: dict[int, np.ndarray], reuse_output: bool
) -> Run:
    _rng_inputs(node, 1)
    with_mask = len(node.outputs) > 1

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        x, seed, offset = (list(inputs) + [None] * 3)[:3]
        out = kernels.softmax_dropout(
            x,
            attrs["p"],
            axis=attrs["axis"],
            seed=_scalar(seed, "seed"),
            offset=_scalar(offset, "offset"),
            mode=attrs["mode"],
            return_mask=with_mask,
        )
        return list(out) if with_mask else [out]

    return run


def _crf_decoding(
    node: ir.Node, attrs: dict, constants: dict[int, np.ndarray], reuse_output: bool
) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        emission, offsets, transition, label = (list(inputs) + [None] * 4)[:4]
        return [kernels.crf_decoding(emission, transition, offsets, label)]

    return run


def _sequence_pool(
    node: ir.Node, attrs: dict, constants: dict[int, np.ndarray], reuse_output: bool
) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        x, offsets = inputs
        return [kernels.sequence_pool(x, offsets, attrs["pooltype"], attrs["pad_value"])]

    return run


def sequence_lengths(lengths: np.ndarray, x: np.ndarray, attrs: dict) -> np.ndarray:
    """SequenceLengths: lengths [N] as int64 once each is a whole number in [minimum, T]."""
    where = attrs["source"] or "fusebridge.SequenceLengths"
    lengths, axis = np.asarray(lengths), attrs["axis"]
    if np.ndim(x) < 2:
        raise ArgumentError(f"{where}: the data has shape {np.shape(x)}, expected 2 axes or more")
    t, n = x.shape[axis], x.shape[1 - axis]
    if lengths.dtype.kind not in "iuf" and lengths.dtype != ml_dtypes.bfloat16:
        raise ArgumentTypeError(f"{where}: lengths of dtype {lengths.dtype}, expected numbers")
    if lengths.shape != (n,):
        raise ArgumentError(f"{where}: shape {lengths.shape}, expected [{n}] (one per sequence)")
    exact = lengths.astype(np.float64) if lengths.dtype.kind not in "iu" else lengths
    # NaN fails every comparison: it is refused with the values outside the range.
    bad = ~((exact >= attrs["minimum"]) & (exact <= t) & (np.floor(exact) == exact))
    if bad.any():
        i = int(np.argmax(bad))
        raise ArgumentError(
            f"{where}: length {lengths[i]} at [{i}], expected a whole number in "
            f"[{attrs['minimum']}, {t}] ({t} steps in the data)"
        )
    return lengths.astype(np.int64)


def _sequence_lengths(
    node: ir.Node, attrs: dict, constants: dict[int, np.ndarray], reuse_output: bool
) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        return [sequence_lengths(inputs[0], inputs[1], attrs)]

    return run


def _lod_to_padded(
    node: ir.Node, attrs: dict, constants: dict[int, np.ndarray], reuse_output: bool
) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        return [kernels.lod_to_padded(inputs[0], inputs[1], attrs["layout"])[0]]

    return run


def _padded_to_lod(
    node: ir.Node, attrs: dict, constants: dict[int, np.ndarray], reuse_output: bool
) -> Run:
    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        padded, offsets = inputs
        # No data array here says how many words the offsets split: their own last entry does
        # (padded_to_lod checks each length against the padded steps).
        arr = np.asarray(offsets)
        words = int(arr[-1]) if arr.ndim == 1 and arr.size and arr.dtype.kind in "iu" else 0
        lengths = np.diff(as_offsets(arr, "padded_to_lod", words))
        return [kernels.padded_to_lod(padded, lengths, attrs["layout"])[0]]

    return run


_PREPARE = {
    "GRU": _gru,
    "FusionGRU": _gru,
    "Dropout": _dropout,
    "DropoutGrad": _dropout_grad,
    "MatMulDropout": _matmul_dropout,
    "SoftmaxDropout": _softmax_dropout,
    "SoftmaxDropoutGrad": _softmax_dropout_grad,
    "CRFDecoding": _crf_decoding,
    "SequencePool": _sequence_pool,
    "SequenceLengths": _sequence_lengths,
    "LoDToPadded": _lod_to_padded,
    "PaddedToLoD": _padded_to_lod,
}


def prepare(node: ir.Node, constants: dict[int, np.ndarray], reuse_output: bool = False) -> Run:
    """run(inputs) for a fusebridge node; constants maps input positions to initializer data.
    reuse_output: the node's outputs live only during a run (not graph outputs), so a kernel
    may write a run's output into the buffer of the previous run."""
    s = fir.schema(node.op_type)
    s.check_arity(node)
    return _PREPARE[node.op_type](node, s.attribute_values(node), constants, reuse_output)
