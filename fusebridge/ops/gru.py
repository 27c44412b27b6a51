"""GRU (the recurrence on input already projected to 3*OC features: Paddle's `gru`) and
FusionGRU (input projection and recurrence: fc_gru, mul_gru, ONNX GRU, MXNet RNN(gru)).

The activation, direction and layout names are the compiled kernel's (kernels/gru.py lists them
in the order of its C++ enums); GRUAttributes is where rules, the binding, the oracle, the
lowering and the frontends read them."""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Sequence

import numpy as np
import onnx_ir as ir

from fusebridge import kernels
from fusebridge.errors import ArgumentError, ModelFormatError, UnsupportedOpError
from fusebridge.graph.builder import constant_input
from fusebridge.graph.checks import describe
from fusebridge.kernels import gru as gru_kernel
from fusebridge.kernels import reference
from fusebridge.kernels.sequence_layout import as_offsets, as_seq_lens
from fusebridge.ops.common import OpDef, PlacementCost, Recurrence, ReferenceOp, Run, per_engine
from fusebridge.ops.schema import Attribute, OpSchema

ACTIVATIONS: tuple[str, ...] = tuple(gru_kernel.ACTIVATIONS)
DIRECTIONS: tuple[str, ...] = gru_kernel.DIRECTIONS
LAYOUTS: tuple[str, ...] = tuple(gru_kernel.LAYOUTS)
# ONNX GRU's spelling of each activation. Identity is ONNX's Affine(alpha 1, beta 0); ONNX
# Runtime's Affine defaults are not that, so a writer gives alpha and beta.
ONNX_ACTIVATIONS = {"sigmoid": "Sigmoid", "tanh": "Tanh", "relu": "Relu", "identity": "Affine"}


@dataclasses.dataclass(frozen=True)
class GRUAttributes:
    direction: str = "forward"
    linear_before_reset: int = 0
    origin_mode: int = 1
    activation: str = "tanh"
    gate_activation: str = "sigmoid"
    layout: str = "lod"

    @property
    def directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    def kernel_arguments(self) -> dict[str, object]:
        """The keyword arguments of kernels.fusion_gru and reference.gru these stand for."""
        return {
            "layout": self.layout,
            "direction": self.direction,
            "linear_before_reset": bool(self.linear_before_reset),
            "origin_mode": bool(self.origin_mode),
            "activation": self.activation,
            "gate_activation": self.gate_activation,
        }


_ATTRIBUTES = (
    Attribute(
        "direction", "forward", DIRECTIONS, "reverse runs each sentence from its own last word"
    ),
    Attribute(
        "linear_before_reset",
        0,
        (0, 1),
        "0: act(x_c + (r * h) @ Wh_c) (Paddle, oneDNN); 1: act(x_c + r * (h @ Wh_c + bh_c)) (ONNX)",
    ),
    Attribute(
        "origin_mode",
        1,
        (0, 1),
        "1: h = u * h_prev + (1 - u) * c (oneDNN, ONNX, MXNet); 0: (1 - u) * h_prev + u * c",
    ),
    Attribute("activation", "tanh", ACTIVATIONS, "candidate activation"),
    Attribute("gate_activation", "sigmoid", ACTIVATIONS, "update and reset gate activation"),
    Attribute(
        "layout", "lod", LAYOUTS, "lod: X [words, C] + offsets; tnc/ntc: right-padded X + seq_lens"
    ),
)
_DOC = (
    "Gate order (update, reset, candidate). Wh [D, OC, 3*OC], B and B_h [D, 3*OC] (D = 2 for "
    "bidirectional, forward first); B_h is the recurrent bias (its candidate part matters only "
    "with linear_before_reset). H0 [D, N, OC] (or [N, OC] with one direction). Y has the "
    "layout of X with D*OC features (forward half first); Y_last [D, N, OC] is each sentence's "
    "final state per direction."
)
GRU_SCHEMA = OpSchema(
    "GRU",
    ("X", "lengths?", "Wh", "B?", "B_h?", "H0?"),
    ("Y", "Y_last?"),
    _ATTRIBUTES,
    "The recurrence alone, on input already projected to 3*OC features (Paddle's `gru`). "
    "lengths: offsets [N+1] for layout lod (required), seq_lens [N] otherwise (left out: every "
    "sentence is T long). " + _DOC,
    attributes_type=GRUAttributes,
)
FUSION_GRU_SCHEMA = OpSchema(
    "FusionGRU",
    ("X", "lengths?", "Wx", "Wh", "B?", "B_h?", "H0?"),
    ("Y", "Y_last?"),
    _ATTRIBUTES,
    "Input projection and recurrence in one op (what fc_gru and mul_gru produce). "
    "Wx [D, IC, 3*OC]. lengths as for GRU. " + _DOC,
    attributes_type=GRUAttributes,
)


