"""fusebridge/kernels/csrc/op_attributes.hpp, the attributes of the ops the framework glues
register (integrations/mxnet/csrc/mxnet_ops.cc, integrations/paddle/csrc/paddle_ops.cc), made
from the op schemas:

    python -m fusebridge.ops.glue_header > fusebridge/kernels/csrc/op_attributes.hpp

tests/ops/test_glue_header.py keeps the committed header current, as test_op_schemas keeps
docs/ops.md. The glues are compiled against a framework's headers at first use and cannot read
the schemas; the header is how they do. Where a glue op differs from its schema (an attribute
the schema has not, fewer allowed values), the tables below say so and why."""

from __future__ import annotations

import dataclasses

from fusebridge import ops
from fusebridge.ops.schema import Attribute

COMMAND = "python -m fusebridge.ops.glue_header > fusebridge/kernels/csrc/op_attributes.hpp"


@dataclasses.dataclass(frozen=True)
class GlueOp:
    """An op of the glues: its schema, its name in the frameworks, and each framework's
    attribute names in that framework's order (None: no such op there)."""

    op_type: str
    name: str
    # MXNet's order is only that of the "known" list in its unknown-attribute error.
    mxnet: tuple[str, ...] | None
    # Paddle's order is that of the kernel functions' attribute parameters, and of the
    # arguments a Python caller passes after the inputs: it is the op's signature.
    paddle: tuple[str, ...] | None

    @property
    def namespace(self) -> str:
        """The C++ namespace of its attributes in the header."""
        return self.name.removeprefix("fusebridge_")


GLUE_OPS = (
    GlueOp(
        "Dropout",
        "fusebridge_dropout",
        mxnet=("p", "seed", "offset", "axes", "mode", "is_test"),
        paddle=("p", "mode", "is_test", "axes", "save_mask"),
    ),
    GlueOp(
        "SoftmaxDropout",
        "fusebridge_softmax_dropout",
        mxnet=None,
        paddle=("p", "mode", "is_test", "axis", "save_mask"),
    ),
    GlueOp(
        "MatMulDropout",
        "fusebridge_matmul_dropout",
        mxnet=None,
        paddle=("p", "mode", "is_test", "transpose_a", "transpose_b", "save_mask"),
    ),
    GlueOp(
        "FusionGRU",
        "fusebridge_fusion_gru",
        mxnet=(
            "direction",
            "layout",
            "linear_before_reset",
            "origin_mode",
            "activation",
            "gate_activation",
            "has_h0",
        ),
        paddle=(
            "direction",
            "layout",
            "linear_before_reset",
            "origin_mode",
            "activation",
            "gate_activation",
        ),
    ),
)


@dataclasses.dataclass(frozen=True)
class GlueOnly:
    """An attribute a glue op has and its schema has not. A bool default makes a bool
    attribute; required: no default, the caller must give it (the default is then unused)."""

    default: bool | int | float | str
    why: str
    required: bool = False


_SAVE_MASK = GlueOnly(
    True,
    "whether the forward keeps the 1-bit mask for the grad op (false: the grad redraws "
    "the bits from Key). The schema says it by whether the mask output is used.",
)
_FUSED_IS_TEST = GlueOnly(
    False,
    "the program's mode, as for Dropout (true: no bits drawn). The schema's fused "
    "dropouts are made from training dropouts only.",
)
GLUE_ONLY: dict[tuple[str, str], GlueOnly] = {
    ("Dropout", "seed"): GlueOnly(
        0,
        "the schema's seed input, as an attribute: lib_api gives an op no random "
        "generator, so the node carries its seed. Required: without one nothing is drawn.",
        required=True,
    ),
    ("Dropout", "offset"): GlueOnly(
        0, "the schema's offset input, as an attribute (as seed); 0 when left out."
    ),
    ("Dropout", "save_mask"): _SAVE_MASK,
    ("SoftmaxDropout", "is_test"): _FUSED_IS_TEST,
    ("SoftmaxDropout", "save_mask"): _SAVE_MASK,
    ("MatMulDropout", "is_test"): _FUSED_IS_TEST,
    ("MatMulDropout", "save_mask"): _SAVE_MASK,
    ("FusionGRU", "has_h0"): GlueOnly(
        False,
        "whether the H0 input is given. lib_api asks an op its input count from its "
        "attributes alone, so an optional input needs an attribute.",
    ),
}


