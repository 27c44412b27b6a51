"""QuantizedFusionGRU: FusionGRU (or GRU, without Wx) whose weights were quantized once by
`optimize(..., precision="int8" | "bf16")` (fuse_passes/quantize.py): int8 values with a scale
per gate column, or bfloat16. It runs on the compiled quantized kernel only: it has no placement
cost (so never moves into ONNX Runtime) and no cuda binding. Its portable form (int8) spells
the kernel's arithmetic in standard ONNX ops, bit for bit (docs/gru.md, "Quantized GRU")."""

from __future__ import annotations

import functools

import numpy as np
import onnx_ir as ir

from fusebridge import kernels
from fusebridge.errors import ArgumentError, ModelFormatError, UnsupportedOpError
from fusebridge.graph.builder import OpBuilder, constant_input
from fusebridge.graph.checks import describe
from fusebridge.graph.loops import body_graph, body_input, stacked_scan
from fusebridge.kernels.qgru_reference import qgru
from fusebridge.kernels.qgru_weights import QuantizedGRUWeights, pack_qgru_weights
from fusebridge.ops.common import OpDef, Recurrence, ReferenceOp, Run
from fusebridge.ops.gru import _ATTRIBUTES, _DOC, GRUAttributes
from fusebridge.ops.schema import OpSchema

SCHEMA = OpSchema(
    "QuantizedFusionGRU",
    ("X", "lengths?", "Wx?", "Wx_scale?", "Wh", "Wh_scale?", "B?", "B_h?", "H0?"),
    ("Y", "Y_last?"),
    _ATTRIBUTES,
    "FusionGRU with quantized weights: Wx [D, IC, 3*OC] and Wh [D, OC, 3*OC] int8 with "
    "Wx_scale and Wh_scale [D, 3*OC] float32 (weight = value * scale per column), or bfloat16 "
    "without scales; activations are quantized per row as they run (docs/gru.md). Without Wx "
    "X holds the projected gates [..., D*3*OC] (Paddle's gru). " + _DOC,
    attributes_type=GRUAttributes,
)
SLOTS = ("Wx", "Wx_scale", "Wh", "Wh_scale", "B", "B_h")


def precision_of(dtype: object) -> str | None:
    """'int8' or 'bf16' from a weight's dtype (numpy or ONNX), None for anything else."""
    name = str(dtype).lower()
    return "int8" if name in ("int8", "datatype.int8") else "bf16" if "bfloat16" in name else None


def weights_of(node_name: str, arrays: dict[str, np.ndarray | None]) -> QuantizedGRUWeights:
    """The node's weight inputs as QuantizedGRUWeights, checked."""
    wh = arrays["Wh"]
    precision = precision_of(wh.dtype)
    if precision is None:
        raise ModelFormatError(f"{node_name}: Wh must be int8 or bfloat16, got {wh.dtype}")
    wx = arrays["Wx"]
    if wx is not None and precision_of(wx.dtype) != precision:
        raise ModelFormatError(f"{node_name}: Wx is {wx.dtype} but Wh is {wh.dtype}")
    wh = wh if wh.ndim == 3 else wh[None]
    wx = None if wx is None else (wx if wx.ndim == 3 else wx[None])
    d, oc = wh.shape[0], wh.shape[1]
    if wh.ndim != 3 or d not in (1, 2) or oc < 1 or wh.shape[2] != 3 * oc:
        raise ModelFormatError(f"{node_name}: Wh {list(wh.shape)}, expected [D, OC, 3 * OC]")
    if wx is not None and (wx.ndim != 3 or wx.shape[0] != d or wx.shape[2] != 3 * oc):
        raise ModelFormatError(
            f"{node_name}: Wx {list(wx.shape)}, expected [{d}, input size, {3 * oc}]"
        )
    scales = {}
    for name, w in (("Wx", wx), ("Wh", wh)):
        scale = arrays[f"{name}_scale"]
        if precision == "bf16" or w is None:
            if scale is not None:
                raise ModelFormatError(f"{node_name}: {name}_scale goes with int8 {name} only")
            continue
        if scale is None or scale.dtype != np.float32 or scale.size != d * 3 * oc:
            got = None if scale is None else f"{scale.dtype} {list(scale.shape)}"
            raise ModelFormatError(
                f"{node_name}: int8 {name} needs {name}_scale float32 [{d}, {3 * oc}], got {got}"
            )
        scales[name] = scale.reshape(d, 3 * oc)
    zeros = np.zeros((d, 3 * oc), np.float32)

    def bias(name):
        b = arrays[name]
        if b is not None and np.size(b) != d * 3 * oc:
            raise ModelFormatError(
                f"{node_name}: {name} {list(np.shape(b))}, expected [{d}, {3 * oc}]"
            )
        return zeros if b is None else np.asarray(b, np.float32).reshape(d, 3 * oc)

    return QuantizedGRUWeights(
        precision, wx, scales.get("Wx"), wh, scales.get("Wh"), bias("B"), bias("B_h")
    )


