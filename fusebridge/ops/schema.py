"""What an op is, written once: inputs, outputs, attributes with types and allowed values, the
shape rule, and the typed attribute object a node's attributes parse into. Each op module of
fusebridge.ops declares its schemas with these classes; the registry (fusebridge/ops/__init__.py)
collects them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import numpy as np
import onnx_ir as ir

from fusebridge.conventions import DOMAIN, DOMAIN_VERSION, OFFSETS_SUFFIX
from fusebridge.errors import ArgumentError
from fusebridge.graph.checks import describe
from fusebridge.kernels.arguments import is_probability

# A value check: (value, rank of the node's first input or None) -> why it is refused, or None.
AttributeCheck = Callable[[object, int | None], str | None]


@dataclasses.dataclass(frozen=True)
class Attribute:
    name: str
    default: int | float | str | tuple[int, ...]
    choices: tuple[object, ...] = ()
    doc: str = ""
    check: AttributeCheck | None = None


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
    # The frozen dataclass a node's attributes parse into (parse()): its fields are the
    # attributes, by name, in order (checked when the schema is made).
    attributes_type: type | None = None

    def __post_init__(self) -> None:
        if self.attributes_type is not None:
            fields = [f.name for f in dataclasses.fields(self.attributes_type)]
            if fields != [a.name for a in self.attributes]:
                raise TypeError(
                    f"{self.op_type}: {self.attributes_type.__name__} has fields {fields}, "
                    f"the schema's attributes are {[a.name for a in self.attributes]}"
                )

    @property
    def required_inputs(self) -> int:
        """How many inputs a node must list: up to the last required one (an optional input
        before it is given as an empty name)."""
        return max((i + 1 for i, n in enumerate(self.inputs) if not n.endswith("?")), default=0)

    def attribute_values(self, node: ir.Node) -> dict[str, object]:
        """The node's attributes with defaults filled in, checked against the schema."""
        where = describe(node)
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

    def parse(self, node: ir.Node):
        """The node's attributes as the op's typed attribute object (defaults filled in,
        checked against the schema)."""
        return self.attributes_type(**self.attribute_values(node))

    def check_arity(self, node: ir.Node) -> None:
        where = describe(node)
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


def probability(p: float, rank: int | None) -> str | None:
    return None if is_probability(p) else "expected a probability in [0, 1]"


def axis_in_rank(axis: int, rank: int | None) -> str | None:
    if rank is not None and not -rank <= axis < rank:
        return f"out of range for the input's rank {rank}"
    return None


def distinct_axes(axes: tuple[int, ...], rank: int | None) -> str | None:
    for a in axes:
        if why := axis_in_rank(a, rank):
            return f"axis {a} is {why}"
    normal = [a % rank if rank else a for a in axes]
    if len(set(normal)) != len(normal):
        return "expected each axis once"
    return None


def register_onnx_schemas(schemas: Sequence[OpSchema]) -> None:
    """Our schemas in onnx's registry, so that onnx.checker's full check and shape inference
    know our ops' output types (a Python process-wide registry: done once, at import)."""
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

    for s in schemas:
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
            for i in range(ctx.get_num_outputs()):
                known = output_type(ctx.get_input_type(0), types[i], ranks[i])
                if known is not None:
                    ctx.set_output_type(i, known)

        schema.set_type_and_shape_inference_function(infer)
        defs.register_schema(schema)


def output_type(first: object | None, elem: str, rank: str | int) -> object | None:
    """An output's TypeProto from the first input's (a TypeProto, None where unknown), as far
    as it can be known: the element type ("X": the first input's, or a fixed one) and the rank
    ("X", "X+1", "X-1": from the first input's, or fixed). None where not even the element
    type is known: ONNX shape inference then leaves the output as it is, instead of failing on
    a type it was told wrong (onnx_ir would warn and give up on the whole model)."""
    import onnx

    x = first.tensor_type if first is not None and first.HasField("tensor_type") else None
    if elem != "X":
        elem_type = onnx.helper.np_dtype_to_tensor_dtype(np.dtype(elem))
    elif x is not None and x.elem_type != onnx.TensorProto.UNDEFINED:
        elem_type = x.elem_type
    else:
        return None
    if isinstance(rank, str):
        known = x is not None and x.HasField("shape")
        rank = len(x.shape.dim) + int(rank[1:] or 0) if known else None
    shape = None if rank is None or rank < 0 else [None] * rank  # < 0: a malformed input
    return onnx.helper.make_tensor_type_proto(elem_type, shape)


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


def markdown(schemas: Sequence[OpSchema]) -> str:
    """docs/ops.md: the fusebridge op reference."""
    lines = [
        f"# fusebridge ops (domain `{DOMAIN}`, version {DOMAIN_VERSION})",
        "",
        "Generated from the op modules of `fusebridge/ops/` by `python -m fusebridge.ops`. A LoD "
        f"value `x` is the pair `x` + `x{OFFSETS_SUFFIX}` (int64 offsets [N+1]).",
    ]
    for s in schemas:
        lines += ["", f"## {s.op_type}", "", s.doc, ""]
        lines.append(f"- inputs: {', '.join(f'`{n}`' for n in s.inputs)}")
        lines.append(f"- outputs: {', '.join(f'`{n}`' for n in s.outputs)}")
        for a in s.attributes:
            choices = f" (one of {', '.join(map(str, a.choices))})" if a.choices else ""
            doc = f": {a.doc}" if a.doc else ""
            lines.append(f"- attribute `{a.name}` = {a.default!r}{choices}{doc}")
    return "\n".join(lines) + "\n"