@functools.cache
def _identity_projection(directions: int, oc: int) -> np.ndarray:
    eye = np.eye(3 * oc, dtype=np.float32)
    eye.flags.writeable = False
    return np.broadcast_to(eye, (directions, 3 * oc, 3 * oc))


def split_inputs(op_type: str, inputs: Sequence[object]) -> tuple:
    """(x, lengths, wx, wh, bias, bias_h, h0) of a GRU or FusionGRU node's inputs (padded to the
    schema); the GRU op has no wx (None)."""
    if op_type == "GRU":
        x, lengths, wh, bias, bias_h, h0 = inputs
        return x, lengths, None, wh, bias, bias_h, h0
    return tuple(inputs)


def kernel_call(
    op_type: str, attrs: GRUAttributes, inputs: Sequence[object], identity_wx: bool = False
) -> tuple[list, dict]:
    """(x, wx, wh, bias) and the keyword arguments of kernels.fusion_gru / reference.gru for a
    GRU or FusionGRU node. The GRU op's input is already projected: its wx is None (the kernel
    reads the gates from x), or with identity_wx the identity (for reference.gru)."""
    x, lengths, wx, wh, bias, bias_h, h0 = split_inputs(op_type, inputs)
    if wx is None and identity_wx:
        wx = _identity_projection(np.shape(wh)[0], np.shape(wh)[-2])
    kwargs = attrs.kernel_arguments()
    kwargs.update(bias_h=bias_h, h0=h0)
    kwargs["offsets" if attrs.layout == "lod" else "seq_lens"] = lengths
    return [x, wx, wh, bias], kwargs


def _binding(
    engine, node: ir.Node, attrs: GRUAttributes, constants: dict[int, np.ndarray], reuse: bool
) -> Run:
    if node.op_type == "GRU" and attrs.direction == "bidirectional":
        raise ArgumentError(
            f"{describe(node)}: a projected input [words, 3*OC] serves one "
            "direction; use FusionGRU for bidirectional"
        )
    n_out = len(node.outputs)
    n_in = len(GRU_SCHEMA.inputs if node.op_type == "GRU" else FUSION_GRU_SCHEMA.inputs)
    weight_slots = range(2, n_in - 1)  # all but X, lengths and H0
    prepared = None
    if all(i in constants or i >= len(node.inputs) or node.inputs[i] is None for i in weight_slots):
        # Constant weights (every imported model): packed, and the primitive found, once.
        probe = [constants.get(i) for i in range(n_in)]
        (_, wx, wh, bias), kw = kernel_call(node.op_type, attrs, probe)
        packed = engine.pack_gru_weights(wx, wh, bias, kw["bias_h"])
        prepared = engine.GRUKernel(packed, **attrs.kernel_arguments())
    lengths_name = "offsets" if attrs.layout == "lod" else "seq_lens"

    buffers = threading.local()  # per thread: runs of one Session may overlap in threads

    def run(inputs: Sequence[np.ndarray | None]) -> list[np.ndarray]:
        if prepared is not None:
            x, lengths, *_, h0 = split_inputs(node.op_type, inputs)
            gru, kw = prepared, {lengths_name: lengths, "h0": h0}
        else:
            (x, wx, wh, bias), kw = kernel_call(node.op_type, attrs, inputs)
            gru = functools.partial(engine.fusion_gru, wx=wx, wh=wh, bias=bias)
        if reuse:
            # Y is an intermediate nobody keeps after the run: writing it into last run's
            # buffer saves the page faults of a fresh one and the trim when it is freed.
            last = getattr(buffers, "y", None)
            kw["out"] = last if last is not None and last.shape[:-1] == x.shape[:-1] else None
        out = gru(x, return_last=n_out == 2, **kw)
        y = out[0] if n_out == 2 else out
        if reuse:
            buffers.y = y
        return list(out) if n_out == 2 else [out]

    return run


