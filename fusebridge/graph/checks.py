"""What a Session checks on the graph it is given before it builds anything, and how it names
the feed behind a value in its messages.

A Session runs values by name (ONNX Runtime partitions are serialized, our steps read an
environment keyed by name), so a graph handed over as an onnx_ir.Model must be one that ONNX
could serialize: every value named once in its scope and the scopes around it, every value read
defined there, outputs that exist, no cycle. check_graph says which value or node breaks that,
as a ModelFormatError, instead of a KeyError or a silently wrong run later."""

from __future__ import annotations

from collections.abc import Mapping

import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import ModelFormatError

# The single-input standard ops a value passes through unchanged but for its type: a feed
# seen through them is still "that feed" in a message (MXNet casts float lengths to int64).
_PASS_THROUGH = ("Identity", "Cast")


def qualified_op(node: ir.Node) -> str:
    """An IR node's op type, with its domain when that is not ONNX's (`fusebridge.Dropout`)."""
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def describe(node: ir.Node) -> str:
    """How every message names an IR node: `GRU node 'g'`, `fusebridge.FusionGRU node 'g'`."""
    return f"{qualified_op(node)} node {node.name!r}"


def check_graph(graph: ir.Graph, who: str = "Session") -> None:
    """Raises ModelFormatError naming the value or node when `graph` (with its subgraphs)
    cannot be run as ONNX would read it; `who` (the Session, a pass) starts the message. A
    file fusebridge.load read passes (onnx.checker saw to it); a model built or edited in
    memory may not, and onnx_ir's sort would fail on it with a bare ValueError, a rewrite on a
    dangling value with a KeyError, onnx's shape inference abort on a negative dim."""
    if not graph.outputs:
        raise ModelFormatError(f"{who}: the graph has no outputs, so there is nothing to run")
    _check_scope(graph, {}, "", who)


def _check_scope(
    graph: ir.Graph, outer: Mapping[str, tuple[ir.Value, str]], where: str, who: str
) -> set[ir.Value]:
    """Checks one graph whose enclosing scopes define `outer` (name -> (value, what it is));
    returns the values it (or a graph inside it) reads from those scopes."""
    defined = dict(outer)

    def define(value: ir.Value, what: str) -> None:
        if not value.name:
            raise ModelFormatError(f"{who}: {where}{what} has no name")
        seen = defined.get(value.name)
        if seen is not None and seen[0] is not value:
            raise ModelFormatError(
                f"{who}: {where}the name {value.name!r} is given to two values, "
                f"{seen[1]} and {what}"
            )
        defined[value.name] = (value, what)
        dims = [] if value.shape is None else [d for d in value.shape if isinstance(d, int)]
        if any(d < 0 for d in dims):
            raise ModelFormatError(
                f"{who}: {where}{what} is declared with shape {list(value.shape)}, expected no "
                "negative dim"
            )

    def listed_once(values: list[ir.Value], kind: str) -> None:
        seen: set[ir.Value] = set()
        for v in values:
            if v in seen:
                raise ModelFormatError(f"{who}: {where}{kind} {v.name!r} is listed twice")
            seen.add(v)

    listed_once(list(graph.inputs), "input")
    listed_once(list(graph.outputs), "output")
    for v in graph.inputs:
        define(v, f"input {v.name!r}")
    for v in graph.initializers.values():
        if v.const_value is None:
            raise ModelFormatError(f"{who}: {where}initializer {v.name!r} holds no data")
        define(v, f"initializer {v.name!r}")
    for node in graph:
        for v in node.outputs:
            if not v.name and not v.uses() and not v.is_graph_output():
                continue  # an optional output left off (ONNX writes it as ""; nothing reads it)
            define(v, f"output {v.name!r} of {describe(node)}")

    def read(value: ir.Value, reader: str) -> ir.Value:
        """value, when it is the one its name defines here (reader: "node 'n' reads")."""
        seen = defined.get(value.name)
        if seen is None:
            raise ModelFormatError(
                f"{who}: {where}{reader} {value.name!r}, which no node produces and which is "
                "neither a graph input nor an initializer"
            )
        if seen[0] is not value:
            raise ModelFormatError(
                f"{who}: {where}{reader} a value named {value.name!r} that is not "
                f"{seen[1]} (a value of another graph, or one removed from this graph)"
            )
        return value

    captured: set[ir.Value] = set()
    reads: dict[ir.Node, list[ir.Value]] = {}
    for node in graph:
        reads[node] = [read(v, f"{describe(node)} reads") for v in node.inputs if v is not None]
        for attr, body in conventions.subgraphs(node):
            inner = _check_scope(body, defined, f"in {attr} of {describe(node)}, ", who)
            # No name is defined twice across scopes, so a name of `outer` is outer's value.
            reads[node] += [v for v in inner if v.name not in outer]
            captured |= {v for v in inner if v.name in outer}
    for v in graph.outputs:
        read(v, "the graph lists as output")
    captured |= {v for vs in reads.values() for v in vs if v.name in outer}
    _check_acyclic(graph, reads, where, who)
    return captured


def _check_acyclic(
    graph: ir.Graph, reads: Mapping[ir.Node, list[ir.Value]], where: str, who: str
) -> None:
    """Kahn's algorithm over the nodes of one graph; names the nodes that are left."""
    nodes = list(graph)
    producers = {n: {v.producer() for v in reads[n]} & reads.keys() for n in nodes}
    users: dict[ir.Node, list[ir.Node]] = {n: [] for n in nodes}
    for n, ps in producers.items():
        for p in ps:
            users[p].append(n)
    waiting = {n: len(ps) for n, ps in producers.items()}
    ready = [n for n in nodes if waiting[n] == 0]
    while ready:
        for u in users[ready.pop()]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    left = [n for n in nodes if waiting[n] > 0]
    if left:
        shown = ", ".join(describe(n) for n in left[:6]) + (", ..." if len(left) > 6 else "")
        raise ModelFormatError(
            f"{who}: {where}the graph has a cycle: {len(left)} node(s) wait on each other or "
            f"on a cycle ({shown})"
        )


def feed_behind(
    value: ir.Value, feeds: Mapping[str, ir.Value], through_ops: tuple[str, ...] = _PASS_THROUGH
) -> tuple[str, list[str]] | None:
    """(feed name, the ops between it and value) when value is one of `feeds` or reaches from
    one through `through_ops` (Identity or Cast) nodes only, each by its first input and
    output; None otherwise."""
    through = []
    while feeds.get(value.name) is not value:
        node = value.producer()
        if (
            node is None
            or node.domain not in ("", "ai.onnx")
            or node.op_type not in through_ops
            or node.outputs[0] is not value
        ):
            return None
        if not node.inputs or node.inputs[0] is None:
            return None
        through.append(node.op_type)
        value = node.inputs[0]
    return value.name, through


def feed_phrase(value: ir.Value | None, feeds: Mapping[str, ir.Value]) -> str:
    """'input 'x'' or 'input 'x' through Cast', for a value that comes straight from a feed;
    '' otherwise."""
    found = None if value is None else feed_behind(value, feeds)
    if found is None:
        return ""
    name, through = found
    return f"input {name!r}" + (f" through {', '.join(through)}" if through else "")
