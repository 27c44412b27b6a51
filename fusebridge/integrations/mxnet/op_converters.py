"""One converter per MXNet op type: MXNet op -> ONNX ops, or fusebridge ops (RNN gru ->
FusionGRU, Dropout). Each takes the SymbolConverter (load.py) and the node, and defines the
node's outputs. Shapes are not known at load time, so every reorder is built rank-agnostic from
Shape slices (MXNet binds shapes only when it runs)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from fusebridge import ir as fir
from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.mxnet.symbol import MXNode
from fusebridge.kernels import mxnet_rnn_params_to_canonical

CONVERTERS: dict[str, Callable] = {}
_INT64_MAX = np.iinfo(np.int64).max


def converter(*op_types: str) -> Callable:
    def register(fn: Callable) -> Callable:
        for t in op_types:
            CONVERTERS[t] = fn
        return fn

    return register


def _shape(cx, x: ir.Value, start: int, end: int | None = None) -> ir.Value:
    attrs = {"start": start} if end is None else {"start": start, "end": end}
    return cx.add("Shape", [x], attrs, dtype=ir.DataType.INT64)


def _transpose_last_two(cx, x: ir.Value) -> ir.Value:
    """x [..., m, n] -> [..., n, m] for any rank >= 2 (the rank is not known at load time)."""
    m, n = _shape(cx, x, -2, -1), _shape(cx, x, -1)
    three = cx.add(
        "Reshape", [x, cx.add("Concat", [cx.ints([-1], "minus_one"), m, n], {"axis": 0})]
    )
    swapped = cx.add("Transpose", [three], {"perm": [0, 2, 1]})
    back = cx.add("Concat", [_shape(cx, x, 0, -2), n, m], {"axis": 0})
    return cx.add("Reshape", [swapped, back])


def _swap_axes(cx, x: ir.Value, a: int, b: int) -> ir.Value:
    """MXNet SwapAxis for non-negative axes a < b, rank-agnostic: x as [A, s_a, B, s_b, C]
    (products of the dims between), Transpose [0, 3, 2, 1, 4], then the swapped shape."""
    if a == b:
        return cx.add("Identity", [x])

    def prod(start: int, end: int | None) -> ir.Value:
        return cx.add(
            "ReduceProd",
            [cx.add("Concat", [cx.ints([1], "one"), _shape(cx, x, start, end)], {"axis": 0})],
            {"keepdims": 1},
        )

    pieces = [prod(0, a), _shape(cx, x, a, a + 1), prod(a + 1, b), _shape(cx, x, b, b + 1)]
    five = cx.add("Reshape", [x, cx.add("Concat", [*pieces, prod(b + 1, None)], {"axis": 0})])
    swapped = cx.add("Transpose", [five], {"perm": [0, 3, 2, 1, 4]})
    target = [
        _shape(cx, x, 0, a),
        _shape(cx, x, b, b + 1),
        _shape(cx, x, a + 1, b),
        _shape(cx, x, a, a + 1),
        _shape(cx, x, b + 1),
    ]
    return cx.add("Reshape", [swapped, cx.add("Concat", target, {"axis": 0})])


# -- variables of no data, identities -----------------------------------------------------------
@converter("_copy", "identity", "BlockGrad", "stop_gradient", "_copyto")
def _identity(cx, node: MXNode) -> None:
    x = cx.input(0)
    cx.define(cx.add("Identity", [x]), known=[cx.array(x)])


@converter("_zeros", "_ones")
def _filled(cx, node: MXNode) -> None:
    shape = cx.attr("shape", "ints")
    if all(d > 0 for d in shape):
        dtype = np.dtype(cx.attr("dtype", "str", "float32"))
        fill = np.zeros if node.op == "_zeros" else np.ones
        cx.define(cx.const(fill(shape, dtype), node.name))
    elif node.op == "_ones":
        raise UnsupportedOpError(f"{cx.where()}: shape {shape} has dims inferred at run time")
    else:  # gluon's RNN begin state (L*D, 0, H): the batch is known only when it runs
        cx.zero_states.add((cx.symbol.nodes.index(node), 0))


# -- elementwise ------------------------------------------------------------------------------
# MXNet's names (and aliases) of the elementwise binary ops.
_BINARY = {
    "Add": ("broadcast_add", "broadcast_plus", "elemwise_add", "_plus", "_Plus", "_add"),
    "Sub": ("broadcast_sub", "broadcast_minus", "elemwise_sub", "_minus", "_Minus", "_sub"),
    "Mul": ("broadcast_mul", "elemwise_mul", "_mul", "_Mul"),
    "Div": ("broadcast_div", "elemwise_div", "_div", "_Div"),
    "Max": ("broadcast_maximum", "_maximum", "_Maximum"),
    "Min": ("broadcast_minimum", "_minimum", "_Minimum"),
    "Pow": ("broadcast_power", "_power", "_Power"),
}


def _binary(onnx_op: str) -> Callable:
    def convert(cx, node: MXNode) -> None:
        cx.define(cx.add(onnx_op, [cx.input(0), cx.input(1)]))

    return convert


for _op, _names in _BINARY.items():
    converter(*_names)(_binary(_op))


def _scalar_op(onnx_op: str, reverse: bool = False) -> Callable:
    def convert(cx, node: MXNode) -> None:
        x = cx.input(0)
        dtype = x.dtype.numpy() if x.dtype is not None else np.float32
        s = cx.const(np.asarray(cx.attr("scalar", "float"), dtype), f"{node.name}/scalar")
        cx.define(cx.add(onnx_op, [s, x] if reverse else [x, s]))

    return convert


for _name, _op in (("plus", "Add"), ("minus", "Sub"), ("mul", "Mul"), ("div", "Div")):
    converter(f"_{_name}_scalar")(_scalar_op(_op))
converter("_power_scalar")(_scalar_op("Pow"))
converter("_rminus_scalar")(_scalar_op("Sub", reverse=True))
converter("_rdiv_scalar")(_scalar_op("Div", reverse=True))
converter("_rpower_scalar")(_scalar_op("Pow", reverse=True))


_ACTIVATIONS = {
    "relu": "Relu",
    "sigmoid": "Sigmoid",
    "tanh": "Tanh",
    "softrelu": "Softplus",
    "softsign": "Softsign",
}


@converter("Activation")
def _activation(cx, node: MXNode) -> None:
    act = cx.attr("act_type", "str")
    if act not in _ACTIVATIONS:
        raise UnsupportedOpError(
            f"{cx.where()}: act_type {act!r}, expected one of {sorted(_ACTIVATIONS)}"
        )
    cx.define(cx.add(_ACTIVATIONS[act], [cx.input(0)]))


for _name, _op in (
    ("relu", "Relu"),
    ("sigmoid", "Sigmoid"),
    ("tanh", "Tanh"),
    ("exp", "Exp"),
    ("log", "Log"),
    ("sqrt", "Sqrt"),
    ("abs", "Abs"),
    ("negative", "Neg"),
):
    converter(_name)(lambda cx, node, _op=_op: cx.define(cx.add(_op, [cx.input(0)])))


@converter("LeakyReLU")
def _leaky_relu(cx, node: MXNode) -> None:
    act = cx.attr("act_type", "str", "leaky")
    x = cx.input(0)
    if act == "leaky":
        out = cx.add("LeakyRelu", [x], {"alpha": cx.attr("slope", "float", 0.25)})
    elif act == "elu":
        out = cx.add("Elu", [x], {"alpha": cx.attr("slope", "float", 0.25)})
    elif act == "selu":
        out = cx.add("Selu", [x])
    elif act == "prelu":
        # gamma [C] scales channel axis 1 (MXNet's PReLU), so it is broadcast as [C, 1, ...].
        gamma = cx.array(cx.input(1))
        if gamma is None:
            raise UnsupportedOpError(f"{cx.where()}: prelu's gamma must be a parameter")
        out = cx.add("PRelu", [x, cx.const(gamma.reshape(-1, 1), f"{node.name}/gamma")])
    elif act == "rrelu":  # inference: the mean of the random slope
        slope = (
            cx.attr("lower_bound", "float", 0.125) + cx.attr("upper_bound", "float", 0.334)
        ) / 2
        out = cx.add("LeakyRelu", [x], {"alpha": slope})
    elif act == "gelu":  # x * (1 + erf(x / sqrt 2)) / 2
        half = cx.const(np.float32(0.5), f"{node.name}/half")
        root2 = cx.const(np.float32(np.sqrt(2.0)), f"{node.name}/sqrt2")
        one = cx.const(np.float32(1.0), f"{node.name}/one")
        erf = cx.add("Erf", [cx.add("Div", [x, root2])])
        out = cx.add("Mul", [cx.add("Mul", [x, half]), cx.add("Add", [erf, one])])
    else:
        raise UnsupportedOpError(f"{cx.where()}: act_type {act!r} not supported")
    cx.define(out)


@converter("softmax", "log_softmax")
def _softmax(cx, node: MXNode) -> None:
    if cx.attr("use_length", "bool", False):
        raise UnsupportedOpError(f"{cx.where()}: use_length is not supported")
    x = cx.input(0)
    temperature = cx.attr("temperature", "float?", None)
    if temperature not in (None, 1.0):
        x = cx.add("Div", [x, cx.const(np.float32(temperature), f"{node.name}/temperature")])
    op = "Softmax" if node.op == "softmax" else "LogSoftmax"
    cx.define(cx.add(op, [x], {"axis": cx.attr("axis", "int", -1)}))


@converter("SoftmaxOutput")
def _softmax_output(cx, node: MXNode) -> None:
    """Inference: the softmax of the data (the label input is for training only)."""
    x = cx.input(0)
    if cx.attr("multi_output", "bool", False):
        cx.define(cx.add("Softmax", [x], {"axis": 1}))
    elif cx.attr("preserve_shape", "bool", False):
        cx.define(cx.add("Softmax", [x], {"axis": -1}))
    else:  # softmax over everything but the batch axis, in the data's shape
        flat = cx.add("Flatten", [x], {"axis": 1})
        cx.define(cx.add("Reshape", [cx.add("Softmax", [flat], {"axis": 1}), _shape(cx, x, 0)]))


# -- layers -----------------------------------------------------------------------------------
@converter("FullyConnected")
def _fully_connected(cx, node: MXNode) -> None:
    x, w = cx.input(0), cx.input(1)
    if cx.attr("flatten", "bool", True):
        x = cx.add("Flatten", [x], {"axis": 1})
    weight = cx.array(w)
    wt = (
        cx.const(weight.T, f"{node.name}/weight_t")
        if weight is not None
        else cx.add("Transpose", [w], {"perm": [1, 0]})
    )
    y = cx.add("MatMul", [x, wt])
    if not cx.attr("no_bias", "bool", False):
        y = cx.add("Add", [y, cx.input(2)])
    cx.define(y)


@converter("Embedding")
def _embedding(cx, node: MXNode) -> None:
    ids = cx.cast(cx.input(0), ir.DataType.INT64, f"{node.name}/ids")
    cx.define(cx.add("Gather", [cx.input(1), ids], {"axis": 0}))


@converter("Dropout")
def _dropout(cx, node: MXNode) -> None:
    """mode 'training' drops only while training: nothing at inference (is_test); 'always'
    drops at inference too (our Philox dropout, which needs a seed to run)."""
    mode = cx.attr("mode", "str", "training")
    if mode not in ("training", "always"):
        raise UnsupportedOpError(f"{cx.where()}: mode {mode!r}, expected training or always")
    attrs = {"p": cx.attr("p", "float", 0.5), "is_test": int(mode == "training")}
    axes = cx.attr("axes", "ints", ())
    if axes:
        attrs["axes"] = list(axes)
    cx.define(cx.add("Dropout", [cx.input(0)], attrs, domain=fir.DOMAIN))


@converter("RNN")
def _rnn(cx, node: MXNode) -> None:
    """mode gru -> one FusionGRU per layer (tnc, linear_before_reset 1, origin_mode 1, gates
    reordered from r, z, n to update, reset, candidate). Unlike MXNet's oneDNN path, which
    ignores it, sequence_length is honoured."""
    mode = cx.attr("mode", "str")
    if mode != "gru":
        raise UnsupportedOpError(f"{cx.where()}: mode {mode!r}; only gru is supported")
    if cx.attr("projection_size", "int?", None) is not None:
        raise UnsupportedOpError(f"{cx.where()}: projection_size is not supported")
    hidden = cx.attr("state_size", "int")
    layers = cx.attr("num_layers", "int", 1)
    bidirectional = cx.attr("bidirectional", "bool", False)
    d = 2 if bidirectional else 1
    params = cx.array(cx.input(1))
    if params is None:
        raise UnsupportedOpError(
            f"{cx.where()}: the parameters input must be known at load time (a parameter, or "
            "gluon's Reshape + _rnn_param_concat of parameters)"
        )
    # The flat vector's size fixes the input size: d*3H*(I + H) weights in layer 0, ...
    later = (layers - 1) * d * 3 * hidden * (d * hidden + hidden)
    first = params.size - layers * d * 6 * hidden - later
    if first <= 0 or first % (d * 3 * hidden):
        raise ModelFormatError(
            f"{cx.where()}: {params.size} parameters do not fit {layers} layer(s) of hidden size "
            f"{hidden}{', bidirectional' if bidirectional else ''}"
        )
    input_size = first // (d * 3 * hidden) - hidden
    weights = mxnet_rnn_params_to_canonical(
        params.reshape(-1),
        input_size=input_size,
        hidden_size=hidden,
        num_layers=layers,
        bidirectional=bidirectional,
    )
    entry = cx.node.inputs[2] if len(cx.node.inputs) > 2 else None
    state = None if entry is None or entry in cx.zero_states else cx.values[entry]
    lengths = None
    if cx.attr("use_sequence_length", "bool", False):
        lengths = cx.cast(cx.input(len(node.inputs) - 1), ir.DataType.INT64, f"{node.name}/lengths")
    attrs = {
        "direction": "bidirectional" if bidirectional else "forward",
        "linear_before_reset": 1,
        "origin_mode": 1,
        "layout": "tnc",
    }
    x, lasts = cx.input(0), []
    for layer, (wx, wh, b, bh) in enumerate(weights):
        h0 = None
        if state is not None:
            h0 = cx.add(
                "Slice",
                [
                    state,
                    cx.ints([layer * d], "start"),
                    cx.ints([(layer + 1) * d], "end"),
                    cx.ints([0], "axis0"),
                ],
            )
        tensors = [
            cx.const(a, f"{node.name}/l{layer}/{k}")
            for a, k in ((wx, "wx"), (wh, "wh"), (b, "bias"), (bh, "bias_h"))
        ]
        outs = cx.add(
            "FusionGRU",
            [x, lengths, *tensors, h0],
            attrs,
            domain=fir.DOMAIN,
            num_outputs=2,
            name=f"{node.name}/l{layer}",
        )
        x, last = outs
        lasts.append(last)
    if cx.attr("state_outputs", "bool", False):
        cx.define(x, cx.add("Concat", lasts, {"axis": 0}) if len(lasts) > 1 else lasts[0])
    else:
        cx.define(x)


@converter("_rnn_param_concat", "Concat", "concat")
def _concat(cx, node: MXNode) -> None:
    axis = cx.attr("dim", "int", 1)
    inputs = [cx.input(i) for i in range(len(node.inputs))]
    arrays = [cx.array(v) for v in inputs]
    if all(a is not None for a in arrays):  # gluon's packed RNN parameters: folded at load
        cx.define(cx.const(np.concatenate(arrays, axis=axis), node.name))
        return
    cx.define(cx.add("Concat", inputs, {"axis": axis}))


# -- shapes -----------------------------------------------------------------------------------
@converter("Reshape", "reshape")
def _reshape(cx, node: MXNode) -> None:
    """MXNet's special codes, from the input's run-time shape: 0 copies the dim, -1 infers one,
    -2 copies all the rest, -3 merges two, -4 splits one into the next two codes."""
    if cx.attr("reverse", "bool", False):
        raise UnsupportedOpError(f"{cx.where()}: reverse=True is not supported")
    x = cx.input(0)
    codes = list(cx.attr("shape", "ints"))
    known = cx.array(x)
    if known is not None:
        cx.define(cx.const(_fold_reshape(cx, known, codes), node.name))
        return
    pieces, j, i = [], 0, 0
    while i < len(codes):
        c = codes[i]
        if c > 0 or c == -1:
            pieces.append(cx.ints([c], "dim"))
            j += 1
        elif c == 0:
            pieces.append(_shape(cx, x, j, j + 1))
            j += 1
        elif c == -2:
            pieces.append(_shape(cx, x, j))
        elif c == -3:
            pieces.append(cx.add("Mul", [_shape(cx, x, j, j + 1), _shape(cx, x, j + 1, j + 2)]))
            j += 2
        elif c == -4 and i + 2 < len(codes):
            a, b = codes[i + 1], codes[i + 2]
            dim = _shape(cx, x, j, j + 1)
            if a == -1:
                pieces += [cx.add("Div", [dim, cx.ints([b], "dim")]), cx.ints([b], "dim")]
            elif b == -1:
                pieces += [cx.ints([a], "dim"), cx.add("Div", [dim, cx.ints([a], "dim")])]
            else:
                pieces += [cx.ints([a], "dim"), cx.ints([b], "dim")]
            i += 2
            j += 1
        else:
            raise ModelFormatError(f"{cx.where()}: shape code {c} at {i} of {codes}")
        i += 1
    cx.define(cx.add("Reshape", [x, cx.add("Concat", pieces, {"axis": 0})]))


def _fold_reshape(cx, a: np.ndarray, codes: list[int]) -> np.ndarray:
    if codes == [-1]:
        return a.reshape(-1)
    if all(c > 0 or c == -1 for c in codes):
        return a.reshape(codes)
    raise UnsupportedOpError(f"{cx.where()}: reshape of a parameter by {codes}")


@converter("transpose")
def _transpose(cx, node: MXNode) -> None:
    axes = list(cx.attr("axes", "ints", ()))
    cx.define(cx.add("Transpose", [cx.input(0)], {"perm": axes} if axes else {}))


@converter("SwapAxis", "swapaxes")
def _swap_axis(cx, node: MXNode) -> None:
    a, b = sorted((cx.attr("dim1", "int", 0), cx.attr("dim2", "int", 0)))
    if a < 0:
        raise UnsupportedOpError(f"{cx.where()}: negative axes need the rank, unknown at load")
    cx.define(_swap_axes(cx, cx.input(0), a, b))


@converter("expand_dims")
def _expand_dims(cx, node: MXNode) -> None:
    cx.define(cx.add("Unsqueeze", [cx.input(0), cx.ints([cx.attr("axis", "int")], "axis")]))


@converter("Flatten", "flatten")
def _flatten(cx, node: MXNode) -> None:
    cx.define(cx.add("Flatten", [cx.input(0)], {"axis": 1}))


@converter("slice_axis")
def _slice_axis(cx, node: MXNode) -> None:
    end = cx.attr("end", "int?", None)
    inputs = [
        cx.input(0),
        cx.ints([cx.attr("begin", "int")], "begin"),
        cx.ints([_INT64_MAX if end is None else end], "end"),
        cx.ints([cx.attr("axis", "int")], "axis"),
    ]
    cx.define(cx.add("Slice", inputs))


# -- products ---------------------------------------------------------------------------------
@converter("dot")
def _dot(cx, node: MXNode) -> None:
    """MXNet dot contracts a's last axis with b's first: MatMul when b is 2-D."""
    a, b = cx.input(0), cx.input(1)
    if cx.attr("transpose_a", "bool", False):
        a = cx.add("Transpose", [a])  # dot's transpose_a reverses all of a's axes
    if cx.attr("transpose_b", "bool", False):
        b = cx.add("Transpose", [b])
    if b.shape is not None and len(b.shape) != 2:
        raise UnsupportedOpError(f"{cx.where()}: dot with a rhs of rank {len(b.shape)}")
    cx.define(cx.add("MatMul", [a, b]))


@converter("batch_dot")
def _batch_dot(cx, node: MXNode) -> None:
    a, b = cx.input(0), cx.input(1)
    if cx.attr("transpose_a", "bool", False):
        a = _transpose_last_two(cx, a)
    if cx.attr("transpose_b", "bool", False):
        b = _transpose_last_two(cx, b)
    cx.define(cx.add("MatMul", [a, b]))


# -- sequences --------------------------------------------------------------------------------
def _steps_grid(cx, x: ir.Value, lengths: ir.Value, axis: int) -> tuple[ir.Value, ir.Value]:
    """(x as [T, N, rest] or [N, T, rest], a bool [T, N, 1] / [N, T, 1] of the real steps)."""
    t = _shape(cx, x, axis, axis + 1)
    steps = cx.add(
        "Range",
        [
            cx.const(np.int64(0), "zero"),
            cx.add("Squeeze", [t, cx.ints([0], "axis0")]),
            cx.const(np.int64(1), "one"),
        ],
    )
    lens = cx.cast(lengths, ir.DataType.INT64, f"{cx.node.name}/lengths")
    if axis == 0:
        real = cx.add(
            "Less",
            [
                cx.add("Unsqueeze", [steps, cx.ints([1], "a")]),
                cx.add("Unsqueeze", [lens, cx.ints([0], "a")]),
            ],
        )
    else:
        real = cx.add(
            "Less",
            [
                cx.add("Unsqueeze", [steps, cx.ints([0], "a")]),
                cx.add("Unsqueeze", [lens, cx.ints([1], "a")]),
            ],
        )
    three = cx.add(
        "Reshape", [x, cx.add("Concat", [_shape(cx, x, 0, 2), cx.ints([-1], "rest")], {"axis": 0})]
    )
    return three, cx.add("Unsqueeze", [real, cx.ints([2], "a")], dtype=ir.DataType.BOOL)


@converter("SequenceMask")
def _sequence_mask(cx, node: MXNode) -> None:
    x = cx.input(0)
    if not cx.attr("use_sequence_length", "bool", False):
        cx.define(cx.add("Identity", [x]))
        return
    axis = cx.attr("axis", "int", 0)
    if axis not in (0, 1):
        raise UnsupportedOpError(f"{cx.where()}: axis {axis}, expected 0 or 1")
    three, real = _steps_grid(cx, x, cx.input(1), axis)
    dtype = x.dtype.numpy() if x.dtype is not None else np.float32
    fill = cx.const(np.asarray(cx.attr("value", "float", 0.0), dtype), f"{node.name}/value")
    masked = cx.add("Where", [real, three, fill], dtype=x.dtype)
    cx.define(cx.add("Reshape", [masked, _shape(cx, x, 0)]))


@converter("SequenceLast")
def _sequence_last(cx, node: MXNode) -> None:
    x = cx.input(0)
    axis = cx.attr("axis", "int", 0)
    if axis not in (0, 1):
        raise UnsupportedOpError(f"{cx.where()}: axis {axis}, expected 0 or 1")
    if not cx.attr("use_sequence_length", "bool", False):
        cx.define(cx.add("Gather", [x, cx.const(np.int64(-1), "last")], {"axis": axis}))
        return
    lens = cx.cast(cx.input(1), ir.DataType.INT64, f"{node.name}/lengths")
    last = cx.add("Sub", [lens, cx.ints([1], "one")])  # [N]
    # x as [N, T, rest]; the row of sentence n is n * T + last[n].
    batch_major = x if axis == 1 else _swap_axes(cx, x, 0, 1)
    t = _shape(cx, batch_major, 1, 2)
    n = _shape(cx, batch_major, 0, 1)
    rows = cx.add(
        "Add",
        [
            cx.add(
                "Mul",
                [
                    cx.add(
                        "Range",
                        [
                            cx.const(np.int64(0), "zero"),
                            cx.add("Squeeze", [n, cx.ints([0], "a")]),
                            cx.const(np.int64(1), "one"),
                        ],
                    ),
                    t,
                ],
            ),
            last,
        ],
    )
    flat = cx.add(
        "Reshape",
        [
            batch_major,
            cx.add("Concat", [cx.ints([-1], "rest"), _shape(cx, batch_major, 2)], {"axis": 0}),
        ],
    )
    cx.define(cx.add("Gather", [flat, rows], {"axis": 0}))