@dataclasses.dataclass(frozen=True)
class Narrowed:
    """A schema attribute whose glue ops allow fewer values (in both frameworks)."""

    default: str
    choices: tuple[str, ...]
    why: str


NARROWED: dict[tuple[str, str], Narrowed] = {
    ("FusionGRU", "layout"): Narrowed(
        "tnc",
        ("tnc", "ntc"),
        "the glues take right-padded input and seq_lens: neither framework's op interface "
        "passes LoD offsets. tnc is the default of MXNet's RNN.",
    ),
}

# The C++ spelling of each kind: its factory in the header and Paddle's attribute type.
_FACTORIES = {
    "boolean": "bool_attr",
    "integer": "int_attr",
    "real": "real_attr",
    "string": "string_attr",
    "int_list": "int_list_attr",
}
_PADDLE_TYPES = {
    "boolean": "bool",
    "integer": "int",
    "real": "float",
    "string": "std::string",
    "int_list": "std::vector<int>",
}


@dataclasses.dataclass(frozen=True)
class GlueAttribute:
    """An attribute as the glues see it: its kind, default and allowed values."""

    name: str
    kind: str
    default: object
    choices: tuple[str, ...] = ()
    required: bool = False
    why: str = ""  # where it differs from the schema


def glue_kind(default: object, choices: tuple[object, ...] = ()) -> str:
    """The glues' kind of an attribute with this default and these choices: an int that is
    0 or 1 is a bool (both frameworks spell it so), a tuple of ints an int list."""
    if isinstance(default, bool) or (type(default) is int and set(choices) == {0, 1}):
        return "boolean"
    if isinstance(default, str):
        return "string"
    if isinstance(default, tuple):
        if default != ():
            raise ValueError(f"an int list defaults to (), not {default!r}")
        return "int_list"
    if choices:
        raise ValueError(f"only string attributes have choices in the glues, not {default!r}")
    return "integer" if isinstance(default, int) else "real"


def _from_schema(op_type: str, a: Attribute) -> GlueAttribute:
    kind = glue_kind(a.default, a.choices)
    narrowed = NARROWED.get((op_type, a.name))
    if narrowed is None:
        choices = tuple(a.choices) if kind == "string" else ()
        return GlueAttribute(a.name, kind, a.default, choices)
    if not set(narrowed.choices) <= set(a.choices) or narrowed.default not in narrowed.choices:
        raise ValueError(f"{op_type}.{a.name}: narrowed to {narrowed}, the schema's {a.choices}")
    why = (
        f"Narrower than the schema's ({', '.join(a.choices)}; default {a.default}): {narrowed.why}"
    )
    return GlueAttribute(a.name, kind, narrowed.default, narrowed.choices, why=why)


def glue_attributes(op: GlueOp) -> list[GlueAttribute]:
    """The op's attributes: the schema's in its order, then those of the glues alone. Every
    framework's op has every schema attribute, and the glue-only ones are in GLUE_ONLY."""
    schema = ops.schema(op.op_type)
    found = [_from_schema(op.op_type, a) for a in schema.attributes]
    names = [a.name for a in found]
    for framework, listed in (("mxnet", op.mxnet), ("paddle", op.paddle)):
        if listed is None:
            continue
        if missing := {a.name for a in schema.attributes} - set(listed):
            raise ValueError(f"{framework} {op.op_type}: no {sorted(missing)}")
        for name in listed:
            if name in names:
                continue
            extra = GLUE_ONLY.get((op.op_type, name))
            if extra is None:
                raise ValueError(f"{framework} {op.op_type}.{name}: not in the schema or GLUE_ONLY")
            kind = glue_kind(extra.default)
            where = " and ".join(
                f for f, ns in (("MXNet", op.mxnet), ("Paddle", op.paddle)) if ns and name in ns
            )
            why = f"{where} only, not in the schema: {extra.why}"
            found.append(GlueAttribute(name, kind, extra.default, (), extra.required, why))
            names.append(name)
    return found


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _cpp_default(a: GlueAttribute) -> str:
    if a.kind == "boolean":
        return "true" if a.default else "false"
    if a.kind == "string":
        return f'"{a.default}"'
    return repr(a.default)


