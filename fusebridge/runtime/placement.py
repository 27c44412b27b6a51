"""Where each fusable node runs: on our kernel, or lowered to its standard ONNX form inside the
ONNX Runtime partition around it. Decided by cost per run from the feeds' shapes (and the
sequence lengths fed): an estimate of the node's time on our kernel and in ONNX Runtime, plus
what each extra ONNX Runtime partition costs (one more `run` call, the arrays crossing into
Python and back, ORT's threads waking). The decision reads shapes, lengths and the model only,
never a clock or the thread count, so a run's placement is reproducible.

The candidates are the nodes of the main graph whose op has a recurrence, a placement cost and
a lowering (OpDef: today GRU and FusionGRU), with a padded layout (tnc, ntc), whose lowering
succeeds. Every other fusebridge node stays on our kernel: the
LoD ops and layout lod have no cheap standard form, dropouts draw our Philox streams, which ONNX
Runtime would not reproduce, and nodes inside If/Loop bodies run where their control step does.

A candidate's steps T and batch N come from its input X's declared dims: a static size, or a
symbol that some graph input declares (its size in this run); an unknown dim (shape inference
named it unk__k) takes the same dim of the nearest candidate upstream (stacked recurrences keep T
and N); failing that, a candidate fed lengths takes N from their count and T from their maximum,
and one without counts each as 1 (DEFAULT_DIM): the smallest run, where one ONNX Runtime session
wins, so a node whose shape cannot be seen is left to ONNX Runtime."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import numpy as np
import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge.errors import Error
from fusebridge.graph.builder import OpBuilder
from fusebridge.graph.checks import describe, feed_behind
from fusebridge.ops.common import PlacementCost
from fusebridge.runtime.schedule import kind, schedule

# One more ONNX Runtime partition in a run, microseconds: its `run` call, the arrays crossing
# into Python and back, its threads waking. python -m benchmarks.placement_costs --threads 2
# (prints it with the GRU's constants, ops/gru.py GRU_COSTS), on a quiet 2-core AMD EPYC VM
# (AVX-512), 2 threads.
PARTITION_CALL_US = 1.08
DEFAULT_DIM = 1
_LENGTHS_THROUGH = ("Identity", "Cast", "TopK")

# A dim's source: a static size, a graph input's symbol, ("feed", name, axis), ("from", the
# index of a candidate upstream) or None (DEFAULT_DIM).
Source = int | str | tuple | None


@dataclasses.dataclass(frozen=True)
class Candidate:
    node: ir.Node
    index: int  # its position in the graph's node list (the same in every copy of the graph)
    steps: Source
    batch: Source
    cost: PlacementCost  # its op's (OpDef.cost)
    sizes: dict[str, int]  # what that cost reads, from the node's weights
    lengths_feed: str | None  # the feed that reaches its seq_lens through Identity/Cast


@dataclasses.dataclass(frozen=True)
class RunShape:
    """A candidate's shape in one run: steps T, batch N, filled = sum of the lengths fed (N * T
    without), resolved: no dim fell back to DEFAULT_DIM; checked: the lengths do not fit."""

    steps: int
    batch: int
    filled: int
    resolved: bool = True
    checked: bool = False
    from_lengths: bool = False  # T and N taken from the lengths fed (the shapes did not say)

    @property
    def empty(self) -> bool:
        """No step or no sequence: our kernel returns empty outputs (and h0 as the last state),
        which ONNX Runtime's GRU cannot (it ends the process without sequence_lens)."""
        return self.steps == 0 or self.batch == 0


@dataclasses.dataclass(frozen=True)
class Decision:
    """Where one fusebridge node runs in a run, and why; estimates in microseconds (None for a
    node that is not a candidate)."""

    node: str
    on_kernel: bool
    reason: str
    kernel_us: float | None = None
    ort_us: float | None = None
    cut_us: float | None = None
    shape: str = ""

    def text(self) -> str:
        where = "kernel" if self.on_kernel else "ONNX Runtime"
        line = f"{self.node}: {where}"
        if self.kernel_us is not None:
            line += (
                f" ({self.shape}; kernel {self.kernel_us:.1f} us, ONNX Runtime {self.ort_us:.1f}"
                f" us, partition cuts {self.cut_us:+.1f} us)"
            )
        return f"{line}: {self.reason}"