def _slots(inputs) -> dict[str, object]:
    padded = list(inputs) + [None] * (len(SCHEMA.inputs) - len(inputs))
    return dict(zip((s.rstrip("?") for s in SCHEMA.inputs), padded))


def _binding(engine, node: ir.Node, attrs: GRUAttributes, constants, reuse: bool) -> Run:
    at = describe(node)
    missing = [
        name
        for i, name in enumerate(s.rstrip("?") for s in SCHEMA.inputs)
        if name in SLOTS
        and i < len(node.inputs)
        and node.inputs[i] is not None
        and i not in constants
    ]
    if missing:
        raise ArgumentError(f"{at}: quantized weights must be constants, {missing} are computed")
    arrays = _slots([constants.get(i) for i in range(len(SCHEMA.inputs))])
    kernel = engine.GRUKernel(pack_qgru_weights(weights_of(at, arrays)), **attrs.kernel_arguments())
    lengths_name = "offsets" if attrs.layout == "lod" else "seq_lens"
    n_out = len(node.outputs)

    def run(inputs) -> list[np.ndarray]:
        given = _slots(inputs)
        out = kernel(
            given["X"], h0=given["H0"], return_last=n_out == 2, **{lengths_name: given["lengths"]}
        )
        return list(out) if n_out == 2 else [out]

    return run


class QuantizedFusionGRU(ReferenceOp):
    """The reference backend runs kernels/qgru_reference.py, the kernel's arithmetic in NumPy."""

    schema = SCHEMA

    def _run(self, *inputs, **_):
        given = _slots(inputs)
        attrs = self.attrs()
        weights = weights_of(f"QuantizedFusionGRU {self.onnx_node.name!r}", given)
        kw = {"offsets" if attrs.layout == "lod" else "seq_lens": given["lengths"]}
        hidden, last = qgru(given["X"], weights, h0=given["H0"], **kw, **attrs.kernel_arguments())
        return (hidden, last)[: self.n_outputs]


def check_inputs(node: ir.Node) -> None:
    """Wh (and Wx) int8 or bfloat16 alike, int8 with their scales: ModelFormatError naming the
    node. Values computed in the graph are checked when the Session binds the node."""
    given = _slots(node.inputs)
    wh = given["Wh"]
    if wh is None or wh.dtype is None:
        return
    if precision_of(wh.dtype) is None:
        raise ModelFormatError(f"{describe(node)}: Wh must be int8 or bfloat16, got {wh.dtype}")
    arrays = {
        k: None if v is None or v.const_value is None else v.const_value.numpy()
        for k, v in given.items()
        if k in SLOTS
    }
    if arrays["Wh"] is not None:
        weights_of(describe(node), arrays)


# ---- the portable form: standard ONNX ops, the kernel's arithmetic op for op ----
F32 = np.float32