def _wrapped(head: str, tail: str, joint: str = " ") -> list[str]:
    """head + joint + tail on one line if it fits 100 columns, else tail on the next lines
    (indented, broken after commas)."""
    if len(head) + len(joint) + len(tail) <= 100:
        return [head + joint + tail]
    lines, line = [head], "   "
    for part in tail.split(", "):
        if len(line) + 1 + len(part) + 1 > 100:
            lines.append(line)
            line = "   "
        line += " " + part + ","
    return [*lines, line[:-1]]


def _comment(text: str) -> list[str]:
    words, lines, line = text.split(), [], "//"
    for word in words:
        if len(line) + 1 + len(word) > 100:
            lines.append(line)
            line = "//"
        line += " " + word
    return [*lines, line]


def _string_list(name: str, items: list[str]) -> list[str]:
    quoted = ", ".join(f'"{item}"' for item in items)
    return _wrapped(f"inline constexpr const char* {name}[] = {{", quoted + "};", joint="")


def _op_lines(op: GlueOp, earlier: dict[tuple, tuple[str, str]]) -> list[str]:
    """One op's namespace. An attribute the same as one an earlier op declared (the schemas
    share one Attribute) refers to it, so a glue checks both with the same code."""
    frameworks = [f for f, listed in (("MXNet", op.mxnet), ("Paddle", op.paddle)) if listed]
    lines = [f"// {op.op_type}: {op.name} in {' and '.join(frameworks)}."]
    lines.append(f"namespace {op.namespace} {{")
    enums: dict[tuple[str, ...], str] = {}
    attributes = glue_attributes(op)
    for a in attributes:
        enum = _camel(a.name)
        same = earlier.get(dataclasses.astuple(a))
        if same is not None:
            if a.kind == "string":
                lines.append(f"using {enum} = {same[0]}::{_camel(same[1])};")
            lines.append(f"inline constexpr const Attribute& {a.name} = {same[0]}::{same[1]};")
            continue
        earlier[dataclasses.astuple(a)] = (op.namespace, a.name)
        if a.why:
            lines += _comment(a.why)
        args = [f'"{a.name}"']
        if not a.required and a.kind != "int_list":
            args.append(_cpp_default(a))
        if a.kind == "string":
            for c in a.choices:
                if not c.isidentifier():
                    raise ValueError(f"{op.op_type}.{a.name}: choice {c!r} is no C++ name")
            if a.choices in enums:
                lines.append(f"using {enum} = {enums[a.choices]};  // the same choices")
            else:
                enums[a.choices] = enum
                lines.append(f"enum class {enum} {{ {', '.join(a.choices)} }};")
            args.append("{" + ", ".join(f'"{c}"' for c in a.choices) + "}")
        if a.required and a.kind != "integer":
            raise ValueError(f"{op.op_type}.{a.name}: only an int attribute may be required")
        factory = ("required_" if a.required else "") + _FACTORIES[a.kind]
        head = f"inline constexpr Attribute {a.name} ="
        lines += _wrapped(head, f"{factory}({', '.join(args)});")
    kinds = {a.name: a.kind for a in attributes}
    if op.mxnet:
        lines.append("// MXNet's attributes: any other one is refused as misspelt.")
        lines += _string_list("mxnet_attrs", list(op.mxnet))
    if op.paddle:
        lines.append("// Paddle's .Attrs(...), in the order of the kernel functions' parameters.")
        declared = [f"{n}: {_PADDLE_TYPES[kinds[n]]}" for n in op.paddle]
        lines += _string_list("paddle_attrs", declared)
    return [*lines, f"}}  // namespace {op.namespace}", ""]


