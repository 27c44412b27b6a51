"""One converter per MXNet op type: MXNet op -> ONNX ops, or fusebridge ops (RNN gru ->
FusionGRU, Dropout). Each takes the SymbolConverter (load.py) and the node, and defines the
node's outputs. Shapes are not known at load time, so every reorder is built rank-agnostic from
Shape slices (MXNet binds shapes only when it runs)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NoReturn

import ml_dtypes
import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.mxnet.rnn_params import mxnet_rnn_params_to_canonical
from fusebridge.integrations.mxnet.symbol import MXNode
from fusebridge.kernels.arguments import as_probability

CONVERTERS: dict[str, Callable] = {}
_INT64_MAX = np.iinfo(np.int64).max
# A fill of up to this many elements is made at load, as data the folds and passes can read
# (a bias of ones, a small initial state): at most 4 KiB of float32, so a graph of n such
# nodes costs about 70x its JSON. A larger one is a ConstantOfShape: no memory until it runs.
_DENSE_FILL = 1024
# No machine maps more than this (the 47-bit user address space of x86-64 and arm64): a fill
# this large can never run, so it is refused at load.
_ADDRESSABLE = 1 << 47
# The dtype names MXNet's creation ops take (mshadow's type names).
_FILL_DTYPES = {
    name: np.dtype(t)
    for name, t in (
        ("float32", np.float32),
        ("float64", np.float64),
        ("float16", np.float16),
        ("bfloat16", ml_dtypes.bfloat16),
        ("uint8", np.uint8),
        ("int8", np.int8),
        ("int32", np.int32),
        ("int64", np.int64),
        ("bool", np.bool_),
    )
}


def _bad(cx, key: str, value: object, expected: str) -> NoReturn:
    raise ModelFormatError(f"{cx.where()}: attribute {key} = {value!r}, expected {expected}")


def _positive(cx, key: str, *default: int) -> int:
    value = cx.attr(key, "int", *default)
    if value < 1:
        _bad(cx, key, value, "a positive integer")
    return value


def _finite(cx, key: str, *default: float) -> float:
    value = cx.attr(key, "float", *default)
    if not math.isfinite(value):
        _bad(cx, key, value, "a finite number")
    return value


def _dropout_p(cx, default: float) -> float:
    """Attribute p, a dropout probability: in [0, 1], as MXNet requires; NaN is refused too."""
    return as_probability(cx.attr("p", "float", default), cx.where())


def _axes(cx, key: str, axes: Sequence[int], rank: int | None, negative: bool = True) -> None:
    """Refuses repeated axes, negative ones where MXNet refuses them, and any outside the rank
    when the rank is known at load (else the op refuses it when it runs)."""
    low = -rank if negative and rank is not None else 0
    shown = tuple(axes) if key == "axes" else axes[0]  # the others hold one axis
    seen = set()
    for a in axes:
        if not negative and a < 0:
            _bad(cx, key, shown, "axes >= 0 (MXNet takes no negative axis here)")
        if rank is not None and not low <= a < rank:
            _bad(cx, key, shown, f"an axis in [{low}, {rank}) for an input of rank {rank}")
        if (a % rank if rank else a) in seen:
            _bad(cx, key, shown, "each axis once")
        seen.add(a % rank if rank else a)


def _scalar(cx, key: str, value: float, dtype: np.dtype) -> np.ndarray:
    """value as a 0-d array of dtype; MXNet casts a scalar to an integer tensor's type by
    truncation, which a NaN, an infinity or a value outside the type cannot survive."""
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        if not (math.isfinite(value) and info.min <= math.trunc(value) <= info.max):
            _bad(cx, key, value, f"a number that {dtype} can hold")
    return np.asarray(value).astype(dtype)


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


@converter("_zeros", "_ones", "_full")
def _filled(cx, node: MXNode) -> None:
    """A tensor of one value: data when small, else ConstantOfShape (see _DENSE_FILL)."""
    shape = cx.attr("shape", "ints")
    if shape is None or any(d < 0 for d in shape):
        _bad(cx, "shape", shape, "dims >= 0 (0: inferred when it runs)")
    name = cx.attr("dtype", "str", "float32")
    if name not in _FILL_DTYPES:
        _bad(cx, "dtype", name, f"one of {', '.join(_FILL_DTYPES)}")
    dtype = _FILL_DTYPES[name]
    if 0 in shape:
        if node.op != "_zeros":
            raise UnsupportedOpError(f"{cx.where()}: shape {shape} has dims inferred at run time")
        # gluon's RNN begin state (L*D, 0, H): the batch is known only when it runs.
        cx.zero_states.add((cx.index, 0))
        return
    fill = {"_zeros": 0.0, "_ones": 1.0}.get(node.op)
    value = _scalar(cx, "value", cx.attr("value", "float") if fill is None else fill, dtype)
    count = math.prod(shape)  # Python ints: no overflow
    if count * dtype.itemsize > _ADDRESSABLE:
        _bad(cx, "shape", shape, f"at most {_ADDRESSABLE} bytes of {dtype} (47-bit addresses)")
    if count <= _DENSE_FILL:
        cx.spend(count * dtype.itemsize)
        cx.define(cx.const(np.full(shape, value, dtype), node.name))
        return
    dims = cx.ints(list(shape), f"{node.name}/shape")
    attrs = {"value": ir.tensor(value.reshape(1))}
    cx.define(cx.add("ConstantOfShape", [dims], attrs, dtype=ir.DataType.from_numpy(dtype)))


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
        dtype = np.dtype(x.dtype.numpy() if x.dtype is not None else np.float32)
        scalar = _scalar(cx, "scalar", cx.attr("scalar", "float"), dtype)
        s = cx.const(scalar, f"{node.name}/scalar")
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
        out = cx.add("LeakyRelu", [x], {"alpha": _finite(cx, "slope", 0.25)})
    elif act == "elu":
        out = cx.add("Elu", [x], {"alpha": _finite(cx, "slope", 0.25)})
    elif act == "selu":
        out = cx.add("Selu", [x])
    elif act == "prelu":
        # gamma [C] scales channel axis 1 (MXNet's PReLU), so it is broadcast as [C, 1, ...].
        gamma = cx.input(1)
        if cx.array(gamma) is None:
            raise UnsupportedOpError(f"{cx.where()}: prelu's gamma must be a parameter")
        column = cx.fold("gamma", gamma, lambda a: a.reshape(-1, 1))
        out = cx.add("PRelu", [x, column])
    elif act == "rrelu":  # inference: the mean of the random slope
        lower, upper = _finite(cx, "lower_bound", 0.125), _finite(cx, "upper_bound", 0.334)
        if lower > upper:
            _bad(cx, "upper_bound", upper, f"at least lower_bound ({lower})")
        out = cx.add("LeakyRelu", [x], {"alpha": (lower + upper) / 2})
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
    if temperature is not None and not (math.isfinite(temperature) and temperature != 0):
        _bad(cx, "temperature", temperature, "a finite number other than 0, or None")
    if temperature not in (None, 1.0):
        x = cx.add("Div", [x, cx.const(np.float32(temperature), f"{node.name}/temperature")])
    op = "Softmax" if node.op == "softmax" else "LogSoftmax"
    axis = cx.attr("axis", "int", -1)
    _axes(cx, "axis", [axis], cx.rank(x))
    cx.define(cx.add(op, [x], {"axis": axis}))


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
    hidden = _positive(cx, "num_hidden")
    weight = cx.array(w)
    if weight is not None and (weight.ndim != 2 or weight.shape[0] != hidden):
        raise ModelFormatError(
            f"{cx.where()}: weight has shape {weight.shape}, expected [num_hidden = {hidden}, "
            "input size]"
        )
    wt = (
        cx.fold("weight_t", w, np.transpose)
        if weight is not None
        else cx.add("Transpose", [w], {"perm": [1, 0]})
    )
    y = cx.add("MatMul", [x, wt])
    if not cx.attr("no_bias", "bool", False):
        y = cx.add("Add", [y, cx.input(2)])
    cx.define(y)


@converter("Embedding")
def _embedding(cx, node: MXNode) -> None:
    """Gather of rows. As MXNet's Embedding does, the ids are truncated to integers and clipped
    to [0, rows - 1]: an id past either end takes the first or the last row (Gather alone would
    take a row from the end for a negative id)."""
    weight = cx.input(1)
    known = cx.array(weight)
    if known is not None:
        dims = (cx.attr("input_dim", "int", known.shape[0]), cx.attr("output_dim", "int", -1))
        if known.ndim != 2 or known.shape[0] != dims[0] or dims[1] not in (-1, known.shape[1]):
            raise ModelFormatError(
                f"{cx.where()}: weight has shape {known.shape}, expected [input_dim, "
                f"output_dim] = [{dims[0]}, {'?' if dims[1] == -1 else dims[1]}]"
            )
        last = cx.const(np.int64(known.shape[0] - 1), f"{node.name}/last_row")
    else:
        rows = cx.add("Squeeze", [_shape(cx, weight, 0, 1), cx.ints([0], "axis0")])
        last = cx.add("Sub", [rows, cx.const(np.int64(1), "one")])
    ids = cx.cast(cx.input(0), ir.DataType.INT64, f"{node.name}/ids")
    ids = cx.add("Clip", [ids, cx.const(np.int64(0), "zero"), last])
    cx.define(cx.add("Gather", [weight, ids], {"axis": 0}))


@converter("Dropout")
def _dropout(cx, node: MXNode) -> None:
    """mode 'training' drops only while training: nothing at inference (is_test); 'always'
    drops at inference too (our Philox dropout, which needs a seed to run)."""
    mode = cx.attr("mode", "str", "training")
    if mode not in ("training", "always"):
        raise UnsupportedOpError(f"{cx.where()}: mode {mode!r}, expected training or always")
    x = cx.input(0)
    attrs = {"p": _dropout_p(cx, 0.5), "is_test": int(mode == "training")}
    axes = cx.attr("axes", "ints", ()) or ()
    _axes(cx, "axes", axes, cx.rank(x), negative=False)
    if axes:
        attrs["axes"] = list(axes)
    cx.define(cx.add("Dropout", [x], attrs, domain=conventions.DOMAIN))


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
    hidden = _positive(cx, "state_size")
    layers = _positive(cx, "num_layers", 1)
    _dropout_p(cx, 0.0)  # dropout between layers while training: checked, not used
    bidirectional = cx.attr("bidirectional", "bool", False)
    use_lengths = cx.attr("use_sequence_length", "bool", False)
    if len(node.inputs) != 3 + use_lengths:  # data, parameters, state[, sequence_length]
        raise ModelFormatError(
            f"{cx.where()}: {len(node.inputs)} inputs, expected data, parameters, state"
            + (", sequence_length" if use_lengths else "")
        )
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
    input_size = first // (d * 3 * hidden) - hidden
    if first <= 0 or first % (d * 3 * hidden) or input_size < 1:
        raise ModelFormatError(
            f"{cx.where()}: {params.size} parameters do not fit {layers} layer(s) of hidden size "
            f"{hidden}{', bidirectional' if bidirectional else ''}"
        )
    cx.spend(params.nbytes)
    weights = mxnet_rnn_params_to_canonical(
        params.reshape(-1),
        input_size=input_size,
        hidden_size=hidden,
        num_layers=layers,
        bidirectional=bidirectional,
    )
    entry = node.inputs[2]
    state = None if entry in cx.zero_states else cx.input(2)
    x = cx.input(0)
    lengths = _lengths(cx, 3, x, 0) if use_lengths else None
    attrs = {
        "direction": "bidirectional" if bidirectional else "forward",
        "linear_before_reset": 1,
        "origin_mode": 1,
        "layout": "tnc",
    }
    lasts = []
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
            domain=conventions.DOMAIN,
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
    count = cx.attr("num_args", "int", len(node.inputs))
    if count != len(node.inputs) or not count:
        _bad(cx, "num_args", count, f"the number of inputs ({len(node.inputs)}), at least 1")
    inputs = [cx.input(i) for i in range(len(node.inputs))]
    arrays = [cx.array(v) for v in inputs]
    if all(a is not None for a in arrays):  # gluon's packed RNN parameters: folded at load
        if len({a.dtype for a in arrays}) > 1:
            raise ModelFormatError(
                f"{cx.where()}: inputs of dtypes {', '.join(str(a.dtype) for a in arrays)}, "
                "expected one dtype"
            )
        cx.spend(sum(a.nbytes for a in arrays))
        try:
            joined = np.concatenate(arrays, axis=axis)
        except ValueError as e:  # the shapes do not join, or the axis is not theirs
            raise ModelFormatError(
                f"{cx.where()}: cannot join the inputs on dim {axis}: {e}"
            ) from None
        cx.define(cx.const(joined, node.name))
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
    codes = list(cx.attr("shape", "ints") or ())
    _check_reshape_codes(cx, codes)
    known = cx.array(x)
    if known is not None:
        cx.spend(known.nbytes)
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
        elif c == -4:
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
        i += 1
    cx.define(cx.add("Reshape", [x, cx.add("Concat", pieces, {"axis": 0})]))


def _check_reshape_codes(cx, codes: list[int]) -> None:
    """MXNet's codes: dims > 0, and 0, -1, -2, -3, -4 (followed by the two dims it splits one
    into: > 0, or one of them -1); one dim at most inferred (-1). A 0 to split by would divide
    by zero when the shape is computed."""
    if not codes:
        _bad(cx, "shape", tuple(codes), "at least one dim")
    inferred, i = 0, 0
    while i < len(codes):
        c = codes[i]
        if c < -4:
            _bad(cx, "shape", tuple(codes), "dims > 0 or the codes 0, -1, -2, -3, -4")
        if c == -4:
            split = codes[i + 1 : i + 3]
            if len(split) < 2 or not all(d > 0 or d == -1 for d in split) or split == [-1, -1]:
                _bad(cx, "shape", tuple(codes), "-4 followed by two dims > 0 (one may be -1)")
            inferred += -1 in split
            i += 2
        inferred += c == -1
        i += 1
    if inferred > 1:
        _bad(cx, "shape", tuple(codes), "at most one dim inferred (-1)")


def _fold_reshape(cx, a: np.ndarray, codes: list[int]) -> np.ndarray:
    if not all(c > 0 or c == -1 for c in codes):
        raise UnsupportedOpError(f"{cx.where()}: reshape of a parameter by {codes}")
    try:
        return a.reshape(codes)
    except ValueError:
        _bad(cx, "shape", tuple(codes), f"a shape of {a.size} elements (the input's {a.shape})")


@converter("transpose")
def _transpose(cx, node: MXNode) -> None:
    x = cx.input(0)
    axes = list(cx.attr("axes", "ints", ()) or ())
    rank = cx.rank(x)
    if axes and (sorted(axes) != list(range(len(axes))) or rank not in (None, len(axes))):
        _bad(cx, "axes", tuple(axes), f"a permutation of 0..{(rank or len(axes)) - 1}")
    cx.define(cx.add("Transpose", [x], {"perm": axes} if axes else {}))


@converter("SwapAxis", "swapaxes")
def _swap_axis(cx, node: MXNode) -> None:
    x = cx.input(0)
    a, b = sorted((cx.attr("dim1", "int", 0), cx.attr("dim2", "int", 0)))
    if a < 0:
        raise UnsupportedOpError(f"{cx.where()}: negative axes need the rank, unknown at load")
    for key in ("dim1", "dim2"):
        _axes(cx, key, [cx.attr(key, "int", 0)], cx.rank(x))
    cx.define(_swap_axes(cx, x, a, b))


@converter("expand_dims")
def _expand_dims(cx, node: MXNode) -> None:
    x, axis = cx.input(0), cx.attr("axis", "int")
    rank = cx.rank(x)
    _axes(cx, "axis", [axis], None if rank is None else rank + 1)
    cx.define(cx.add("Unsqueeze", [x, cx.ints([axis], "axis")]))


@converter("Flatten", "flatten")
def _flatten(cx, node: MXNode) -> None:
    cx.define(cx.add("Flatten", [cx.input(0)], {"axis": 1}))


@converter("slice_axis")
def _slice_axis(cx, node: MXNode) -> None:
    x, axis, end = cx.input(0), cx.attr("axis", "int"), cx.attr("end", "int?", None)
    _axes(cx, "axis", [axis], cx.rank(x))
    inputs = [
        x,
        cx.ints([cx.attr("begin", "int")], "begin"),
        cx.ints([_INT64_MAX if end is None else end], "end"),
        cx.ints([axis], "axis"),
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
def _lengths(cx, slot: int, x: ir.Value, axis: int, minimum: int = 0) -> ir.Value:
    """Input `slot`, the sequence lengths of x ([T, N, ...] for axis 0, [N, T, ...] for 1), as
    int64 checked when the model runs: MXNet takes them as floats, and a NaN, an infinity, a
    fraction or a length past T must be refused naming the model's input, not be cast."""
    lengths = cx.input(slot)
    node, output = cx.node.inputs[slot]
    producer = cx.symbol.nodes[node]
    source = (
        f"model input {producer.name!r}"
        if producer.op == "null"
        else f"output {output} of {producer.op} node {producer.name!r}"
    )
    attrs = {"axis": axis, "minimum": minimum, "source": f"{cx.where()}: lengths ({source})"}
    return cx.add(
        "SequenceLengths",
        [lengths, x],
        attrs,
        domain=conventions.DOMAIN,
        name=f"{cx.node.name}/lengths",
        dtype=ir.DataType.INT64,
    )


def _steps_grid(cx, x: ir.Value, axis: int) -> tuple[ir.Value, ir.Value]:
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
    lens = _lengths(cx, 1, x, axis)
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
    three, real = _steps_grid(cx, x, axis)
    dtype = x.dtype.numpy() if x.dtype is not None else np.float32
    value = _scalar(cx, "value", cx.attr("value", "float", 0.0), np.dtype(dtype))
    fill = cx.const(value, f"{node.name}/value")
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
    lens = _lengths(cx, 1, x, axis, minimum=1)
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
