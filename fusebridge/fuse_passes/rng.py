"""explicit_rng: a model's random state becomes explicit inputs and an output.

A training dropout without a seed input (fusebridge Dropout with is_test = 0, or a fused
dropout: any fusebridge op whose schema has seed? and offset? inputs and a mask? output) draws
from a generator the graph does not show. This pass gives the graph the int64 scalar inputs
`rng_seed` and `rng_offset` and the int64 scalar output `rng_offset_out`, and gives every such
op seed = rng_seed and an offset of its own (docs/dropout.md, "Streams and keys").
Dropouts that already have a seed input keep it and take no offset; is_test dropouts draw
nothing.

Stream order (docs/dropout.md, "Streams in a graph"): the dropouts executed in one run take
rng_offset, rng_offset + 1, ... in the order they execute when each graph runs its nodes in
graph order. Graph order is the order of the nodes in the graph after a stable topological
sort (ONNX stores nodes sorted, so it is the order of the file). An If takes the next offsets
in the branch that runs (each branch counts from the offset at the If) and hands the next free
offset on as an extra output; a Loop carries the offset as an extra loop-carried value, so each
iteration continues where the previous one stopped. rng_offset_out is rng_offset plus the
number of dropouts executed on the path taken. Offsets wrap modulo 2^64 like int64 Add.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.errors import ArgumentError
from fusebridge.fuse_passes.passes import FusePass
from fusebridge.fuse_passes.report import PassReport
from fusebridge.graph.checks import check_graph
from fusebridge.random import OFFSET_INPUT, OFFSET_OUTPUT, SEED_INPUT

_STATE = (SEED_INPUT, OFFSET_INPUT, OFFSET_OUTPUT)


@dataclasses.dataclass(frozen=True)
class RngStream:
    op: str  # Dropout, or a fused dropout (MatMulDropout, SoftmaxDropout)
    node: str  # the node's name
    graph: str  # where it lives: "main", or a path such as "main/Loop 'l'/body"
    offset: str  # the offset it gets, as "<value> + k"


@dataclasses.dataclass(frozen=True)
class RngReport:
    streams: tuple[RngStream, ...]  # the nodes given a stream, in stream order per graph
    seeded: tuple[str, ...]  # training dropouts that brought their own seed: left alone

    @property
    def count(self) -> int:
        return len(self.streams)

    @property
    def notes(self) -> tuple[str, ...]:
        """One line per dropout: its stream, or that it keeps its own seed."""
        return (
            *(f"{s.op} {s.node!r} in {s.graph}: offset {s.offset}" for s in self.streams),
            *(f"{name!r}: has its own seed, left alone" for name in self.seeded),
        )

    def text(self) -> str:
        lines = [f"explicit_rng: {self.count} dropout(s) given a stream"]
        return "\n".join([*lines, *(f"  {note}" for note in self.notes)])

    def __str__(self) -> str:
        return self.text()


def _rng_slots(node: ir.Node) -> tuple[int, int] | None:
    """(seed, offset) input positions of a fusebridge op that draws random numbers now
    (Dropout with is_test 0, and the fused dropouts: any schema with seed? and offset? inputs
    and a mask? output). DropoutGrad takes seed and offset too, but only to redraw its
    forward's bits: it gets the forward's stream (recompute_dropout_mask), never its own."""
    schema = ops.SCHEMAS.get(node.op_type) if conventions.is_fusebridge(node) else None
    if schema is None or not {"seed?", "offset?"} <= set(schema.inputs):
        return None
    if "mask?" not in schema.outputs:
        return None
    if any(a.name == "is_test" for a in schema.attributes):
        if schema.attribute_values(node)["is_test"]:
            return None
    return schema.inputs.index("seed?"), schema.inputs.index("offset?")


def _given(node: ir.Node, slot: int) -> bool:
    return len(node.inputs) > slot and node.inputs[slot] is not None


def _draws_hidden(node: ir.Node) -> bool:
    slots = _rng_slots(node)
    return slots is not None and not _given(node, slots[0])


def _hidden(graph: ir.Graph | ir.Function) -> int:
    """How many dropouts in graph and its subgraphs draw from the hidden generator."""
    count = 0
    for node in graph:
        if _draws_hidden(node):
            count += 1
        count += sum(_hidden(g) for _, g in conventions.subgraphs(node))
    return count


def _refusal(graph: ir.Graph, where: str) -> str | None:
    """Why the pass cannot thread graph, checked before it changes anything."""
    for node in graph:
        if _draws_hidden(node) and _given(node, _rng_slots(node)[1]):
            return f"{node.op_type} {node.name!r} in {where} has an offset input but no seed"
        inner = [(n, g) for n, g in conventions.subgraphs(node) if _hidden(g)]
        label = f"{node.op_type} {node.name!r}"
        if inner and not (node.domain == "" and node.op_type in ("If", "Loop")):
            return (
                f"{label} in {where} holds training dropouts without a seed in "
                f"{[n for n, _ in inner]}; only If and Loop bodies are threaded"
            )
        for n, g in inner:
            why = _refusal(g, f"{where}/{label}/{n}")
            if why:
                return why
    return None


def _names(graph: ir.Graph) -> set[str]:
    names = {v.name for v in (*graph.inputs, *graph.initializers.values()) if v.name}
    for node in graph:
        names.update(v.name for v in node.outputs if v.name)
        for _, g in conventions.subgraphs(node):
            names |= _names(g)
    return names


def _int64_scalar(name: str) -> ir.Value:
    return ir.Value(name=name, type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([]))


class _Threader:
    def __init__(self, model: ir.Model, seed: ir.Value) -> None:
        self.main = model.graph
        self.seed = seed
        self.taken = _names(model.graph) | set(_STATE)
        self.deltas: dict[int, ir.Value] = {}
        self.streams: list[RngStream] = []

    def name(self, hint: str) -> str:
        return conventions.unique_name(hint, self.taken)

    def delta(self, k: int) -> ir.Value:
        """The int64 constant k: one initializer of the main graph per k, which subgraphs
        read from the outer scope."""
        if k not in self.deltas:
            name = self.name(f"rng_offset_delta_{k}")
            v = ir.Value(name=name, const_value=ir.tensor(np.array(k, np.int64), name=name))
            v.type, v.shape = ir.TensorType(ir.DataType.INT64), ir.Shape([])
            self.main.register_initializer(v)
            self.deltas[k] = v
        return self.deltas[k]

    def offset(self, graph: ir.Graph, before: ir.Node | None, base: ir.Value, k: int, hint: str):
        """base + k as a value of graph, computed before `before` (at the end when None)."""
        if k == 0:
            return base
        add = ir.node("Add", [base, self.delta(k)], name=self.name(f"{hint}_add"))
        out = add.outputs[0]
        out.name, out.type, out.shape = self.name(hint), base.type, ir.Shape([])
        if before is None:
            graph.append(add)
        else:
            graph.insert_before(before, add)
        return out

    def result(self, graph: ir.Graph, value: ir.Value, hint: str) -> ir.Value:
        """value as something graph itself produces, so that it can be a graph output (an outer
        or input value as a subgraph's output is refused by some runtimes)."""
        producer = value.producer()
        if producer is not None and producer.graph is graph:
            return value
        ident = ir.node("Identity", [value], name=self.name(f"{hint}_identity"))
        out = ident.outputs[0]
        out.name, out.type, out.shape = self.name(hint), value.type, ir.Shape([])
        graph.append(ident)
        return out

    def thread(self, graph: ir.Graph, where: str, base: ir.Value) -> ir.Value:
        """Gives graph's dropouts their streams from `base` on; returns the offset after them
        (a value of graph, or base itself when nothing in graph draws)."""
        k = 0
        for node in list(graph):
            if _draws_hidden(node):
                seed_slot, offset_slot = _rng_slots(node)
                hint = f"rng_offset_{node.name or node.op_type}"
                offset = self.offset(graph, node, base, k, hint)
                node.resize_inputs(max(len(node.inputs), offset_slot + 1))
                node.replace_input_with(seed_slot, self.seed)
                node.replace_input_with(offset_slot, offset)
                stream = RngStream(node.op_type, node.name or "", where, f"{base.name} + {k}")
                self.streams.append(stream)
                k += 1
                continue
            inner = [(n, g) for n, g in conventions.subgraphs(node) if _hidden(g)]
            if not inner:
                continue
            # An If or a Loop (_refusal let nothing else through).
            label = f"{node.op_type} {node.name!r}"
            at = self.offset(graph, node, base, k, f"rng_offset_before_{node.name or 'node'}")
            thread = self._if if node.op_type == "If" else self._loop
            base, k = thread(graph, node, f"{where}/{label}", at), 0
        return self.offset(graph, None, base, k, "rng_offset_next")

    def _if(self, graph: ir.Graph, node: ir.Node, where: str, at: ir.Value) -> ir.Value:
        for name in ("then_branch", "else_branch"):
            branch = node.attributes[name].value
            end = self.thread(branch, f"{where}/{name}", at)
            branch.outputs.append(self.result(branch, end, f"rng_offset_{name}"))
        node.resize_outputs(len(node.outputs) + 1)
        out = node.outputs[-1]
        out.name, out.type = self.name(f"rng_offset_after_{node.name or 'if'}"), at.type
        out.shape = ir.Shape([])
        return out

    def _loop(self, graph: ir.Graph, node: ir.Node, where: str, at: ir.Value) -> ir.Value:
        body = node.attributes["body"].value
        carried = len(node.inputs) - 2
        iteration = _int64_scalar(self.name("rng_offset_iter"))
        body.inputs.append(iteration)
        end = self.thread(body, f"{where}/body", iteration)
        # Body outputs: cond, the carried values, then the scan outputs; ours is the last
        # carried one, and so is the Loop's matching output.
        body.outputs.insert(1 + carried, self.result(body, end, "rng_offset_iter_next"))
        new = ir.Node(
            node.domain,
            node.op_type,
            [*node.inputs, at],
            list(node.attributes.values()),
            overload=node.overload,
            num_outputs=len(node.outputs) + 1,
            version=node.version,
            name=node.name,
            doc_string=node.doc_string,
            metadata_props=dict(node.metadata_props),
        )
        olds = list(node.outputs)
        news = [v for i, v in enumerate(new.outputs) if i != carried]
        for old, replacement in zip(olds, news):
            name, old.name = old.name, None
            replacement.name, replacement.type, replacement.shape = name, old.type, old.shape
            old.replace_all_uses_with(replacement, replace_graph_outputs=True)
        graph.insert_before(node, new)
        graph.remove(node, safe=True)
        out = new.outputs[carried]
        out.name, out.type = self.name(f"rng_offset_after_{node.name or 'loop'}"), at.type
        out.shape = ir.Shape([])
        return out


def explicit_rng(model: ir.Model) -> RngReport:
    """Rewrites `model` in place: its hidden-generator dropouts draw from the new inputs
    rng_seed and rng_offset, and rng_offset_out hands the next free offset on. A model with no
    such dropout is left as it is (so the pass can run twice)."""
    check_graph(model.graph, "explicit_rng")
    for function in model.functions.values():
        if _hidden(function):
            raise ArgumentError(
                f"explicit_rng: function {function.name!r} holds training dropouts without a "
                "seed; inline it first"
            )
    graph = model.graph
    seeded = tuple(
        n.name or ""
        for n in ir.traversal.RecursiveGraphIterator(graph)
        if _rng_slots(n) is not None and _given(n, _rng_slots(n)[0])
    )
    if not _hidden(graph):
        return RngReport((), seeded)
    clash = sorted(_names(graph) & set(_STATE))
    if clash:
        raise ArgumentError(f"explicit_rng: the model already has values named {clash}")
    why = _refusal(graph, "main")
    if why:
        raise ArgumentError(f"explicit_rng: {why}")
    graph.sort()
    seed, base = _int64_scalar(SEED_INPUT), _int64_scalar(OFFSET_INPUT)
    graph.inputs.extend([seed, base])
    threader = _Threader(model, seed)
    end = threader.thread(graph, "main", base)
    if end.producer() is None or end.producer().graph is not graph:
        end = threader.result(graph, end, OFFSET_OUTPUT)
    end.name = OFFSET_OUTPUT
    graph.outputs.append(end)
    return RngReport(tuple(threader.streams), seeded)


class ExplicitRng(FusePass):
    """explicit_rng as a pass of a pipeline."""

    name = "explicit_rng"

    def run(self, model: ir.Model) -> PassReport:
        report = explicit_rng(model)
        return PassReport(self.name, report.count > 0, report.count, notes=report.notes)
