"""MXNet's `-symbol.json` graphs read without mxnet, and parsers for their string attributes.

The fields and their precedence follow nnvm's JSON loader in MXNet 1.9.1 (JSONNode::Load in
src/nnvm/graph/saveload_json.cc): of "attrs" and the older "attr", the one written last replaces
the other; the oldest "param" only adds keys neither holds. The file is untrusted: whatever does
not fit becomes a ModelFormatError naming the node and the field.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

from fusebridge.errors import ModelFormatError


@dataclass(frozen=True)
class MXSymbol:
    nodes: tuple[MXNode, ...]
    arg_nodes: tuple[int, ...]  # the variable nodes (arguments and auxiliary states), in order
    heads: tuple[tuple[int, int], ...]  # (node, output)
    version: int | None  # attrs.mxnet_version, e.g. 10901; None when absent (before 0.9)


@dataclass(frozen=True)
class MXNode:
    op: str  # "null" for a variable
    name: str
    inputs: tuple[tuple[int, int], ...]  # (node, output) of an earlier node each
    attrs: dict[str, str]
    subgraphs: tuple[MXSymbol, ...] = ()  # bodies of control-flow ops (_foreach, ...)


_GRAPH_FIELDS = {"nodes", "arg_nodes", "heads", "node_row_ptr", "attrs"}
_NODE_FIELDS = {
    "op", "name", "inputs", "attrs", "attr", "param", "control_deps", "subgraphs",
    "backward_source_id",
}  # fmt: skip


def _fail(where: str, message: str) -> NoReturn:
    raise ModelFormatError(f"{where}: {message}")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # MXNet keeps the last of repeated keys; a repeat in a model file is a corruption here.
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ModelFormatError(f"key {key!r} appears twice in one JSON object")
        result[key] = value
    return result


def _is_int(value: object) -> bool:
    return type(value) is int  # not bool, which json gives for true/false


def _object(value: object, fields: set[str], required: tuple[str, ...], where: str) -> dict:
    if not isinstance(value, dict):
        _fail(where, f"expected a JSON object, found {type(value).__name__}")
    if unknown := sorted(set(value) - fields):
        _fail(where, f"unknown field(s) {', '.join(map(repr, unknown))}")
    if missing := [f for f in required if f not in value]:
        _fail(where, f"missing field(s) {', '.join(map(repr, missing))}")
    return value


def _ints(value: object, where: str) -> list[int]:
    if not isinstance(value, list) or not all(_is_int(v) and v >= 0 for v in value):
        _fail(where, f"expected a list of non-negative integers, found {value!r:.80}")
    return value


def _entry(value: object, nodes: list[MXNode], where: str) -> tuple[int, int]:
    """A [node, output] or [node, output, version] entry naming one of `nodes`."""
    if not isinstance(value, list) or len(value) not in (2, 3):
        _fail(where, f"expected [node, output] or [node, output, version], found {value!r:.80}")
    node, output = _ints(value, where)[:2]
    if node >= len(nodes):  # inputs: MXNet writes the nodes in topological order
        _fail(where, f"refers to node {node}, but only {len(nodes)} nodes come before it")
    if nodes[node].op == "null" and output != 0:
        _fail(where, f"variable {nodes[node].name!r} has one output, not output {output}")
    return node, output


def _string_dict(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict):
        _fail(where, f"expected a JSON object, found {type(value).__name__}")
    for key, v in value.items():
        if not isinstance(v, str):
            _fail(where, f"attribute {key} = {v!r:.80} is not a string")
    return dict(value)


def _node(value: object, nodes: list[MXNode], where: str) -> MXNode:
    obj = _object(value, _NODE_FIELDS, ("op", "name", "inputs"), where)
    op, name = obj["op"], obj["name"]
    if not isinstance(op, str) or not isinstance(name, str):
        _fail(where, f"op and name must be strings, found {op!r:.80} and {name!r:.80}")
    where = f"{where} ({op} {name!r})"
    if not isinstance(obj["inputs"], list):
        _fail(where, f"inputs: expected a list, found {obj['inputs']!r:.80}")
    inputs = tuple(_entry(e, nodes, f"{where} input {i}") for i, e in enumerate(obj["inputs"]))
    if op == "null" and inputs:
        _fail(where, f"a variable has no inputs, found {len(inputs)}")
    attrs: dict[str, str] = {}
    for key, v in obj.items():  # document order: the later of attrs/attr wins
        if key in ("attrs", "attr"):
            attrs = _string_dict(v, f"{where} {key}")
    for key, v in _string_dict(obj.get("param", {}), f"{where} param").items():
        attrs.setdefault(key, v)
    if any(d >= len(nodes) for d in _ints(obj.get("control_deps", []), f"{where} control_deps")):
        _fail(where, f"control_deps {obj['control_deps']!r:.80} name a node not before it")
    if "backward_source_id" in obj and not _is_int(obj["backward_source_id"]):
        _fail(where, f"backward_source_id {obj['backward_source_id']!r:.80} is not an integer")
    subgraphs = obj.get("subgraphs", [])
    if not isinstance(subgraphs, list):
        _fail(where, f"subgraphs: expected a list, found {subgraphs!r:.80}")
    parsed = tuple(_graph(g, f"{where}, subgraph {i}") for i, g in enumerate(subgraphs))
    return MXNode(op, name, inputs, attrs, parsed)


def _version(attrs: object, where: str) -> int | None:
    if not isinstance(attrs, dict):
        _fail(where, f"attrs: expected a JSON object, found {type(attrs).__name__}")
    if "mxnet_version" not in attrs:
        return None
    value = attrs["mxnet_version"]
    if not (isinstance(value, list) and len(value) == 2 and value[0] == "int"):
        _fail(where, f'attrs.mxnet_version: expected ["int", version], found {value!r:.80}')
    if not _is_int(value[1]) or value[1] < 0:
        _fail(where, f"attrs.mxnet_version: {value[1]!r:.80} is not a version number")
    return value[1]


def _graph(value: object, where: str) -> MXSymbol:
    obj = _object(value, _GRAPH_FIELDS, ("nodes", "arg_nodes", "heads"), where)
    if not isinstance(obj["nodes"], list):
        _fail(where, f"nodes: expected a list, found {obj['nodes']!r:.80}")
    nodes: list[MXNode] = []
    index_of: dict[str, int] = {}
    for i, v in enumerate(obj["nodes"]):
        node = _node(v, nodes, f"{where}, node #{i}")
        if node.name in index_of:
            _fail(where, f"nodes #{index_of[node.name]} and #{i} are both named {node.name!r}")
        index_of[node.name] = i
        nodes.append(node)
    arg_nodes = _ints(obj["arg_nodes"], f"{where} arg_nodes")
    listed: set[int] = set()
    for i in arg_nodes:
        if i >= len(nodes) or nodes[i].op != "null":
            _fail(where, f"arg_nodes: {i} is not a variable node (of {len(nodes)} nodes)")
        if i in listed:
            _fail(where, f"arg_nodes: node {i} is listed twice")
        listed.add(i)
    if not isinstance(obj["heads"], list):
        _fail(where, f"heads: expected a list, found {obj['heads']!r:.80}")
    heads = tuple(_entry(e, nodes, f"{where} head {i}") for i, e in enumerate(obj["heads"]))
    _ints(obj.get("node_row_ptr", []), f"{where} node_row_ptr")  # derived: not kept
    version = _version(obj.get("attrs", {}), where)
    return MXSymbol(tuple(nodes), tuple(arg_nodes), heads, version)


def parse_symbol(text: str | bytes, source: str = "<json>") -> MXSymbol:
    """An MXNet symbol from its JSON text; `source` names it in error messages."""
    try:
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        obj = json.loads(text, object_pairs_hook=_unique_keys)
    except UnicodeDecodeError as e:
        raise ModelFormatError(f"{source}: not UTF-8: {e}") from None
    except ValueError as e:  # JSONDecodeError, and the repeated keys refused above
        raise ModelFormatError(f"{source}: not valid symbol JSON: {e}") from None
    except RecursionError:
        raise ModelFormatError(f"{source}: JSON nested too deeply") from None
    try:
        return _graph(obj, source)
    except RecursionError:  # subgraphs within subgraphs
        raise ModelFormatError(f"{source}: subgraphs nested too deeply") from None


def read_symbol(path: str | os.PathLike) -> MXSymbol:
    """The graph of an MXNet `prefix-symbol.json` file."""
    path = Path(path)
    if not path.is_file():  # a FIFO would wait for a writer, a device might never end
        raise ModelFormatError(f"{path}: the symbol file is missing or not a regular file")
    try:
        data = path.read_bytes()
    except OSError as e:
        raise ModelFormatError(f"{path}: cannot read the symbol file: {e}") from None
    return parse_symbol(data, os.fspath(path))


# -- attribute values: MXNet writes every one as a string -------------------------------------

# At most 19 digits (int() refuses over 4300 anyway), then in int64's range: MXNet's integers
# are int64 (or narrower), and numpy and ONNX cannot hold a larger one.
_INT = re.compile(r"\s*[+-]?\d{1,19}\s*", re.ASCII)
_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_FLOAT = re.compile(
    r"\s*[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)\s*", re.ASCII | re.IGNORECASE
)
_TUPLE_ITEM = re.compile(r"\s*([+-]?\d{1,19})L?\s*", re.ASCII)  # "L": Python 2 longs


def _bad(value: str, node: str, key: str, expected: str) -> NoReturn:
    raise ModelFormatError(f"MXNet node {node!r}: attribute {key} = {value!r}, expected {expected}")


def parse_str(value: str, node: str, key: str) -> str:
    if not isinstance(value, str):
        _bad(value, node, key, "a string")
    return value


def parse_bool(value: str, node: str, key: str) -> bool:
    """dmlc's bool: true/false/1/0, any case."""
    lowered = parse_str(value, node, key).strip().lower()
    if lowered in ("true", "1"):
        return True
    if lowered in ("false", "0"):
        return False
    _bad(value, node, key, "True, False, 1 or 0")