def _const(op: OpBuilder, value: object, hint: str) -> ir.Value:
    return op.const(np.asarray(value, F32), hint)


def _clamp(op: OpBuilder, outer: OpBuilder, x: ir.Value, lo: float, hi: float) -> ir.Value:
    """x < lo ? lo : x, then x > hi ? hi : x (simd_math.hpp's clamps: NaN passes). Constants
    are the outer graph's initializers (a Loop body reads them from there)."""
    lo_v, hi_v = _const(outer, lo, "exp_lo"), _const(outer, hi, "exp_hi")
    x = op.Where(op.Less(x, lo_v), lo_v, x)
    return op.Where(op.Greater(x, hi_v), hi_v, x)


def _exp(op: OpBuilder, outer: OpBuilder, x: ir.Value) -> ir.Value:
    """simd_math.hpp's vexp, one float32 operation per ONNX op; 2^n by Pow (n is an integer in
    [-126, 127] after the clamp, so the power is exact, as the kernel's exponent bits are)."""
    x = _clamp(op, outer, x, -87.3365447505531, 88.3762626647949)
    c = functools.partial(_const, outer)
    magic = c(12582912.0, "exp_magic")
    n = op.Sub(op.Add(op.Mul(x, c(1.44269504088896341, "log2e")), magic), magic)
    r = op.Sub(x, op.Mul(n, c(0.693359375, "ln2_hi")))
    r = op.Sub(r, op.Mul(n, c(-2.12194440e-4, "ln2_lo")))
    p = c(1.9875691500e-4, "exp_p0")
    for i, k in enumerate(
        (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
    ):
        p = op.Add(op.Mul(p, r), c(k, f"exp_p{i + 1}"))
    p = op.Add(op.Add(op.Mul(p, op.Mul(r, r)), r), c(1, "one_f"))
    return op.Mul(p, op.Pow(c(2, "two_f"), n))


def _activation(op: OpBuilder, outer: OpBuilder, name: str, x: ir.Value) -> ir.Value:
    """simd_math.hpp's activate(), op for op (so the portable file gives the kernel's bits)."""
    c = functools.partial(_const, outer)
    zero, one = c(0, "zero_f"), c(1, "one_f")
    if name == "sigmoid":
        # 1 / (1 + e^-x), as Reciprocal: ONNX Runtime's DivMulFusion rewrites Div(1, a) * b
        # into b / a, which rounds differently
        return op.Reciprocal(op.Add(one, _exp(op, outer, op.Neg(x))))
    if name == "relu":
        return op.Where(op.Less(x, zero), zero, x)
    if name == "identity":
        return x
    ax = op.Abs(x)
    z = op.Mul(x, x)
    p = c(-5.70498872745e-3, "tanh_p0")
    for i, (k, add) in enumerate(
        (
            (2.06390887954e-2, True),
            (5.37397155531e-2, False),
            (1.33314422036e-1, True),
            (3.33332819422e-1, False),
        )
    ):
        step = op.Add if add else op.Sub
        p = step(op.Mul(p, z), c(k, f"tanh_p{i + 1}"))
    small = op.Add(op.Mul(op.Mul(p, z), x), x)
    big = op.Sub(one, op.Div(c(2, "two_f"), op.Add(_exp(op, outer, op.Add(ax, ax)), one)))
    big = op.Where(op.Less(x, zero), op.Neg(big), big)
    return op.Where(op.Less(ax, c(0.625, "tanh_small")), small, big)


def _int8_product(op: OpBuilder, outer: OpBuilder, a: ir.Value, w: ir.Value, w_scale: ir.Value):
    """a @ w as the kernel's int8 product: each row of a quantized with its own scale
    (amax / 127; a zero row: scale 0), the exact int32 sum, then (float(sum) * row scale) *
    column scale."""
    c = functools.partial(_const, outer)
    amax = op.ReduceMax(op.Abs(a), axes=[-1], keepdims=1)
    positive = op.Greater(amax, c(0, "zero_f"))
    s = op.Where(positive, op.Div(c(127, "f127"), amax), c(0, "zero_f"))
    q = op.Clip(op.Round(op.Mul(a, s)), c(-127, "fm127"), c(127, "f127"))
    exact = op.MatMulInteger(op.Cast(q, to=ir.DataType.INT8), w)
    return op.Mul(
        op.Mul(op.Cast(exact, to=ir.DataType.FLOAT), op.Div(amax, c(127, "f127"))), w_scale
    )


def lower(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    """A padded (tnc/ntc) int8 QuantizedFusionGRU in standard ONNX ops (opset 17): the
    projection as MatMulInteger over per-row quantized X, each direction's recurrence as a Loop
    over the steps (ReverseSequence around the reverse one), and every float operation of the
    kernel, activations included, as one ONNX op in the kernel's order: plain ONNX Runtime then
    gives the Session's bits (tests/fuse_passes/test_quantize_gru.py). bf16 is refused:
    VDPBF16PS's running sum has no ONNX form (MatMul sums in its own order)."""
    at = describe(node)
    attrs = SCHEMA.parse(node)
    if attrs.layout == "lod":
        raise UnsupportedOpError(f"{at}: layout lod: the portable export pads it first")
    given = _slots(node.inputs)
    arrays = {
        k: constant_input(given[k], f"{at}: {k}", "the portable export needs it") for k in SLOTS
    }
    w = weights_of(at, arrays)
    if w.precision != "int8":
        raise UnsupportedOpError(
            f"{at}: a bf16 GRU has no standard ONNX form: its sums follow VDPBF16PS's order "
            "(pair by pair, each step rounded, denormals flushed), which ONNX MatMul does not; "
            "export the int8 or the float32 model instead"
        )
    d, oc = w.wh.shape[0], w.wh.shape[1]
    x = given["X"]
    if attrs.layout == "ntc":
        x = op.Transpose(x, perm=[1, 0, 2])
    steps = op.Shape(x, start=0, end=1)  # [1]: T
    batch = op.Shape(x, start=1, end=2)  # [1]: N
    lens = given["lengths"]
    if lens is None:
        lens = op.Expand(steps, batch)
    lens = op.Cast(lens, to=ir.DataType.INT64)
    t_idx = op.Unsqueeze(
        op.Range(op.const(np.int64(0), "i0"), op.Squeeze(steps), op.const(np.int64(1), "i1")),
        op.ints([1], "axis1"),
    )
    mask = op.Unsqueeze(
        op.Less(t_idx, op.Unsqueeze(lens, op.ints([0], "axis0"))), op.ints([2], "axis2")
    )  # [T, N, 1]
    h0 = given["H0"]
    zeros = op.ConstantOfShape(op.Concat(batch, op.ints([oc], "oc"), axis=0))  # [N, OC] of 0
    u, r, c = (slice(i * oc, (i + 1) * oc) for i in range(3))
    ys, lasts = [], []
    for k, reverse in enumerate((False, True) if d == 2 else (attrs.direction == "reverse",)):
        xd = op.ReverseSequence(x, lens, batch_axis=1, time_axis=0) if reverse else x
        if w.wx is None:  # X holds both directions' projected gates
            g = op.Slice(
                xd,
                op.ints([k * 3 * oc], f"g{k}_from"),
                op.ints([(k + 1) * 3 * oc], f"g{k}_to"),
                op.ints([2], "axis2"),
            )
        else:
            g = _int8_product(
                op, op, xd, op.const(w.wx[k], f"wx{k}"), _const(op, w.wx_scale[k], f"wx{k}_scale")
            )
        if h0 is None:
            init = zeros
        elif h0.shape is not None and len(h0.shape) == 2:
            init = h0
        else:
            init = op.Gather(h0, op.const(np.int64(k), f"dir{k}"), axis=0)
        body = _step(op, attrs, w, k, g, mask, (u, r, c))
        true = op.const(np.bool_(True), "true")
        last, y = op.Loop(op.Squeeze(steps), true, init, body=body, _outputs=2)
        y = stacked_scan(op, y, steps, op.Shape(init))  # [T, N, OC]
        if reverse:
            y = op.ReverseSequence(y, lens, batch_axis=1, time_axis=0)
        ys.append(y)
        lasts.append(op.Unsqueeze(last, op.ints([0], "axis0")))
    y = ys[0] if d == 1 else op.Concat(*ys, axis=2)
    if attrs.layout == "ntc":
        y = op.Transpose(y, perm=[1, 0, 2])
    last = lasts[0] if d == 1 else op.Concat(*lasts, axis=0)
    return [y, last][: len(node.outputs)]


def _step(op: OpBuilder, attrs: GRUAttributes, w: QuantizedGRUWeights, k: int, g, mask, gates):
    """The Loop body of direction k: (step, cond, h) -> (cond, h', y_t); a step past a
    sentence's end keeps its h and emits zeros, as the kernel leaves padding zero."""
    body = OpBuilder(f"{op.prefix}/qgru_step{k}", op.taken, op.opset)
    t = body_input(body, "t", ir.DataType.INT64, [])
    cond = body_input(body, "cond", ir.DataType.BOOL, [])
    h = body_input(body, "h", ir.DataType.FLOAT, ["N", w.wh.shape[1]])
    u, r, c = gates
    b, bh = w.bias[k].astype(F32), w.bias_h[k].astype(F32)
    const = functools.partial(_const, op)
    gt = body.Gather(g, t, axis=0)
    wh, sh = w.wh[k], w.wh_scale[k]

    def part(a, cols, hint):
        return _int8_product(
            body,
            op,
            a,
            op.const(np.ascontiguousarray(wh[:, cols]), f"wh{k}_{hint}"),
            const(sh[cols], f"wh{k}_{hint}_scale"),
        )

    def cols(value, s, hint):
        return body.Slice(
            value,
            op.ints([s.start], f"{hint}_from"),
            op.ints([s.stop], f"{hint}_to"),
            op.ints([1], "axis1"),
        )

    gate = functools.partial(_activation, body, op, attrs.gate_activation)
    act = functools.partial(_activation, body, op, attrs.activation)
    hur = part(h, slice(u.start, r.stop), "ur")
    upd = gate(
        body.Add(body.Add(cols(hur, u, "u"), cols(gt, u, "u")), const(b[u] + bh[u], f"b{k}u"))
    )
    rst = gate(
        body.Add(body.Add(cols(hur, r, "r"), cols(gt, r, "r")), const(b[r] + bh[r], f"b{k}r"))
    )
    gc = body.Add(cols(gt, c, "c"), const(b[c], f"b{k}c"))
    if attrs.linear_before_reset:
        hc = part(h, c, "c")
        cand = act(body.Add(gc, body.Mul(rst, body.Add(hc, const(bh[c], f"bh{k}c")))))
    else:
        hc = part(body.Mul(rst, h), c, "c")
        cand = act(body.Add(body.Add(gc, hc), const(bh[c], f"bh{k}c")))
    if attrs.origin_mode:
        new = body.Add(cand, body.Mul(upd, body.Sub(h, cand)))
    else:
        new = body.Add(h, body.Mul(upd, body.Sub(cand, h)))
    m = body.Gather(mask, t, axis=0)
    h_out = body.Where(m, new, h)
    y = body.Where(m, new, const(0, "zero_f"))
    return body_graph(body, [t, cond, h], [body.Identity(cond), h_out, y])


QUANTIZED_FUSION_GRU = OpDef(
    SCHEMA,
    QuantizedFusionGRU,
    {"cpu": functools.partial(_binding, kernels)},  # the cuda engine has no quantized GRU
    lower=lower,
    check=check_inputs,
    recurrence=Recurrence(),
)
OPS = (QUANTIZED_FUSION_GRU,)
