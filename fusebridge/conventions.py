"""The IR's conventions: the package's version, our domain and its version, the opset and IR
version of files we write, how a LoD value's offsets are named, names made unique, a node's
subgraphs. The ops themselves are described in fusebridge/ops/."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import onnx_ir as ir

try:
    PACKAGE_VERSION = version("fusebridge")
except PackageNotFoundError:  # running from a source tree
    PACKAGE_VERSION = "0.0.0+source"
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


def opset_imports() -> dict[str, int]:
    return {"": ONNX_OPSET, DOMAIN: DOMAIN_VERSION}
