"""What the passes need of a graph before they rewrite it: every value read is defined (a
graph input, an initializer, or the output of a node in the graph or around it), no two values
share a name, and no node depends on itself. A file fusebridge.load read passes (onnx.checker
saw to it); an onnx_ir.Model built or edited in memory may not, and onnx_ir's sort would fail
on it with a bare ValueError, a rewrite on a dangling value with a KeyError."""

from __future__ import annotations

import onnx_ir as ir

from fusebridge import ir as fir
from fusebridge.errors import ModelFormatError


def check_graph(model: ir.Model, where: str) -> None:
    """ModelFormatError naming the node and the value for the first problem found; `where`
    (the pass) starts the message."""
    _check(model.graph, where, {})


def _label(node: ir.Node) -> str:
    return f"{node.op_type} node {node.name!r}"


def _defined(value: ir.Value) -> bool:
    producer = value.producer()
    if producer is not None:
        return producer.graph is not None
    return value.is_graph_input() or value.is_initializer()


def _claim(value: ir.Value, names: dict[str, ir.Value], where: str) -> None:
    if not value.name:
        return  # unnamed: onnx_ir names it when it writes the model
    other = names.setdefault(value.name, value)
    if other is not value:
        raise ModelFormatError(f"{where}: two values are named {value.name!r}")


def _check(graph: ir.Graph, where: str, names: dict[str, ir.Value]) -> None:
    for value in [*graph.inputs, *graph.initializers.values()]:
        _claim(value, names, where)
    for node in graph:
        for value in node.outputs:
            _claim(value, names, where)
    for node in graph:
        for value in node.inputs:
            if value is not None and not _defined(value):
                raise ModelFormatError(
                    f"{where}: {_label(node)} reads {value.name!r}, which no node, graph input "
                    "or initializer defines"
                )
        for _, sub in fir.subgraphs(node):
            # A subgraph sees the names around it; sibling subgraphs may reuse each other's.
            _check(sub, where, dict(names))
    for value in graph.outputs:
        if not _defined(value):
            raise ModelFormatError(
                f"{where}: graph output {value.name!r} is not produced by any node, nor a graph "
                "input or initializer"
            )
    _check_acyclic(graph, where)


def _check_acyclic(graph: ir.Graph, where: str) -> None:
    """Depth-first search over the nodes of `graph`, a node depending on the producers of its
    inputs and of the values its subgraphs read from this graph."""
    nodes = list(graph)
    state = dict.fromkeys(nodes, 0)  # 0 unseen, 1 on the current path, 2 done

    def deps(node: ir.Node) -> list[ir.Node]:
        reads = list(node.inputs)
        for _, sub in fir.subgraphs(node):
            reads += [v for n in ir.traversal.RecursiveGraphIterator(sub) for v in n.inputs]
            reads += list(sub.outputs)
        producers = (v.producer() for v in reads if v is not None)
        return [p for p in producers if p is not None and p.graph is graph]

    for start in nodes:
        if state[start]:
            continue
        path, stack = [start], [iter(deps(start))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state[nxt] == 1:
                cycle = path[path.index(nxt) :] + [nxt]
                raise ModelFormatError(
                    f"{where}: the graph has a cycle: "
                    + " -> ".join(_label(n) for n in reversed(cycle))
                )
            elif state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(deps(nxt)))
