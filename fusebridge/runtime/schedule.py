"""Where a graph is cut: which nodes run where (ONNX Runtime partitions, our kernels, aliases,
control flow), in what order, and which values a run may hand out."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import ArgumentError

# The domains whose ops ONNX Runtime implements (its contrib ops among them): their nodes run
# in ONNX Runtime partitions, which declare the model's opset of each.
ORT_DOMAINS = (
    "",
    "ai.onnx",
    "ai.onnx.ml",
    "ai.onnx.training",
    "ai.onnx.preview",
    "ai.onnx.preview.training",
    "com.microsoft",
    "com.microsoft.nchwc",
    "com.microsoft.experimental",
    "com.ms.internal.nhwc",
    "org.pytorch.aten",
)


def subgraphs_within(node: ir.Node) -> list[ir.Graph]:
    """Every graph inside node, nested ones included."""
    graphs = [g for _, g in conventions.subgraphs(node)]
    return graphs + [g for graph in graphs for n in graph for g in subgraphs_within(n)]


def captured(node: ir.Node) -> list[ir.Value]:
    """The values node's subgraphs read from the scopes around node (ONNX outer-scope
    references): a step running node needs them as inputs, and runs after their producers."""
    inner = subgraphs_within(node)
    if not inner:
        return []
    owned = set(inner)
    found: dict[ir.Value, None] = {}  # ordered, each value once
    for graph in inner:
        for v in [*(v for n in graph for v in n.inputs), *graph.outputs]:
            if v is None:
                continue
            owner = v.producer().graph if v.producer() is not None else v.graph
            if owner not in owned:
                found.setdefault(v)
    return list(found)


def _is_identity(node: ir.Node | None) -> bool:
    return node is not None and node.domain in ("", "ai.onnx") and node.op_type == "Identity"


def kind(node: ir.Node, on_device: Callable[[ir.Node], bool] | None = None) -> str:
    """Where node runs: "fusebridge" (our kernels), "alias", "control", "onnx" (an ONNX Runtime
    partition) or, in a program on a device, "device" for a standard node that `on_device`
    says the device implements (device_ops.py)."""
    if conventions.is_fusebridge(node):
        return "fusebridge"
    if _is_identity(node):
        # An alias (no copy, no step of its own) of a feed, an initializer or our kernels'
        # output; of an ONNX node's output it joins that partition: as a step of its own it
        # would cut the partition, costing a run call where ONNX Runtime copies or elides it.
        source = node
        while _is_identity(source) and source.inputs and source.inputs[0] is not None:
            source = source.inputs[0].producer()
        joins = source is not None and not _is_identity(source)
        return "onnx" if joins and kind(source, on_device) == "onnx" else "alias"
    if node.domain in ("", "ai.onnx") and node.op_type in ("If", "Loop"):
        # Our ops inside: the control flow runs here, its bodies as programs of their own.
        inside = any(conventions.is_fusebridge(n) for g in subgraphs_within(node) for n in g)
        return "control" if inside else "onnx"
    if node.domain in ORT_DOMAINS:
        return "device" if on_device is not None and on_device(node) else "onnx"
    raise ArgumentError(
        f"Session: node {node.name!r} ({node.op_type}) has domain {node.domain!r}, which no "
        f"backend runs (ONNX Runtime runs the domains {list(ORT_DOMAINS)}, our kernels "
        f"{conventions.DOMAIN!r})"
    )


def ort_opsets(opset_imports: dict[str, int]) -> dict[str, int]:
    """The opset imports an ONNX Runtime partition of a model declares: the model's own, of
    the domains ONNX Runtime implements ("ai.onnx" as ""; opset 17 where none is given)."""
    found = {("" if d == "ai.onnx" else d): v for d, v in opset_imports.items() if d in ORT_DOMAINS}
    found.setdefault("", conventions.ONNX_OPSET)
    return found


def handed_out(
    groups: list[list[ir.Node]], graph: ir.Graph, kind: Callable[[ir.Node], str] = kind
) -> set[str]:
    """The names of the values whose arrays a run of `graph` may hand out: its outputs and,
    walking back, every input of a step that may return an input as its output. Identity steps
    do; If and Loop steps do (a branch may return a value from around it, a Loop that runs zero
    times its initial values); so may a device step (a Reshape's view); so may our kernels (an
    inference Dropout of scale 1 returns its input; counting every kernel keeps this true for
    ops added later, at the price of buffer reuse for a kernel that only feeds another kernel's
    graph output). ONNX Runtime returns arrays it allocated in that run, never a feed, an
    initializer or another output's."""
    out = {v.name for v in graph.outputs}
    for group in reversed(groups):  # a topological order: every reader before its producer
        node = group[0]
        if kind(node) != "onnx" and any(v.name in out for v in node.outputs):
            out.update(v.name for v in [*node.inputs, *captured(node)] if v is not None)
    return out


def schedule(
    nodes: Sequence[ir.Node], kind: Callable[[ir.Node], str] = kind
) -> list[list[ir.Node]]:
    """Nodes in a topological order that keeps ONNX nodes together as long as it can, cut into
    runs of one kind. A run of consecutive nodes of a topological order is executable as one
    unit, so each ONNX run becomes one ONNX Runtime session. `kind` may say "onnx" of a node
    the placement would lower to standard ONNX (placement.py counts partitions that way)."""
    index = {n: i for i, n in enumerate(nodes)}
    waiting = {n: 0 for n in nodes}
    users: dict[ir.Node, list[ir.Node]] = {n: [] for n in nodes}
    for n in nodes:
        reads = [*n.inputs, *captured(n)]
        producers = {v.producer() for v in reads if v is not None} & waiting.keys()
        waiting[n] = len(producers)
        for p in producers:
            users[p].append(n)
    ready = [n for n in nodes if waiting[n] == 0]
    groups: list[list[ir.Node]] = []
    while ready:
        current = groups[-1][0] if groups else None
        same = [n for n in ready if current is not None and kind(n) == kind(current) == "onnx"]
        # Continue an ONNX run if possible; otherwise run non-ONNX nodes before opening a new one.
        pick = min(same or [n for n in ready if kind(n) != "onnx"] or ready, key=index.get)
        ready.remove(pick)
        if same and pick in same:
            groups[-1].append(pick)
        else:
            groups.append([pick])
        for u in users[pick]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    if sum(map(len, groups)) != len(nodes):
        raise ArgumentError("Session: the graph has a cycle")
    return groups