def _int64(text: str, value: str, node: str, key: str, expected: str) -> int:
    number = int(text)
    if not _INT64_MIN <= number <= _INT64_MAX:
        _bad(value, node, key, f"{expected} (in int64's range)")
    return number


def parse_int(value: str, node: str, key: str) -> int:
    if not _INT.fullmatch(parse_str(value, node, key)):
        _bad(value, node, key, "an integer")
    return _int64(value, value, node, key, "an integer")


def parse_optional_int(value: str, node: str, key: str) -> int | None:
    """An optional<int> field: "None" or an integer."""
    if parse_str(value, node, key).strip() == "None":
        return None
    if not _INT.fullmatch(value):
        _bad(value, node, key, "an integer or None")
    return _int64(value, value, node, key, "an integer or None")


def parse_float(value: str, node: str, key: str) -> float:
    if not _FLOAT.fullmatch(parse_str(value, node, key)):
        _bad(value, node, key, "a number")
    return float(value)


def parse_ints(value: str, node: str, key: str) -> tuple[int, ...] | None:
    """MXNet's tuple syntax: "(2, 0, 8)", "[1,2]", "()", "(1,)", a bare "5"; "None" -> None."""
    text = parse_str(value, node, key).strip()
    if text == "None":
        return None
    expected = "a tuple of integers such as (2, 3)"
    if _TUPLE_ITEM.fullmatch(text):
        return (_int64(_TUPLE_ITEM.fullmatch(text)[1], value, node, key, expected),)
    if len(text) < 2 or text[0] not in "([" or text[-1] not in ")]":
        _bad(value, node, key, expected)
    inner = text[1:-1].strip()
    items = inner.split(",") if inner else []
    if items and not items[-1].strip():  # "(1,)"
        items.pop()
    matches = [_TUPLE_ITEM.fullmatch(item) for item in items]
    if not all(matches):
        _bad(value, node, key, expected)
    return tuple(_int64(m[1], value, node, key, expected) for m in matches)


# Parsers by kind, each called as parser(value, node name, attribute name).
PARSERS: dict[str, Callable[[str, str, str], object]] = {
    "str": parse_str,
    "bool": parse_bool,
    "int": parse_int,
    "optional_int": parse_optional_int,
    "float": parse_float,
    "ints": parse_ints,
}