def glue_header() -> str:
    """fusebridge/kernels/csrc/op_attributes.hpp."""
    most_choices = max(len(a.choices) for op in GLUE_OPS for a in glue_attributes(op))
    lines = [_PREAMBLE.format(command=COMMAND, max_choices=most_choices).strip(), ""]
    earlier: dict[tuple, tuple[str, str]] = {}
    for op in GLUE_OPS:
        lines += _op_lines(op, earlier)
    lines.append("}  // namespace fusebridge::op_attributes")
    return "\n".join(lines) + "\n"


_PREAMBLE = """
// Generated from the op schemas (fusebridge/ops) and the glue tables of
// fusebridge/ops/glue_header.py by
//   {command}
// Do not edit: tests/ops/test_glue_header.py fails when it differs from what that prints.
//
// The attributes of the ops the framework glues register (integrations/mxnet/csrc/mxnet_ops.cc,
// integrations/paddle/csrc/paddle_ops.cc): each one's name, kind, default and allowed values.
// The glues are compiled against a framework's headers at first use and cannot read the Python
// schemas, so they read them here. Plain C++17: no framework, no kernel.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <vector>

namespace fusebridge::op_attributes {{

enum class Kind {{ boolean, integer, real, string, int_list }};

// The most allowed values any attribute below has.
inline constexpr std::size_t kMaxChoices = {max_choices};

// One attribute. Its default is the field of its kind (an int list's is empty). A string
// attribute lists its allowed values in the order of its enum, so that the position of a
// value is its enumerator; a bool (0 or 1 in the schema) has none.
struct Attribute {{
    const char* name = "";
    Kind kind = Kind::integer;
    bool required = false;  // no default: the caller must give it
    bool default_bool = false;
    std::int64_t default_int = 0;
    double default_real = 0;
    const char* default_string = "";
    std::array<const char*, kMaxChoices> choices{{}};  // then null
}};

constexpr Attribute bool_attr(const char* name, bool value) {{
    Attribute a;
    a.name = name;
    a.kind = Kind::boolean;
    a.default_bool = value;
    return a;
}}

constexpr Attribute int_attr(const char* name, std::int64_t value) {{
    Attribute a;
    a.name = name;
    a.kind = Kind::integer;
    a.default_int = value;
    return a;
}}

constexpr Attribute required_int_attr(const char* name) {{
    Attribute a = int_attr(name, 0);
    a.required = true;
    return a;
}}

constexpr Attribute real_attr(const char* name, double value) {{
    Attribute a;
    a.name = name;
    a.kind = Kind::real;
    a.default_real = value;
    return a;
}}

constexpr Attribute string_attr(const char* name, const char* value,
                                std::initializer_list<const char*> choices) {{
    Attribute a;
    a.name = name;
    a.kind = Kind::string;
    a.default_string = value;
    std::size_t i = 0;
    for (const char* c : choices) a.choices[i++] = c;  // past kMaxChoices: not a constant
    return a;
}}

constexpr Attribute int_list_attr(const char* name) {{
    Attribute a;
    a.name = name;
    a.kind = Kind::int_list;
    return a;
}}

// The position of `value` among a's allowed values, or -1.
inline int find_choice(const Attribute& a, const std::string& value) {{
    for (std::size_t i = 0; i < a.choices.size() && a.choices[i]; ++i)
        if (value == a.choices[i]) return int(i);
    return -1;
}}

// a's allowed values as 'x', 'y', 'z', for messages.
inline std::string listed_choices(const Attribute& a) {{
    std::string listed;
    for (std::size_t i = 0; i < a.choices.size() && a.choices[i]; ++i)
        listed += std::string(i ? ", " : "") + "'" + a.choices[i] + "'";
    return listed;
}}

// `value` as the enumerator of a's enum (E); std::invalid_argument naming the attribute, the
// value and the allowed ones if it is none of them.
template <class E>
E choice(const Attribute& a, const std::string& value) {{
    const int i = find_choice(a, value);
    if (i < 0)
        throw std::invalid_argument(std::string("attr '") + a.name + "' is '" + value +
                                    "', expected one of " + listed_choices(a));
    return E(i);
}}

// A list below as Paddle's .Attrs() takes it.
template <std::size_t N>
std::vector<std::string> declarations(const char* const (&list)[N]) {{
    return std::vector<std::string>(list, list + N);
}}
"""


if __name__ == "__main__":
    print(glue_header(), end="")
