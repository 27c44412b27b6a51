"""IR conventions: domains and versions, the fusebridge op schemas, LoD value names, builders.

The schemas below are the single description of our ops: the Session validates nodes with
them, the reference backend and the kernels dispatch on them, and docs/ops.md is generated
from them (`python -m fusebridge.ir > docs/ops.md`; a test keeps the two equal).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ArgumentError
from fusebridge.kernels.arguments import is_probability

DOMAIN = "fusebridge"
DOMAIN_VERSION = 1
ONNX_OPSET = 17
# ONNX Runtime 1.31 refuses IR version 14, which onnx 1.23 writes by default.
IR_VERSION = 10
OFFSETS_SUFFIX = ".offsets"


def unique_name(hint: str, taken: set[str], last: dict[str, int] | None = None) -> str:
    """`hint`, or `hint@k` with the smallest k not in `taken`; added to `taken`. A caller that
    never removes names from `taken` may keep `last` (hint -> the k given last), so that the
    n-th name for one hint costs one look-up, not n."""
    k = last.get(hint, 0) if last is not None else 0
    name = f"{hint}@{k}" if k else hint
    while name in taken:
        k += 1
        name = f"{hint}@{k}"
    taken.add(name)
    if last is not None:
        last[hint] = k
    return name


def offsets_name(name: str) -> str:
    """The name of the int64 offsets vector [N+1] that pairs with LoD value `name`."""
    return name + OFFSETS_SUFFIX


# A value check: (value, rank of the node's first input or None) -> why it is refused, or None.
AttributeCheck = Callable[[object, int | None], str | None]


@dataclasses.dataclass(frozen=True)
class Attribute:
    name: str
    default: int | float | str | tuple[int, ...]
    choices: tuple[object, ...] = ()
    doc: str = ""
    check: AttributeCheck | None = None


def _probability(p: float, rank: int | None) -> str | None:
    return None if is_probability(p) else "expected a probability in [0, 1]"


def _axis(axis: int, rank: int | None) -> str | None:
    if rank is not None and not -rank <= axis < rank:
        return f"out of range for the input's rank {rank}"
    return None


def _axes(axes: tuple[int, ...], rank: int | None) -> str | None:
    for a in axes:
        if why := _axis(a, rank):
            return f"axis {a} is {why}"
    normal = [a % rank if rank else a for a in axes]
    if len(set(normal)) != len(normal):
        return "expected each axis once"
    return None


@dataclasses.dataclass(frozen=True)
class OpSchema:
    """Inputs and outputs are positional; a name ending in '?' is optional (empty name or
    left off at the end)."""

    op_type: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attributes: tuple[Attribute, ...]
    doc: str
    # Each output's element type: "X" (that of the first input) or a fixed one ("int64").
    output_types: tuple[str, ...] = ("X", "X")
    # Each output's rank: that of the first input plus a change ("X", "X+1", "X-1"), or fixed.
    output_ranks: tuple[str | int, ...] = ("X", 3)

    @property
    def required_inputs(self) -> int:
        """How many inputs a node must list: up to the last required one (an optional input
        before it is given as an empty name)."""
        return max((i + 1 for i, n in enumerate(self.inputs) if not n.endswith("?")), default=0)

    def attribute_values(self, node: ir.Node) -> dict[str, object]:
        """The node's attributes with defaults filled in, checked against the schema."""
        where = f"{DOMAIN}.{self.op_type} node {node.name!r}"
        known = {a.name: a for a in self.attributes}
        unknown = sorted(set(node.attributes) - set(known))
        if unknown:
            raise ArgumentError(
                f"{where}: unknown attribute(s) {unknown}, expected {sorted(known)}"
            )
        first = node.inputs[0] if node.inputs else None
        rank = None if first is None or first.shape is None else len(first.shape)
        values = {}
        for a in self.attributes:
            attr = node.attributes.get(a.name)
            value = a.default if attr is None else attr.value
            if isinstance(a.default, tuple):
                if not isinstance(value, Sequence) or not all(_is_int(v) for v in value):
                    raise ArgumentError(
                        f"{where}: attribute {a.name} = {value!r}, expected a list of ints"
                    )
                value = tuple(value)
            elif not isinstance(value, type(a.default)):
                raise ArgumentError(
                    f"{where}: attribute {a.name} = {value!r}, expected {type(a.default).__name__}"
                )
            if a.choices and value not in a.choices:
                raise ArgumentError(
                    f"{where}: attribute {a.name} = {value!r}, expected one of {list(a.choices)}"
                )
            if a.check is not None and (why := a.check(value, rank)):
                raise ArgumentError(f"{where}: attribute {a.name} = {value!r}: {why}")
            values[a.name] = value
        return values

    def check_arity(self, node: ir.Node) -> None:
        where = f"{DOMAIN}.{self.op_type} node {node.name!r}"
        inputs = list(node.inputs)
        if not self.required_inputs <= len(inputs) <= len(self.inputs):
            raise ArgumentError(
                f"{where}: {len(inputs)} inputs, expected {self.required_inputs} to "
                f"{len(self.inputs)} ({', '.join(self.inputs)})"
            )
        for name, value in zip(self.inputs, inputs):
            if value is None and not name.endswith("?"):
                raise ArgumentError(f"{where}: input {name} is required")
        if len(node.outputs) > len(self.outputs):
            raise ArgumentError(f"{where}: {len(node.outputs)} outputs, expected {self.outputs}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_ACTIVATIONS = ("sigmoid", "tanh", "relu", "identity")
_GRU_ATTRIBUTES = (
    Attribute(
        "direction",
        "forward",
        ("forward", "reverse", "bidirectional"),
        "reverse runs each sentence from its own last word",
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
    Attribute("activation", "tanh", _ACTIVATIONS, "candidate activation"),
    Attribute("gate_activation", "sigmoid", _ACTIVATIONS, "update and reset gate activation"),
    Attribute(
        "layout",
        "lod",
        ("lod", "tnc", "ntc"),
        "lod: X [words, C] + offsets; tnc/ntc: right-padded X + seq_lens",
    ),
)
_LAYOUT = Attribute("layout", "tnc", ("tnc", "ntc"), "the padded layout")
_P = Attribute("p", 0.5, doc="probability of dropping an element, in [0, 1]", check=_probability)
_AXES = Attribute(
    "axes", (), doc="mask shared along these axes (each once, in [-rank, rank))", check=_axes
)
_SOFTMAX_AXIS = Attribute("axis", -1, doc="the softmax axis, in [-rank, rank)", check=_axis)
_MODE = Attribute("mode", "upscale_in_train", ("upscale_in_train", "downgrade_in_infer"))
_GRU_DOC = (
    "Gate order (update, reset, candidate). Wh [D, OC, 3*OC], B and B_h [D, 3*OC] (D = 2 for "
    "bidirectional, forward first); B_h is the recurrent bias (its candidate part matters only "
    "with linear_before_reset). H0 [D, N, OC] (or [N, OC] with one direction). Y has the "
    "layout of X with D*OC features (forward half first); Y_last [D, N, OC] is each sentence's "
    "final state per direction."
)

SCHEMAS: dict[str, OpSchema] = {
    s.op_type: s
    for s in (
        OpSchema(
            "GRU",
            ("X", "lengths?", "Wh", "B?", "B_h?", "H0?"),
            ("Y", "Y_last?"),
            _GRU_ATTRIBUTES,
            "The recurrence alone, on input already projected to 3*OC features (Paddle's "
            "`gru`). lengths: offsets [N+1] for layout lod (required), seq_lens [N] otherwise "
            "(left out: every sentence is T long). " + _GRU_DOC,
        ),
        OpSchema(
            "FusionGRU",
            ("X", "lengths?", "Wx", "Wh", "B?", "B_h?", "H0?"),
            ("Y", "Y_last?"),
            _GRU_ATTRIBUTES,
            "Input projection and recurrence in one op (what fc_gru and mul_gru produce). "
            "Wx [D, IC, 3*OC]. lengths as for GRU. " + _GRU_DOC,
        ),
        OpSchema(
            "Dropout",
            ("X", "seed?", "offset?"),
            ("Y", "mask?"),
            (
                _P,
                _MODE,
                _AXES,
                Attribute("is_test", 0, (0, 1), "1: inference (no mask drawn)"),
            ),
            "Standalone dropout; element i draws from Philox (seed, offset, i) "
            "(docs/dropout.md, The bit contract). mask: the 1-bit packed keep mask (uint8).",
            ("X", "uint8"),
            ("X", 1),
        ),
        OpSchema(
            "DropoutGrad",
            ("dY", "mask?", "seed?", "offset?"),
            ("dX",),
            (_P, _MODE, _AXES),
            "The backward of a training dropout (Dropout, MatMulDropout, SoftmaxDropout): "
            "dX = dY * keep * scale. keep comes from the packed mask the forward wrote, or, "
            "without a mask, is recomputed from the forward's (seed, offset) over dY's shape "
            "(the pass recompute_dropout_mask: no mask kept between the passes). Give one of "
            "mask and seed.",
            output_ranks=("X",),
        ),
        OpSchema(
            "MatMulDropout",
            ("A", "B", "bias?", "seed?", "offset?"),
            ("Y", "mask?"),
            (
                _P,
                _MODE,
                Attribute("transpose_a", 0, (0, 1)),
                Attribute("transpose_b", 0, (0, 1)),
            ),
            "Dropout(MatMul(A, B) + bias) in one pass: each block of the product is dropped "
            "while in cache. Output element (batch, m, n) draws index batch*M*N + m*N + n, so "
            "the bits are those of MatMul followed by Dropout (the matmul_dropout rule).",
            ("X", "uint8"),
            ("X", 1),
        ),
        OpSchema(
            "SoftmaxDropout",
            ("X", "seed?", "offset?"),
            ("Y", "mask?"),
            (_P, _MODE, _SOFTMAX_AXIS),
            "Dropout(Softmax(X, axis)) in one pass per row; the bits of Softmax followed by "
            "Dropout (the softmax_dropout rule).",
            ("X", "uint8"),
            ("X", 1),
        ),
        OpSchema(
            "SoftmaxDropoutGrad",
            ("dY", "X", "mask?", "seed?", "offset?"),
            ("dX",),
            (_P, _MODE, _SOFTMAX_AXIS),
            "The backward of SoftmaxDropout from the forward's input: P = Softmax(X, axis) "
            "recomputed (the probabilities are not kept), g = dY * keep * scale, dX = P * (g - "
            "sum(g * P, axis)). keep from the packed mask or recomputed from (seed, offset), "
            "as for DropoutGrad (the softmax_dropout_training rule).",
            output_ranks=("X",),
        ),
        OpSchema(
            "CRFDecoding",
            ("Emission", "offsets", "Transition", "Label?"),
            ("ViterbiPath",),
            (),
            "Viterbi decoding per LoD sentence (Paddle `crf_decoding`). Emission [words, tags], "
            "Transition [tags + 2, tags] (start row, end row, then from-to weights). "
            "ViterbiPath int64 [words, 1]: tags, or with Label 1 where the tag equals the label.",
            ("int64",),
            (2,),
        ),
        OpSchema(
            "LoDToPadded",
            ("X", "offsets"),
            ("Padded",),
            (_LAYOUT,),
            "LoD words [words, C...] to right-padded [T, N, C...] (tnc) or [N, T, C...] (ntc), "
            "T the longest sentence, zeros after each sentence. Used around padded recurrences "
            "(the portable ONNX export).",
            output_ranks=("X+1",),
        ),
        OpSchema(
            "PaddedToLoD",
            ("Padded", "offsets"),
            ("Y",),
            (_LAYOUT,),
            "The inverse of LoDToPadded: each sentence's real steps stacked into [words, C...]. "
            "The pass cancel_reorders removes a PaddedToLoD -> LoDToPadded pair over the same "
            "offsets (between stacked GRUs).",
            output_ranks=("X-1",),
        ),
        OpSchema(
            "SequenceLengths",
            ("lengths", "X"),
            ("seq_lens",),
            (
                Attribute("axis", 0, (0, 1), "X's time axis: X is [T, N, ...] (0) or [N, T, ...]"),
                Attribute("minimum", 0, (0, 1), "the shortest length allowed"),
                Attribute("source", "", doc="what the lengths are, named in errors"),
            ),
            "Sequence lengths [N] of any real or integer type (MXNet passes them as floats) "
            "as int64, each checked to be a whole number in [minimum, T] (T and N from X): a "
            "NaN, an infinity, a fraction or a length past the data is an error naming "
            "`source`, where a cast would hand a kernel INT64_MIN.",
            ("int64",),
            (1,),
        ),
        OpSchema(
            "SequencePool",
            ("X", "offsets"),
            ("Out",),
            (
                Attribute(
                    "pooltype", "AVERAGE", ("SUM", "AVERAGE", "SQRT", "MAX", "LAST", "FIRST")
                ),
                Attribute("pad_value", 0.0, doc="value of an empty sentence's row"),
            ),
            "One row per LoD sentence (Paddle `sequence_pool`); SQRT = sum / sqrt(length).",
        ),
    )
}


def schema(op_type: str) -> OpSchema:
    try:
        return SCHEMAS[op_type]
    except KeyError:
        raise ArgumentError(
            f"{DOMAIN}: unknown op {op_type!r}, expected one of {sorted(SCHEMAS)}"
        ) from None


def subgraphs(node: ir.Node) -> list[tuple[str, ir.Graph]]:
    """The graphs in node's attributes (If's branches, Loop's body), each with its attribute's
    name ("body", or "branches[1]" for a list)."""
    found = []
    for name, attr in node.attributes.items():
        if attr.type == ir.AttributeType.GRAPH:
            found.append((name, attr.value))
        elif attr.type == ir.AttributeType.GRAPHS:
            found.extend((f"{name}[{i}]", g) for i, g in enumerate(attr.value))
    return found


def is_fusebridge(node: ir.Node) -> bool:
    return node.domain == DOMAIN


def node(
    op_type: str,
    inputs: Sequence[ir.Value | None],
    attributes: Mapping[str, object] | None = None,
    *,
    num_outputs: int = 1,
    name: str | None = None,
) -> ir.Node:
    """A fusebridge-domain node, checked against its schema. Optional inputs left as None
    at the end are dropped."""
    inputs = list(inputs)
    while inputs and inputs[-1] is None:
        inputs.pop()
    n = ir.node(
        op_type, inputs, dict(attributes or {}), domain=DOMAIN, num_outputs=num_outputs, name=name
    )
    s = schema(op_type)
    s.check_arity(n)
    s.attribute_values(n)
    return n


def opset_imports() -> dict[str, int]:
    return {"": ONNX_OPSET, DOMAIN: DOMAIN_VERSION}


def op_reference_markdown() -> str:
    """docs/ops.md: the fusebridge op reference, generated from SCHEMAS."""
    lines = [
        f"# fusebridge ops (domain `{DOMAIN}`, version {DOMAIN_VERSION})",
        "",
        "Generated from `fusebridge/ir.py` by `python -m fusebridge.ir`. A LoD value `x` is "
        f"the pair `x` + `x{OFFSETS_SUFFIX}` (int64 offsets [N+1]).",
    ]
    for s in SCHEMAS.values():
        lines += ["", f"## {s.op_type}", "", s.doc, ""]
        lines.append(f"- inputs: {', '.join(f'`{n}`' for n in s.inputs)}")
        lines.append(f"- outputs: {', '.join(f'`{n}`' for n in s.outputs)}")
        for a in s.attributes:
            choices = f" (one of {', '.join(map(str, a.choices))})" if a.choices else ""
            doc = f": {a.doc}" if a.doc else ""
            lines.append(f"- attribute `{a.name}` = {a.default!r}{choices}{doc}")
    return "\n".join(lines) + "\n"


def _register_onnx_schemas() -> None:
    """Our schemas in onnx's registry, so that onnx.checker's full check and shape inference
    know our ops' output types (a Python process-wide registry: done once, at import)."""
    import onnx
    from onnx import defs

    any_tensor = [f"tensor({t})" for t in _ONNX_TENSOR_TYPES]
    optional = defs.OpSchema.FormalParameterOption.Optional
    attr_types = {
        int: defs.OpSchema.AttrType.INT,
        float: defs.OpSchema.AttrType.FLOAT,
        str: defs.OpSchema.AttrType.STRING,
        tuple: defs.OpSchema.AttrType.INTS,
    }

    def formal(names: tuple[str, ...], prefix: str) -> list:
        return [
            defs.OpSchema.FormalParameter(
                n.rstrip("?"),
                f"{prefix}{i}",
                "",
                param_option=optional
                if n.endswith("?")
                else defs.OpSchema.FormalParameterOption.Single,
            )
            for i, n in enumerate(names)
        ]

    for s in SCHEMAS.values():
        if defs.has(s.op_type, DOMAIN):
            continue
        schema = defs.OpSchema(
            s.op_type,
            DOMAIN,
            DOMAIN_VERSION,
            s.doc,
            inputs=formal(s.inputs, "I"),
            outputs=formal(s.outputs, "O"),
            type_constraints=[
                (f"{p}{i}", any_tensor, "")
                for p, names in (("I", s.inputs), ("O", s.outputs))
                for i in range(len(names))
            ],
            attributes=[
                defs.OpSchema.Attribute(a.name, attr_types[type(a.default)], a.doc, required=False)
                for a in s.attributes
            ],
        )

        def infer(ctx, types=s.output_types, ranks=s.output_ranks) -> None:
            first = ctx.get_input_type(0)
            if first is None or not first.HasField("tensor_type"):
                return  # an input of unknown type (a malformed graph): nothing to infer
            x = first.tensor_type
            for i in range(ctx.get_num_outputs()):
                if types[i] == "X":
                    elem = x.elem_type
                else:
                    elem = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(types[i]))
                rank = ranks[i]
                if isinstance(rank, str):
                    rank = len(x.shape.dim) + int(rank[1:] or 0) if x.HasField("shape") else None
                shape = None if rank is None else [None] * rank
                ctx.set_output_type(i, onnx.helper.make_tensor_type_proto(elem, shape))

        schema.set_type_and_shape_inference_function(infer)
        defs.register_schema(schema)


_ONNX_TENSOR_TYPES = (
    "float",
    "double",
    "float16",
    "bfloat16",
    "int64",
    "int32",
    "int8",
    "uint8",
    "bool",
)
_register_onnx_schemas()

if __name__ == "__main__":
    print(op_reference_markdown(), end="")