def _lengths_checked(x: np.ndarray, kw: dict) -> None:
    """reference.gru slices sentences by offsets or seq_lens as given (a length past the padded
    steps would be cut short silently): checked here as the kernel checks them."""
    if kw["layout"] == "lod":
        kw["offsets"] = as_offsets(kw["offsets"], "gru", np.shape(x)[0])
    elif kw["seq_lens"] is not None and np.ndim(x) == 3:
        t, n = np.shape(x)[:2] if kw["layout"] == "tnc" else np.shape(x)[1::-1]
        kw["seq_lens"] = as_seq_lens(kw["seq_lens"], "gru", n, t)


class GRU(ReferenceOp):
    schema = GRU_SCHEMA

    def _run(self, *inputs, **_):
        padded = list(inputs) + [None] * (len(self.schema.inputs) - len(inputs))
        (x, wx, wh, bias), kw = kernel_call(type(self).__name__, self.attrs(), padded, True)
        _lengths_checked(x, kw)
        hidden, last = reference.gru(x, wx, wh, bias, **kw)
        return (hidden.astype(np.float32), last.astype(np.float32))[: self.n_outputs]


class FusionGRU(GRU):
    schema = FUSION_GRU_SCHEMA


def _shape(value: ir.Value | None) -> tuple[int, ...] | None:
    """The shape of a constant input; None for an absent or computed one."""
    if value is None or value.const_value is None or value.is_graph_input():
        return None
    return tuple(value.const_value.shape)


def check_inputs(node: ir.Node) -> None:
    """With layout lod, the lengths input (offsets) is given. Wh [D, OC, 3*OC], Wx [D, IC,
    3*OC], B and B_h [D, 3*OC], D = 2 for bidirectional and 1 otherwise (with one direction D
    may be left out, as the kernels allow), OC and IC >= 1. ModelFormatError naming the node
    and the input; computed weights are checked by the kernels when they run."""
    at = describe(node)
    schema = GRU_SCHEMA if node.op_type == "GRU" else FUSION_GRU_SCHEMA
    attrs = schema.attribute_values(node)
    given = {n.rstrip("?"): v for n, v in zip(schema.inputs, node.inputs) if v is not None}
    if attrs["layout"] == "lod" and "lengths" not in given:
        raise ModelFormatError(f"{at}: layout lod needs the lengths input (offsets [N+1])")
    d = 2 if attrs["direction"] == "bidirectional" else 1
    shapes = {n: _shape(v) for n, v in given.items()}

    def full(name: str, ndim: int) -> tuple[int, ...] | None:
        shape = shapes.get(name)
        if shape is not None and d == 1 and len(shape) == ndim - 1:
            shape = (1, *shape)
        return shape

    def refuse(name: str, want: str) -> ModelFormatError:
        return ModelFormatError(
            f"{at}: {name} {list(shapes[name])}, expected {want} ({d} direction(s))"
        )

    wh = full("Wh", 3)
    if wh is None:
        return
    oc = wh[1] if len(wh) == 3 else 0
    if oc < 1 or wh != (d, oc, 3 * oc):
        raise refuse("Wh", f"[{d}, hidden, 3 * hidden] with hidden >= 1")
    wx = full("Wx", 3)
    if wx is not None and (len(wx) != 3 or wx[0] != d or wx[1] < 1 or wx[2] != 3 * oc):
        raise refuse("Wx", f"[{d}, input size >= 1, {3 * oc}]")
    for name in ("B", "B_h"):
        bias = full(name, 2)
        if bias is not None and bias != (d, 3 * oc):
            raise refuse(name, f"[{d}, {3 * oc}]")


