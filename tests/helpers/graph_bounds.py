"""Running error analysis of a whole model (tests/helpers/error_bounds.py, op by op): the model is
evaluated in float64 beside a bound on each float value's error, so that two float32
implementations of it (ours and ONNX Runtime's, Paddle's, MXNet's) may be compared within the
sum of their bounds instead of a fixed tolerance.

- Ops that move or select elements (Transpose, Gather, Reshape, Where, Concat, Slice, the LoD
  reorders) move the bounds with them: the op runs on the bounds as on the values.
- Ops on integers and shapes are exact; a float that decides one (a Cast to int, a comparison)
  is refused unless it is exact, since a rounding could flip it.
- Arithmetic adds its rounding (gamma terms) and passes its inputs' bounds through its slope:
  sums, products and quotients; MatMul, Gemm and Conv as sums of products; activations with the
  library's own error (error_bounds.Activations); softmax and layer normalization through their
  derivatives; GRU, LSTM and RNN through error_bounds' recurrences.

Values come from onnx.reference's op implementations (float64 inputs in, float64 out) and, for
the recurrent ops, which onnx.reference computes without sequence_lens or direction, from the
recurrences here. An op without a rule here is refused by name."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np
import onnx
import onnx_ir as ir
from onnx import numpy_helper
from onnx.reference.ops import load_op

from fusebridge import conventions, ops
from fusebridge.lod_tensor import LoDTensor
from fusebridge.ops.dropout import keep_scale

from .error_bounds import (
    ONNXRUNTIME,
    Activations,
    U,
    activate,
    assert_within,
    gamma,
    gru_bound,
    lstm_bound,
    path_score_bound,
    pool_bound,
    rnn_bound,
    viterbi_margin,
)

Pair = tuple  # (value, bound): the bound is None for an exact value (integers, booleans)

MOVES = {
    "Concat", "Expand", "Flatten", "Gather", "Identity", "Reshape", "Slice", "Split",
    "Squeeze", "Transpose", "Unsqueeze", "ScatterElements", "GatherElements",
    "Tile", "Pad", "LoDToPadded", "PaddedToLoD", "SplitToSequence", "ConcatFromSequence",
    "SequenceAt", "GatherND", "ReduceMax", "ReduceMin", "Max", "Min", "MaxPool",
    "GlobalMaxPool",
}  # fmt: skip
EXACT = {
    "Shape", "ConstantOfShape", "Range", "ReduceProd", "TopK", "Not", "And", "Or", "Size",
    "SequenceLengths", "SequenceLength", "NonZero", "Xor", "Floor",
}  # fmt: skip


def _float(a: object) -> bool:
    """A float tensor, or a sequence of them (SplitToSequence's)."""
    if isinstance(a, list):
        return bool(a) and all(_float(x) for x in a)
    return isinstance(a, np.ndarray) and a.dtype.kind == "f"


def _run_op(node: onnx.NodeProto, inputs: list, opsets: dict[str, int]) -> list:
    """The node on onnx.reference (ours from fusebridge.ops), outputs in order."""
    if node.domain == conventions.DOMAIN:
        cls = next(c for c in ops.reference_ops() if c.__name__ == node.op_type)
    else:
        cls = load_op(node.domain, node.op_type, opsets.get(node.domain, 17))
    params = {"log": lambda *a: None, "opsets": opsets, "verbose": 0, "new_ops": None}
    out = cls(node, params).run(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _our_attributes(node: onnx.NodeProto):
    """A fusebridge node's typed attributes (its schema's defaults filled in)."""
    cls = next(c for c in ops.reference_ops() if c.__name__ == node.op_type)
    params = {"log": lambda *a: None, "opsets": {}, "verbose": 0, "new_ops": None}
    return cls(node, params).attrs()


def _attrs(node: onnx.NodeProto) -> dict:
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _zeros(v):
    return np.zeros_like(v, np.float64) if _float(v) else None


class GraphBounds:
    """bounds(feeds) -> {graph output: (value, bound)} for one model and one library."""

    def __init__(self, model: ir.Model, lib: Activations) -> None:
        self.proto = ir.to_proto(model)
        self.opsets = {o.domain: o.version for o in self.proto.opset_import}
        self.lib = lib

    def bounds(self, feeds: dict, feed_bounds: dict | None = None) -> dict[str, Pair]:
        """feed_bounds: the bounds of feeds that carry error themselves (a state fed back)."""
        env: dict[str, Pair] = {}
        for name, value in feeds.items():
            if isinstance(value, LoDTensor):
                env[conventions.offsets_name(name)] = (np.asarray(value.offsets), None)
                value = value.data
            value = np.asarray(value)
            value = value.astype(np.float64) if value.dtype.kind == "f" else value
            given = (feed_bounds or {}).get(name)
            env[name] = (value, _zeros(value) if given is None else np.asarray(given))
        return self._graph(self.proto.graph, env)

    def _graph(self, graph: onnx.GraphProto, env: dict[str, Pair]) -> dict[str, Pair]:
        env = dict(env)
        for init in graph.initializer:
            a = numpy_helper.to_array(init)
            a = a.astype(np.float64) if a.dtype.kind == "f" else a
            env[init.name] = (a, _zeros(a))
        for node in graph.node:
            ins = [env[i] if i else (None, None) for i in node.input]
            outs = self._node(node, ins, env)
            env.update((o, p) for o, p in zip(node.output, outs) if o)
        return {o.name: env[o.name] for o in graph.output}

    def _loop(self, node: onnx.NodeProto, ins: list[Pair], env: dict) -> list[Pair]:
        """ONNX Loop: the body over (iteration, condition, carried values), its carried
        values' bounds carried with them, its scan outputs stacked (bounds too)."""
        body = _attrs(node)["body"]
        trips = ins[0][0]
        cond = np.array(True) if ins[1][0] is None else ins[1][0]
        carried = list(ins[2:])
        scans: list[list[Pair]] = []
        k = 0
        while (trips is None or k < int(trips)) and bool(np.reshape(cond, -1)[0]):
            names = [i.name for i in body.input]
            inner = {**env, names[0]: (np.array(k, np.int64), None), names[1]: (cond, None)}
            inner.update(zip(names[2:], carried))
            outs = list(self._graph(body, inner).values())
            cond, carried = outs[0][0], outs[1 : 1 + len(carried)]
            scans.append(outs[1 + len(carried) :])
            k += 1
        stacked = [
            (np.stack([s[j][0] for s in scans]), np.stack([s[j][1] for s in scans]))
            for j in range(len(scans[0]) if scans else 0)
        ]
        return carried + stacked

    def _node(self, node: onnx.NodeProto, ins: list[Pair], env: dict) -> list[Pair]:
        values = [v for v, _ in ins]
        where = f"{node.domain or 'ai.onnx'}.{node.op_type} node {node.name!r}"
        if node.op_type == "Constant":
            (v,) = _run_op(node, [], self.opsets)
            v = v.astype(np.float64) if _float(v) else v
            return [(v, _zeros(v))]
        if node.op_type == "Loop":
            return self._loop(node, ins, env)
        if node.op_type == "If":
            (cond, _), attrs = ins[0], _attrs(node)
            branch = attrs[
                "then_branch" if bool(np.asarray(cond).reshape(-1)[0]) else "else_branch"
            ]
            return list(self._graph(branch, env).values())
        if node.op_type == "Cast":
            v, e = ins[0]
            to = onnx.helper.tensor_dtype_to_np_dtype(_attrs(node)["to"])
            if np.dtype(to).kind == "f":  # float32 -> float32 (or from an integer): exact here
                return [
                    (
                        np.asarray(v).astype(np.float64),
                        _zeros(np.asarray(v, np.float64)) if e is None else e,
                    )
                ]
            if e is not None and np.any(e):
                raise ValueError(f"{where}: a float with an error bound cast to {np.dtype(to)}")
            return [(np.asarray(v).astype(to), None)]
        rule = RULES.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
        if rule is not None and any(_float(v) for v in values):
            return rule(self, node, ins)
        if rule is not None:  # on integers (shape arithmetic): exact
            return [(o, None) for o in _run_op(node, values, self.opsets)]
        if node.op_type in EXACT:
            inexact = [k for k, (_, e) in enumerate(ins) if e is not None and np.any(e)]
            # (a comparison's mask of undecided elements counts as rounding too)
            if inexact and node.op_type not in ("Shape", "Size", "ConstantOfShape"):
                raise ValueError(f"{where}: decides on inputs {inexact}, which carry rounding")
            outs = _run_op(node, values, self.opsets)
            return [(o, None if not _float(o) else np.zeros(o.shape)) for o in outs]
        if node.op_type in MOVES:
            outs = _run_op(node, values, self.opsets)
            moved = [e if e is not None else v for v, e in ins]  # integers (indices) as they are
            bounds = _run_op(node, moved, self.opsets)
            return [(o, b if _float(o) else None) for o, b in zip(outs, bounds)]
        raise NotImplementedError(f"{where}: no error rule (tests/helpers/graph_bounds.py)")


# -- arithmetic -----------------------------------------------------------------------------------


def _elementwise(g, node, ins):
    (a, ea), (b, eb) = ins[0], ins[1]
    op = node.op_type
    if op == "Add" or op == "Sub":
        v = a + b if op == "Add" else a - b
        return [(v, ea + eb + U * np.abs(v))]
    if op == "Mul":
        v = a * b
        return [(v, np.abs(a) * eb + np.abs(b) * ea + U * np.abs(v))]
    v = a / b  # Div
    return [(v, (ea + np.abs(v) * eb) / np.abs(b) + U * np.abs(v))]


def _matmul(a, ea, b, eb, alpha=1.0):
    k = a.shape[-1]
    v = alpha * (a @ b)
    e = abs(alpha) * (np.abs(a) @ eb + ea @ np.abs(b) + gamma(k + 1) * (np.abs(a) @ np.abs(b)))
    return v, e


def _matmul_rule(g, node, ins):
    (a, ea), (b, eb) = ins[:2]
    attrs = _attrs(node)
    if attrs.get("transA"):
        a, ea = np.swapaxes(a, -1, -2), np.swapaxes(ea, -1, -2)
    if attrs.get("transB"):
        b, eb = np.swapaxes(b, -1, -2), np.swapaxes(eb, -1, -2)
    v, e = _matmul(a, ea, b, eb, attrs.get("alpha", 1.0))
    if node.op_type == "Gemm" and len(ins) > 2 and ins[2][0] is not None:
        c, ec = ins[2]
        beta = attrs.get("beta", 1.0)
        v = v + beta * c
        e = e + abs(beta) * ec + U * np.abs(v)
    return [(v, e)]


def _conv_rule(g, node, ins):
    (x, ex), (w, ew) = ins[:2]
    attrs = {k: v for k, v in _attrs(node).items() if k != "activation"}
    plain = onnx.helper.make_node("Conv", ["x", "w"], ["y"], **attrs)

    def conv(a, b):
        return _run_op(plain, [a, b], g.opsets)[0]

    k = w.shape[1] * int(np.prod(w.shape[2:])) + 1  # products per output, and the bias
    v = conv(x, w)
    e = conv(np.abs(x), ew) + conv(ex, np.abs(w)) + gamma(k) * conv(np.abs(x), np.abs(w))
    if len(ins) > 2 and ins[2][0] is not None:
        b = ins[2][0].reshape(1, -1, *([1] * (x.ndim - 2)))
        v, e = v + b, e + gamma(k) * np.abs(b)
    if node.op_type == "FusedConv":  # com.microsoft: Conv + an activation
        kind = _attrs(node).get("activation", b"").decode().lower()
        v, e = activate(kind or "identity", v, e, g.lib)
    return [(v, e)]


def _activation_rule(g, node, ins):
    (z, ez) = ins[0]
    op = node.op_type
    if op == "LeakyRelu":
        alpha = _attrs(node).get("alpha", 0.01)
        v = np.where(z >= 0, z, alpha * z)
        return [(v, ez * max(1.0, abs(alpha)) + U * np.abs(np.minimum(v, 0)))]
    if op == "HardSigmoid":  # max(0, min(1, alpha z + beta)): a product and a sum, clamped
        alpha, beta = _attrs(node).get("alpha", 0.2), _attrs(node).get("beta", 0.5)
        v = np.clip(alpha * z + beta, 0, 1)
        return [(v, abs(alpha) * ez + gamma(2) * (np.abs(alpha * z) + abs(beta)))]
    return [activate(op.lower(), z, ez, g.lib)]


# f and f' of the smooth unary ops (every f' here is monotone, or peaks at 0 as softsign's).
_UNARY = {
    "Exp": (np.exp, np.exp),
    "Log": (np.log, lambda z: 1 / z),
    "Sqrt": (np.sqrt, lambda z: 0.5 / np.sqrt(z)),
    "Reciprocal": (lambda z: 1 / z, lambda z: -1 / z**2),
    "Softplus": (lambda z: np.logaddexp(0, z), lambda z: 1 / (1 + np.exp(-z))),
    "Softsign": (lambda z: z / (1 + np.abs(z)), lambda z: 1 / (1 + np.abs(z)) ** 2),
}


def _sign_rule(g, node, ins):
    """Neg and Abs: exact, the error unchanged."""
    (z, ez) = ins[0]
    return [(-z if node.op_type == "Neg" else np.abs(z), ez)]


def _compare_rule(g, node, ins):
    """A comparison of values that carry rounding: its bound is the mask of the elements whose
    operands lie within their errors of each other (where another implementation may decide
    the other way); Where takes both branches there."""
    (a, ea), (b, eb) = ins[:2]
    (v,) = _run_op(node, [a, b], g.opsets)
    if ea is None and eb is None:
        return [(v, None)]
    error = (0 if ea is None else ea) + (0 if eb is None else eb)
    return [(v, (np.abs(a - b) <= error) & (error > 0))]


def _where_rule(g, node, ins):
    """Where: the chosen branch's error; where the condition may go either way (its bound, a
    mask), the other branch's distance and the larger error of the two."""
    (cond, mask), (x, ex), (y, ey) = ins
    (v,) = _run_op(node, [cond, x, y], g.opsets)
    if not _float(v):
        return [(v, None)]
    ex, ey = (np.zeros(np.shape(a)) if e is None else e for a, e in ((x, ex), (y, ey)))
    bound = np.where(cond, ex, ey)
    if mask is not None:
        bound = np.where(mask, np.maximum(ex, ey) + np.abs(x - y), bound)
    return [(v, bound)]


def _unary_rule(g, node, ins):
    """A smooth unary function: its argument's error through its largest slope over the
    argument's interval, and the library's own error."""
    (z, ez) = ins[0]
    if node.op_type in ("Elu", "Selu"):
        a = _attrs(node).get("alpha", 1.0 if node.op_type == "Elu" else 1.67326319217681884765625)
        c = 1.0 if node.op_type == "Elu" else _attrs(node).get("gamma", 1.05070102214813232421875)
        f = lambda v: c * np.where(v > 0, v, a * np.expm1(v))  # noqa: E731
        df = lambda v: c * np.where(v > 0, 1.0, a * np.exp(v))  # noqa: E731
    else:
        f, df = _UNARY[node.op_type]
    with np.errstate(divide="ignore", invalid="ignore"):
        points = [z - ez, z, z + ez, np.where(np.abs(z) <= ez, 0.0, z)]
        slope = np.nanmax([np.abs(df(q)) for q in points], axis=0)
    v = f(z)
    return [(v, slope * ez + g.lib.rel * np.abs(v) + g.lib.abs)]


def _reduce_rule(g, node, ins):
    """ReduceSum and ReduceMean (and Sum of several inputs): the summed errors, and the sum's
    rounding over its n terms (and the mean's division)."""
    if node.op_type == "Sum":
        values = [v for v, _ in ins]
        v = sum(values)
        n = len(values)
        return [(v, sum(e for _, e in ins) + gamma(n - 1) * sum(np.abs(x) for x in values))]
    (x, ex) = ins[0]
    rest = [p[0] for p in ins[1:]]
    (v,) = _run_op(node, [x, *rest], g.opsets)
    summed = onnx.helper.make_node("ReduceSum", list(node.input), ["y"], **_attrs(node))
    opsets = {**g.opsets, "": max(g.opsets.get("", 13), 13)}
    n = int(np.max(_run_op(summed, [np.ones_like(x), *rest], opsets)[0]))
    (abs_sum,) = _run_op(summed, [np.abs(x), *rest], opsets)
    (err_sum,) = _run_op(summed, [ex, *rest], opsets)
    scale = 1.0 if node.op_type == "ReduceSum" else 1.0 / n
    return [(v, scale * (err_sum + gamma(n + 1) * abs_sum))]


def _prelu_rule(g, node, ins):
    (z, ez), (slope, _) = ins
    v = np.where(z >= 0, z, slope * z)
    return [(v, np.where(z >= 0, ez, np.abs(slope) * ez + U * np.abs(v)))]


def _log_softmax_rule(g, node, ins):
    """z - max - log(sum(exp(z - max))): dy = dz - sum(p dz); the sum of n exps (each within
    the library's error) lies in [1, n], so its log's error is about its relative error."""
    (z, ez) = ins[0]
    axis = _attrs(node).get("axis", -1)
    shifted = z - z.max(axis=axis, keepdims=True)
    total = np.exp(shifted).sum(axis=axis, keepdims=True)
    y, p = shifted - np.log(total), np.exp(shifted) / total
    n = z.shape[axis]
    through = ez + (p * ez).sum(axis=axis, keepdims=True)
    rounding = 2 * g.lib.rel + gamma(n + 2) + g.lib.rel * np.abs(np.log(total)) + g.lib.abs
    return [(y, through + rounding + gamma(2) * (np.abs(shifted) + np.abs(y)))]


def _softmax_rule(g, node, ins):
    (z, ez) = ins[0]
    axis = _attrs(node).get("axis", -1)
    s = np.exp(z - z.max(axis=axis, keepdims=True))
    y = s / s.sum(axis=axis, keepdims=True)
    n = z.shape[axis]
    # dy_i = y_i (dz_i - sum_j y_j dz_j); exp's own error, the sum's and the division's.
    e = y * (ez + (y * ez).sum(axis=axis, keepdims=True))
    return [(y, e + y * (2 * g.lib.rel + gamma(n) + 2 * U) + g.lib.abs)]


def _layer_norm_rule(g, node, ins):
    (x, ex), (scale, _) = ins[:2]
    bias = ins[2][0] if len(ins) > 2 and ins[2][0] is not None else 0.0
    attrs = _attrs(node)
    axis, eps = attrs.get("axis", -1), attrs.get("epsilon", 1e-5)
    axes = tuple(range(axis % x.ndim, x.ndim))
    n = int(np.prod([x.shape[a] for a in axes]))
    mean = x.mean(axis=axes, keepdims=True)
    sigma = np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    xhat = (x - mean) / sigma
    y = xhat * scale + bias
    # The normalization's derivative passes ex on; the sums of the mean and the variance, the
    # square root and the division round in it (relative to |x - mean| + |mean|).
    through = (ex + ex.mean(axis=axes, keepdims=True)) / sigma
    through = through + np.abs(xhat) * (np.abs(xhat) * ex).mean(axis=axes, keepdims=True) / sigma
    rounding = gamma(2 * n + 8) * (np.abs(x - mean) + np.abs(mean)) / sigma
    e = np.abs(scale) * (through + rounding) + gamma(2) * (np.abs(xhat * scale) + np.abs(bias))
    return [(y, e)]


def _dropout_rule(g, node, ins):
    """Ours: at inference (is_test) the identity, or a scale by 1 - p; in training (and
    DropoutGrad) the kept elements scaled, by Philox's bits (our reference op's): one product
    each, and nothing for a dropped one."""
    attrs = _our_attributes(node)
    (x, ex) = ins[0]
    if node.op_type == "Dropout" and attrs.is_test:
        scale = attrs.inference_scale
        return [(x * scale, ex * scale + (U * np.abs(x * scale) if scale != 1 else 0))]
    values = _run_op(node, [None if v is None else v for v, _ in ins], g.opsets)
    y = values[0].astype(np.float64)
    scale = keep_scale(attrs.p, attrs.mode)
    dropped = (y == 0) & (x != 0)
    bound = np.where(dropped, 0.0, ex * scale + U * np.abs(y))
    return [(y, bound), *((m, None) for m in values[1:])]


def _crf_rule(g, node, ins):
    """The Viterbi path: integers, exact in every implementation whose path scores stay within
    their bounds, if no other path comes closer to the best than twice the bound (both
    implementations' errors): a sentence that does is refused as a near tie."""
    (emission, e), (offsets, _), (transition, _) = ins[:3]
    margin = viterbi_margin(emission, transition, offsets)
    bound = path_score_bound(emission, transition, offsets, e)
    ties = np.flatnonzero(margin <= 2 * bound)
    if len(ties):
        raise AssertionError(
            f"CRFDecoding {node.name!r}: sentences {ties.tolist()} have a second path within "
            f"{(2 * bound[ties]).tolist()} of the best: their tags may differ between runtimes"
        )
    return [(o, None) for o in _run_op(node, [p[0] for p in ins], g.opsets)]


def _sequence_pool_rule(g, node, ins):
    (x, ex), (offsets, _) = ins
    pooltype = _attrs(node).get("pooltype", b"AVERAGE").decode()
    (v,) = _run_op(node, [x, offsets], g.opsets)
    return [(v.astype(np.float64), pool_bound(x, offsets, pooltype, ex, U))]  # computed in float32


# -- recurrences ---------------------------------------------------------------------------------
DIRECTIONS = {"forward": (False,), "reverse": (True,), "bidirectional": (False, True)}


def _stacked(sequences) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Sequences [(xs [t, I], their bounds)] one after the other, as error_bounds' recurrences
    take them, and their lengths."""
    lengths = [len(xs) for xs, _ in sequences]
    width = sequences[0][0].shape[-1] if sequences else 0

    def stack(k: int) -> np.ndarray:
        return np.concatenate([q[k] for q in sequences]) if sequences else np.zeros((0, width))

    return stack(0), stack(1), lengths


def _last(outs, lengths, reverses, h0, h: int) -> tuple[np.ndarray, np.ndarray]:
    """The final state [D, N, H] and its bound from each direction's (out, bound) [words, H]:
    a sequence's last step (its first, reversed); h0 (exact, as fed) for an empty one."""
    d, n = len(reverses), len(lengths)
    last = np.zeros((d, n, h)) if h0 is None else np.reshape(h0, (d, n, h)).astype(np.float64)
    bound = np.zeros((d, n, h))
    ends = np.cumsum(lengths)
    for k, (out, e) in enumerate(outs):
        for i, m in enumerate(lengths):
            if m:
                row = ends[i] - m if reverses[k] else ends[i] - 1
                last[k, i], bound[k, i] = out[row], e[row]
    return last, bound


def _onnx_recurrence(g, node, ins):
    """ONNX GRU, LSTM and RNN, as ONNX defines them (gates z r h; i o f c; biases Wb + Rb;
    peepholes P = i o f; layout 1: batch first)."""
    attrs = _attrs(node)
    batch_first = attrs.get("layout", 0) == 1
    (x, ex), (w, _), (r, _) = ins[:3]
    bias, lens, h0, c0, peep = ([p[0] for p in ins[3:]] + [None] * 5)[:5]
    if "clip" in attrs and node.op_type != "GRU":
        raise NotImplementedError(f"{node.op_type} {node.name!r}: clip")
    if batch_first:
        x, ex = x.transpose(1, 0, 2), ex.transpose(1, 0, 2)
        h0, c0 = (None if a is None else a.transpose(1, 0, 2) for a in (h0, c0))
    t_max, n, _ = x.shape
    d, h = w.shape[0], r.shape[-1]
    op = node.op_type
    bias = np.zeros((d, 2 * {"GRU": 3, "LSTM": 4, "RNN": 1}[op] * h)) if bias is None else bias
    lens = np.full(n, t_max) if lens is None else lens
    acts = [a.decode().lower() for a in attrs.get("activations", [])]
    reverses = DIRECTIONS[attrs.get("direction", b"forward").decode()]
    xs, exs, lengths = _stacked([(x[: int(m), i], ex[: int(m), i]) for i, m in enumerate(lens)])
    outs, cells = [], []  # each direction's (hidden, bound) [words, H]; the LSTM's cell too
    for k, reverse in enumerate(reverses):
        wx, wh, b = w[k].T, r[k].T, bias[k]
        start = None if h0 is None else h0[k]
        common = dict(lengths=lengths, reverse=reverse, lib=g.lib)
        if op == "RNN":
            f = (acts[k : k + 1] or ["tanh"])[0]
            outs.append(
                rnn_bound(xs, wx, wh, b[:h] + b[h:], h0=start, activation=f, x_error=exs, **common)
            )
        elif op == "GRU":  # z r h is the canonical update, reset, candidate
            f, g_ = acts[2 * k : 2 * k + 2] or ["sigmoid", "tanh"]
            outs.append(
                gru_bound(
                    xs, wx, wh, b[: 3 * h], bias_h=b[3 * h :], h0=start, activation=g_,
                    gate_activation=f, x_error=exs, clip=attrs.get("clip"),
                    linear_before_reset=bool(attrs.get("linear_before_reset", 0)), **common,
                )
            )  # fmt: skip
        else:  # LSTM: i o f c -> lstm_bound's c i f o, the input projected first
            perm = np.concatenate([np.arange(q * h, (q + 1) * h) for q in (3, 0, 2, 1)])
            both = (b[: 4 * h] + b[4 * h :])[perm]
            gx, egx = _matmul(xs, exs, wx[:, perm], np.zeros_like(wx[:, perm]))
            egx = egx + gamma(2) * (np.abs(b[: 4 * h]) + np.abs(b[4 * h :]))[perm]
            tail = np.zeros(0) if peep is None else peep[k][np.r_[0:h, 2 * h : 3 * h, h : 2 * h]]
            f, g_, h_ = acts[3 * k : 3 * k + 3] or ["sigmoid", "tanh", "tanh"]
            state, e_state = lstm_bound(
                gx + both, wh[:, perm], np.concatenate([np.zeros(4 * h), tail]), start,
                None if c0 is None else c0[k], use_peepholes=peep is not None,
                gate_activation=f, cell_activation=h_, candidate_activation=g_,
                x_error=egx, with_cell=True, **common,
            )  # fmt: skip
            outs.append((state[:, :h], e_state[:, :h]))
            cells.append((state[:, h:], e_state[:, h:]))
    y, ey = np.zeros((t_max, d, n, h)), np.zeros((t_max, d, n, h))
    begins = np.concatenate([[0], np.cumsum(lengths)])
    for k, (out, e) in enumerate(outs):
        for i, m in enumerate(lengths):
            y[:m, k, i], ey[:m, k, i] = out[begins[i] : begins[i] + m], e[begins[i] : begins[i] + m]
    last, elast = _last(outs, lengths, reverses, h0, h)
    if batch_first:
        y, ey = y.transpose(2, 0, 1, 3), ey.transpose(2, 0, 1, 3)
        last, elast = last.transpose(1, 0, 2), elast.transpose(1, 0, 2)
    cell = _last(cells, lengths, reverses, c0, h) if cells else (None, None)  # Y_c
    if batch_first and cells:
        cell = tuple(a.transpose(1, 0, 2) for a in cell)
    return [(y, ey), (last, elast), cell][: len(node.output)]


def _fusion_gru_rule(g, node, ins):
    """Ours: FusionGRU and GRU (X projected already), LoD or padded."""
    attrs = _our_attributes(node)
    values = [p[0] for p in ins] + [None] * 7
    (x, ex), lengths = ins[0], values[1]
    if node.op_type == "FusionGRU":
        wx, wh, bias, bias_h, h0 = values[2:7]
    else:
        wx, (wh, bias, bias_h, h0) = None, values[2:6]
    reverses = DIRECTIONS[attrs.direction]
    d, h = len(reverses), wh.shape[-2]
    if attrs.layout == "lod":
        spans = [slice(s, t) for s, t in itertools.pairwise(lengths)]
        sequences = [(x[span], ex[span]) for span in spans]
    else:
        seq = (x, ex) if attrs.layout == "ntc" else (x.transpose(1, 0, 2), ex.transpose(1, 0, 2))
        lens = np.full(len(seq[0]), seq[0].shape[1]) if lengths is None else lengths
        sequences = [(seq[0][i, : int(m)], seq[1][i, : int(m)]) for i, m in enumerate(lens)]
    xs, exs, counts = _stacked(sequences)

    def per(a, k: int, width: int):
        return None if a is None else np.reshape(a, (d, -1, width))[k]

    outs = [
        gru_bound(
            xs,
            per(wx, k, 3 * h),
            per(wh, k, 3 * h),
            None if bias is None else per(bias, k, 3 * h)[0],
            bias_h=None if bias_h is None else per(bias_h, k, 3 * h)[0],
            h0=per(h0, k, h),
            lengths=counts,
            reverse=reverse,
            linear_before_reset=bool(attrs.linear_before_reset),
            origin_mode=bool(attrs.origin_mode),
            activation=attrs.activation,
            gate_activation=attrs.gate_activation,
            lib=g.lib,
            x_error=exs,
        )
        for k, reverse in enumerate(reverses)
    ]
    y, ey = np.zeros((*x.shape[:-1], d * h)), np.zeros((*x.shape[:-1], d * h))
    begins = np.concatenate([[0], np.cumsum(counts)])
    for k, (out, e) in enumerate(outs):
        cols = slice(k * h, (k + 1) * h)
        for i, m in enumerate(counts):
            rows = slice(begins[i], begins[i] + m)
            if attrs.layout == "lod":
                at = (spans[i], cols)
            else:
                at = (i, slice(0, m), cols) if attrs.layout == "ntc" else (slice(0, m), i, cols)
            y[at], ey[at] = out[rows], e[rows]
    return [(y, ey), _last(outs, counts, reverses, h0, h)][: len(node.output)]


_OURS, _CONTRIB = conventions.DOMAIN, "com.microsoft"
# (domain, op type) -> rule(graph bounds, node, [(value, bound)]) -> [(value, bound)]
RULES: dict[tuple[str, str], Callable] = {
    **{("", op): _elementwise for op in ("Add", "Sub", "Mul", "Div")},
    **{
        ("", op): _activation_rule
        for op in ("Relu", "LeakyRelu", "Sigmoid", "Tanh", "Erf", "HardSigmoid")
    },
    **{("", op): _onnx_recurrence for op in ("GRU", "LSTM", "RNN")},
    ("", "MatMul"): _matmul_rule,
    ("", "Gemm"): _matmul_rule,
    ("", "Conv"): _conv_rule,
    ("", "Softmax"): _softmax_rule,
    **{("", op): _unary_rule for op in (*_UNARY, "Elu", "Selu")},
    ("", "PRelu"): _prelu_rule,
    ("", "LogSoftmax"): _log_softmax_rule,
    **{("", op): _reduce_rule for op in ("ReduceSum", "ReduceMean", "Sum")},
    **{("", op): _sign_rule for op in ("Neg", "Abs")},
    **{
        ("", op): _compare_rule
        for op in ("Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Equal")
    },
    ("", "Where"): _where_rule,
    ("", "LayerNormalization"): _layer_norm_rule,
    (_CONTRIB, "FusedMatMul"): _matmul_rule,
    (_CONTRIB, "FusedConv"): _conv_rule,
    (_OURS, "Dropout"): _dropout_rule,
    (_OURS, "DropoutGrad"): _dropout_rule,
    (_OURS, "SequencePool"): _sequence_pool_rule,
    (_OURS, "FusionGRU"): _fusion_gru_rule,
    (_OURS, "GRU"): _fusion_gru_rule,
    (_OURS, "CRFDecoding"): _crf_rule,
}


def _clip_rule(g, node, ins):
    """Clip never moves a value further from the exact one's clip: its bound stays."""
    (out,) = _run_op(node, [p[0] for p in ins], g.opsets)
    return [(out, ins[0][1])]


def _average_pool_rule(g, node, ins):
    """AveragePool (and its global form): a mean of n = the window's elements, as
    _reduce_rule's: the mean of the errors and the sum's rounding."""
    (x, ex) = ins[0]

    def pool(a):
        return _run_op(node, [a], g.opsets)[0]

    attrs = _attrs(node)
    n = (
        int(np.prod(attrs["kernel_shape"]))
        if "kernel_shape" in attrs
        else int(np.prod(x.shape[2:]))
    )
    return [(pool(x), pool(ex) + gamma(n + 1) * pool(np.abs(x)))]


def _batch_norm_rule(g, node, ins):
    """Inference batch normalization, y = x a + c with a = scale / sqrt(var + eps) and
    c = bias - mean a, however a library orders it ((x - mean) a + bias, or folded into the
    convolution before it): x's error through |a|, and a few roundings of each term."""
    (x, ex), (scale, _), (bias, _), (mean, _), (var, _) = ins[:5]
    shape = (1, -1) + (1,) * (x.ndim - 2)
    eps = _attrs(node).get("epsilon", 1e-5)
    a = (scale / np.sqrt(var + eps)).reshape(shape)
    c, m = bias.reshape(shape), mean.reshape(shape)
    y = (x - m) * a + c
    terms = np.abs(x * a) + np.abs(m * a) + np.abs(c) + np.abs(y)
    return [(y, np.abs(a) * ex + gamma(6) * terms)]


def _reduce_prod_rule(g, node, ins):
    """ReduceProd of floats: the factors' relative errors add (summed over the same axes as
    the product), and each of the n - 1 products rounds once (factors here are kept away
    from zero)."""
    (x, ex) = ins[0]
    (v,) = _run_op(node, [x], g.opsets)
    attrs = _attrs(node)
    axes = tuple(attrs["axes"]) if "axes" in attrs else None
    with np.errstate(divide="ignore", invalid="ignore"):
        relative = np.nan_to_num(ex / np.abs(x), posinf=np.inf)
    summed = relative.sum(axis=axes, keepdims=bool(attrs.get("keepdims", 1)))
    factors = x.size // max(np.size(v), 1)
    return [(v, np.abs(v) * (summed + gamma(factors)))]


def _pow_rule(g, node, ins):
    """a ** b (a > 0 where b is not an integer): both errors through the partial derivatives,
    and the library's pow within two roundings."""
    (a, ea), (b, eb) = ins
    v = np.power(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        da = np.nan_to_num(np.abs(b * np.power(a, b - 1)))
        db = np.nan_to_num(np.abs(v * np.log(np.abs(a))))
    return [(v, da * ea + db * (0 if eb is None else eb) + gamma(2) * np.abs(v))]


def _argmax_rule(g, node, ins):
    """ArgMax of values that carry rounding: exact in every implementation if no other
    element comes within twice the bounds (both implementations' errors) of the largest; a
    slice where one does is refused as a near tie, as _crf_rule refuses one."""
    (x, ex) = ins[0]
    (index,) = _run_op(node, [x], g.opsets)
    attrs = _attrs(node)
    axis = attrs.get("axis", 0) % x.ndim
    at = index if attrs.get("keepdims", 1) else np.expand_dims(index, axis)
    best, best_error = np.take_along_axis(x, at, axis), np.take_along_axis(ex, at, axis)
    others = np.ones(x.shape, bool)
    np.put_along_axis(others, at, False, axis)
    near = others & (best - x <= 2 * (ex + best_error))
    if np.any(near):
        raise AssertionError(
            f"ArgMax {node.name!r}: {int(near.sum())} elements lie within twice the error "
            "bounds of the largest: the index may differ between runtimes"
        )
    return [(index, None)]


RULES["", "Clip"] = _clip_rule
RULES.update(
    {
        ("", "ArgMax"): _argmax_rule,
        ("", "AveragePool"): _average_pool_rule,
        ("", "GlobalAveragePool"): _average_pool_rule,
        ("", "BatchNormalization"): _batch_norm_rule,
        ("", "Pow"): _pow_rule,
        ("", "ReduceProd"): _reduce_prod_rule,
    }
)

# A Session runs standard ops in ONNX Runtime and ours on our kernels: its activations are
# within the looser of the two, ONNX Runtime's (error_bounds.LIBRARY).
SESSION = ONNXRUNTIME


def output_bounds(model: ir.Model, feeds: dict, libs: Sequence[Activations]) -> dict:
    """Per graph output: the sum of the libraries' error bounds (how far two implementations,
    one with each library's activations, may differ)."""
    per_lib = [GraphBounds(model, lib).bounds(feeds) for lib in libs]
    return {
        name: None if per_lib[0][name][1] is None else sum(b[name][1] for b in per_lib)
        for name in per_lib[0]
    }


def check_outputs(got: dict, want: dict, bounds: dict, where: str = "") -> None:
    """Each output in `want` equals `got`'s within its bound (LoDTensors by their data)."""
    assert sorted(got) == sorted(want), f"{where}: outputs {sorted(got)}, expected {sorted(want)}"
    for name, value in want.items():
        data = lambda v: v.data if isinstance(v, LoDTensor) else v  # noqa: E731
        assert_within(data(got[name]), data(value), bounds[name], f"{where} output {name!r}")


def assert_outputs_within(
    model: ir.Model,
    feeds: dict,
    got: dict,
    want: dict,
    libs: Sequence[Activations] = (SESSION, ONNXRUNTIME),
    where: str = "",
) -> None:
    """check_outputs with the bounds of `model` on `feeds` for `libs`."""
    check_outputs(got, want, output_bounds(model, feeds, libs), where)