class Placement:
    """The candidates of one graph (the Session's, after shape inference) and the placement of
    a run: a tuple of bools, True where a candidate runs on our kernel."""

    def __init__(self, graph: ir.Graph, feeds: Mapping[str, ir.Value]) -> None:
        self._nodes = list(graph)
        symbols = {
            d.value
            for v in feeds.values()
            if v.shape is not None
            for d in v.shape
            if isinstance(d, ir.SymbolicDim) and d.value is not None
        }
        self.refused: dict[ir.Node, str] = {}  # fusebridge nodes that always run on our kernel
        self.candidates: list[Candidate] = []
        for index, node in enumerate(self._nodes):
            if not conventions.is_fusebridge(node):
                continue
            why = _refusal(node)
            if why:
                self.refused[node] = why
                continue
            self.candidates.append(self._candidate(node, index, symbols, feeds))
        # The feed symbols a decision reads, in a fixed order: with the lengths, a run's key.
        self.symbols = tuple(
            sorted({s for c in self.candidates for s in (c.steps, c.batch) if isinstance(s, str)})
        )
        self.lengths_feeds = tuple(
            sorted({c.lengths_feed for c in self.candidates if c.lengths_feed})
        )
        self.shaped_feeds = tuple(
            sorted({s[1] for c in self.candidates for s in (c.steps, c.batch) if _fed(s)})
        )
        self._groups: dict[tuple[bool, ...], int] = {}

    def _candidate(
        self, node: ir.Node, index: int, symbols: set[str], feeds: Mapping[str, ir.Value]
    ) -> Candidate:
        d = ops.op(node.op_type)
        x = node.inputs[0]
        axes = (0, 1) if _layout(node) == "tnc" else (1, 0)
        sources = [self._source(x, axis, symbols, feeds) for axis in axes]
        lengths = d.input(node, d.recurrence.lengths)
        # TopK's values: torch's pack_padded_sequence sorts the lengths; the cost reads only
        # their sum and maximum.
        fed = None if lengths is None else feed_behind(lengths, feeds, _LENGTHS_THROUGH)
        return Candidate(
            node,
            index,
            sources[0],
            sources[1],
            d.cost,
            d.cost.sizes(node),
            None if fed is None else fed[0],
        )

    def _source(
        self, x: ir.Value, axis: int, symbols: set[str], feeds: Mapping[str, ir.Value]
    ) -> Source:
        dim = x.shape[axis] if x.shape is not None and len(x.shape) == 3 else None
        if isinstance(dim, int):
            return dim
        if dim is not None and dim.value in symbols:
            return dim.value
        fed = feed_behind(x, feeds)
        if fed is not None:  # a feed of undeclared shape: its size in the run
            return ("feed", fed[0], axis)
        upstream = self._upstream_candidate(x)
        return None if upstream is None else ("from", upstream)

    def _upstream_candidate(self, x: ir.Value) -> int | None:
        """The index (in self.candidates) of the nearest candidate behind x, breadth first."""
        found = {c.node: k for k, c in enumerate(self.candidates)}
        seen, frontier = set(), [x]
        while frontier:
            nxt = []
            for v in frontier:
                node = v.producer() if v is not None else None
                if node is None or node in seen:
                    continue
                if node in found:
                    return found[node]
                seen.add(node)
                nxt += list(node.inputs)
            frontier = nxt
        return None

    # -- per run ----------------------------------------------------------------------------
    def key(self, dims: Mapping[str, tuple[int, str, int]], env: Mapping[str, np.ndarray]) -> tuple:
        """What a run's placement depends on: the sizes of the symbols and the lengths fed."""
        key = [dims[s][0] if s in dims else None for s in self.symbols]
        if self.shaped_feeds:
            key += [env[n].shape for n in self.shaped_feeds]
        if self.lengths_feeds:
            key += [env[n].tobytes() for n in self.lengths_feeds]
        return tuple(key)

    def shapes(
        self, dims: Mapping[str, tuple[int, str, int]], env: Mapping[str, np.ndarray]
    ) -> list[RunShape]:
        """Each candidate's shape in this run."""
        out: list[RunShape] = []
        for c in self.candidates:
            resolved = True
            size = []
            for role, source in enumerate((c.steps, c.batch)):
                if isinstance(source, int):
                    size.append(source)
                elif isinstance(source, str) and source in dims:
                    size.append(dims[source][0])
                elif _fed(source) and len(env[source[1]].shape) == 3:
                    size.append(env[source[1]].shape[source[2]])
                elif isinstance(source, tuple) and source[0] == "from":
                    size.append((out[source[1]].steps, out[source[1]].batch)[role])
                    resolved = resolved and out[source[1]].resolved
                else:
                    size.append(DEFAULT_DIM)
                    resolved = False
            steps, batch = size
            filled, checked, from_lengths = steps * batch, False, False
            lengths = env.get(c.lengths_feed) if c.lengths_feed else None
            if lengths is not None and lengths.size:
                top = float(np.max(lengths))
                # Lengths that do not fit the padded steps (or the batch) go to our kernel,
                # whose check names the node and the feed; ONNX Runtime's would not.
                checked = resolved and (lengths.size != batch or top > steps)
                if not resolved:  # the lengths give the batch, and the padded steps at least
                    steps, batch, from_lengths = max(steps, int(top)), lengths.size, True
                filled = int(np.clip(lengths.astype(np.float64), 0, steps).sum())
            out.append(RunShape(steps, batch, filled, resolved, checked, from_lengths))
        return out

    def decide(self, shapes: list[RunShape]) -> tuple[bool, ...]:
        """The cheapest placement found: greedily from all in ONNX Runtime (moving the node that
        gains most to our kernel while the total drops) and from all on our kernels (moving back
        the other way); the better of the two."""
        best = min(
            (self._greedy(shapes, start) for start in (False, True)),
            key=lambda p: self.total(shapes, p),
        )
        return tuple(k or s.checked or s.empty for k, s in zip(best, shapes))

    def _greedy(self, shapes: list[RunShape], start: bool) -> tuple[bool, ...]:
        current = (start,) * len(self.candidates)
        cost = self.total(shapes, current)
        while True:
            moves = [current[:k] + (not start,) + current[k + 1 :] for k in range(len(current))]
            moves = [m for m in moves if m != current]
            if not moves:
                return current
            cheapest = min(moves, key=lambda m: self.total(shapes, m))
            if self.total(shapes, cheapest) >= cost:
                return current
            current, cost = cheapest, self.total(shapes, cheapest)

    def total(self, shapes: list[RunShape], placement: tuple[bool, ...]) -> float:
        run = sum(self.node_us(c, s, k) for c, s, k in zip(self.candidates, shapes, placement))
        return run + PARTITION_CALL_US * self.partitions(placement)

    @staticmethod
    def node_us(c: Candidate, shape: RunShape, on_kernel: bool) -> float:
        return c.cost.us(c.sizes, shape.steps, shape.batch, shape.filled, on_kernel)

    def partitions(self, placement: tuple[bool, ...]) -> int:
        """How many ONNX Runtime sessions a run of this placement calls (cached: it depends on
        the placement only)."""
        if placement not in self._groups:
            lowered = {c.node for c, k in zip(self.candidates, placement) if not k}

            def kind_of(node: ir.Node) -> str:
                return "onnx" if node in lowered else kind(node)

            groups = schedule(self._nodes, kind_of)
            self._groups[placement] = sum(kind_of(g[0]) == "onnx" for g in groups)
        return self._groups[placement]

    def explain(
        self, shapes: list[RunShape], placement: tuple[bool, ...], chosen: str = ""
    ) -> list[Decision]:
        """Per fusebridge node, in graph order: where it runs in this placement and why
        (`chosen`: the reason of every candidate, when the caller chose rather than the cost)."""
        decided = {c.node: (k, c, s) for k, (c, s) in enumerate(zip(self.candidates, shapes))}
        out = []
        for node in self._nodes:
            if node in self.refused:
                out.append(Decision(describe(node), True, self.refused[node]))
            if node not in decided:
                continue
            k, c, shape = decided[node]
            on = placement[k]
            flipped = placement[:k] + (not on,) + placement[k + 1 :]
            as_kernel, as_ort = (placement, flipped) if on else (flipped, placement)
            cut = PARTITION_CALL_US * (self.partitions(as_kernel) - self.partitions(as_ort))
            kernel_us, ort_us = self.node_us(c, shape, True), self.node_us(c, shape, False)
            text = f"T={shape.steps} N={shape.batch} filled {shape.filled}/"
            text += f"{shape.steps * shape.batch} " + " ".join(
                f"{k}={v}" for k, v in c.sizes.items()
            )
            if shape.from_lengths:
                text += ", T and N from the lengths fed (the shapes do not give them)"
            elif not shape.resolved:
                text += f", an unresolved dim counted as {DEFAULT_DIM}"
            if chosen:
                reason = chosen
            elif shape.checked:
                reason = "its lengths do not fit its input: the kernel checks them"
            elif shape.empty:
                reason = "no step or no sequence: the kernel returns empty outputs"
            elif on:
                reason = "its kernel estimate plus the cuts it makes is below ONNX Runtime's"
            else:
                reason = "ONNX Runtime's estimate is below the kernel's plus the cuts it makes"
            out.append(Decision(describe(node), on, reason, kernel_us, ort_us, cut, text))
        return out


def _layout(node: ir.Node) -> str:
    d = ops.op(node.op_type)
    return d.schema.attribute_values(node)[d.recurrence.layout]


def _fed(source: Source) -> bool:
    return isinstance(source, tuple) and source[0] == "feed"


def _refusal(node: ir.Node) -> str:
    """Why `node` always runs on our kernel; '' for a candidate."""
    d = ops.op(node.op_type)
    if d.lower is None:
        return "no standard ONNX form"
    if d.cost is None or d.recurrence is None:
        return "no cost model for this op (it stays where the model's passes put it)"
    if _layout(node) == "lod":
        return "layout lod: its standard form pads and unpads around the recurrence"
    probe = OpBuilder("probe")  # a scratch builder: nothing enters the graph
    try:
        ops.op(node.op_type).lower(probe, node)
    except Error as exc:
        return f"its standard form is refused: {exc}"
    finally:
        for made in probe.nodes:  # its nodes read the graph's values: no longer
            made.resize_inputs(0)
    return ""


def explain_text(decisions: Sequence[Decision]) -> str:
    if not decisions:
        return "placement: no fusebridge node (one ONNX Runtime session runs the whole model)"
    return "placement:\n" + "\n".join("  " + d.text() for d in decisions)