def _constant(node: ir.Node, value: ir.Value | None, what: str) -> np.ndarray | None:
    why = "the portable export needs it as a constant (it converts it to ONNX GRU's layout)"
    return constant_input(value, f"{describe(node)}: {what}", why)


def lower(op, node: ir.Node) -> list[ir.Value]:
    """A padded (tnc/ntc) GRU or FusionGRU as ONNX GRU: W = Wx^T and R = Wh^T per direction,
    B = [bias | bias_h] (the same two biases in the same places), sequence_lens int32,
    initial_h; origin_mode 0 by update-gate negation. ONNX Runtime runs only layout 0, so ntc
    is transposed around it."""
    attrs = GRU_SCHEMA.parse(node)
    check_inputs(node)
    if attrs.layout == "lod":
        raise UnsupportedOpError(
            f"{describe(node)}: layout lod has no ONNX GRU form; the portable export pads it first"
        )
    n_in = len(GRU_SCHEMA.inputs if node.op_type == "GRU" else FUSION_GRU_SCHEMA.inputs)
    padded = list(node.inputs) + [None] * (n_in - len(node.inputs))
    x, lengths, wx_v, wh_v, b_v, bh_v, h0 = split_inputs(node.op_type, padded)
    d = attrs.directions
    wh = _constant(node, wh_v, "Wh")
    oc = wh.shape[-2]
    wh = wh.reshape(d, oc, 3 * oc)
    wx = _constant(node, wx_v, "Wx")
    # The GRU op's input is projected already: an identity W hands it through.
    wx = _identity_projection(d, oc) if wx is None else wx
    wx = wx.reshape(d, -1, 3 * oc)
    zeros = np.zeros((d, 3 * oc), np.float32)
    bias = _constant(node, b_v, "B")
    bias_h = _constant(node, bh_v, "B_h")
    bias = zeros if bias is None else bias.reshape(d, 3 * oc)
    bias_h = zeros if bias_h is None else bias_h.reshape(d, 3 * oc)
    if attrs.origin_mode == 0:
        if attrs.gate_activation != "sigmoid":
            raise UnsupportedOpError(
                f"{describe(node)}: origin_mode 0 with gate_activation {attrs.gate_activation} "
                "cannot be written as ONNX GRU, which computes h = (1 - z) * h~ + z * h_prev; "
                "only a sigmoid gate turns into that by negating its weights "
                "(sigmoid(-a) = 1 - sigmoid(a))"
            )
        wx, wh, bias, bias_h = kernels.negate_update_gate(wx, wh, bias, bias_h)
    w = op.const(np.ascontiguousarray(wx.transpose(0, 2, 1), np.float32), "W")
    r = op.const(np.ascontiguousarray(wh.transpose(0, 2, 1), np.float32), "R")
    b = op.const(np.concatenate([bias, bias_h], axis=1).astype(np.float32), "B")
    if attrs.layout == "ntc":
        x = op.Transpose(x, perm=[1, 0, 2])
    if h0 is not None and (h0.shape is None or len(h0.shape) != 3):  # [N, OC] of one direction
        h0 = op.Reshape(h0, op.ints([d, -1, oc], "h0_shape"))
    if lengths is not None and lengths.dtype != ir.DataType.INT32:
        lengths = op.Cast(lengths, to=ir.DataType.INT32)
    pair = [ONNX_ACTIVATIONS[attrs.gate_activation], ONNX_ACTIVATIONS[attrs.activation]]
    gru_attrs: dict[str, object] = {
        "hidden_size": oc,
        "direction": attrs.direction,
        "linear_before_reset": attrs.linear_before_reset,
        "activations": pair * d,
    }
    if "Affine" in pair:
        # One (1, 0) per activation: right whether a runtime gives the list to every
        # activation in order or only to those that take parameters.
        gru_attrs["activation_alpha"] = [1.0] * (2 * d)
        gru_attrs["activation_beta"] = [0.0] * (2 * d)
    y, y_h = op.GRU(x, w, r, b, lengths, h0, _outputs=2, **gru_attrs)
    # Y [T, D, N, OC] -> ours: [T, N, D*OC] (tnc) or [N, T, D*OC] (ntc), forward half first.
    if d == 1 and attrs.layout == "tnc":  # one node, as the exporters write it
        y = op.Squeeze(y, op.ints([1], "axis1"))
    else:
        perm = [0, 2, 1, 3] if attrs.layout == "tnc" else [2, 0, 1, 3]
        # D*OC, not -1: a -1 cannot be inferred from an empty Y (a batch of 0), and ONNX
        # Runtime refuses the Reshape then.
        y = op.Reshape(op.Transpose(y, perm=perm), op.ints([0, 0, d * oc], "y_shape"))
    return [y, y_h][: len(node.outputs)]


@dataclasses.dataclass(frozen=True)
class GRUCosts:
    """Microseconds. A GRU's time on an engine: fixed + step * D * T + mac * D * rows *
    3H(I + H) / 1e6, where rows is sum(lengths) on our kernel (it skips the padding) and N * T
    in ONNX Runtime (its GRU runs every padded step), where the GRU has no fixed part: an ONNX
    Runtime run's own cost is shared by the partition's nodes (the placement's
    PARTITION_CALL_US)."""

    kernel_fixed: float
    kernel_step: float
    kernel_mac: float
    ort_step: float
    ort_mac: float


# python -m benchmarks.placement_costs --threads 2 (prints the lines below), on a quiet 2-core
# AMD EPYC VM (AVX-512), 2 threads.
GRU_COSTS = GRUCosts(
    kernel_fixed=5.87,
    kernel_step=0.078,
    kernel_mac=6.406,
    ort_step=0.265,
    ort_mac=8.757,
)


def _sizes(node: ir.Node) -> dict[str, int]:
    """I (input size), H (hidden) and D (directions) from the node's constant weights (the
    placement's candidates have them: their lowering took them as constants)."""
    d = GRU_OP if node.op_type == GRU_SCHEMA.op_type else FUSION_GRU
    hidden = int(d.input(node, "Wh").const_value.shape[-2])
    wx = d.inputs(node).get("Wx")
    size = int(wx.const_value.shape[-2]) if wx is not None else 3 * hidden
    return {"I": size, "H": hidden, "D": d.schema.parse(node).directions}


def gru_us(sizes: dict[str, int], steps: int, batch: int, filled: int, on_kernel: bool) -> float:
    """The estimated time of one GRU run; filled = sum of the sequence lengths (N * T when none
    are fed)."""
    c, i, h, d = GRU_COSTS, sizes["I"], sizes["H"], sizes["D"]
    rows = filled if on_kernel else batch * steps
    work = d * rows * 3 * h * (i + h) / 1e6
    if on_kernel:
        return c.kernel_fixed + c.kernel_step * d * steps + c.kernel_mac * work
    return c.ort_step * d * steps + c.ort_mac * work


_TRAITS = {
    "lower": lower,
    "check": check_inputs,
    "recurrence": Recurrence(),
    "cost": PlacementCost(_sizes, gru_us),
}
# _binding packs constant weights on either engine; unpacked (a weight computed in the graph)
# the cuda engine takes host and device weights alike.
WEIGHTS = frozenset({"Wx", "Wh", "B", "B_h"})
GRU_OP = OpDef(GRU_SCHEMA, GRU, per_engine(_binding), **_TRAITS, packed=WEIGHTS - {"Wx"})
FUSION_GRU = OpDef(FUSION_GRU_SCHEMA, FusionGRU, per_engine(_binding), **_TRAITS, packed=WEIGHTS)
OPS = (GRU_OP, FUSION_GRU)
