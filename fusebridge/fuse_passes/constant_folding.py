"""fold_constants: subgraphs that compute from constants alone (torch 2.x exporters reorder a
GRU's gates with Slice/Concat/Unsqueeze of its weights) replaced by their values, so that the
import finds constant weights. The folding is onnxscript's optimizer (its FoldConstantsPass,
with ONNX's reference implementation of each op), not ours; then the nodes nothing reads any
more are removed.

The folder only evaluates nodes whose inputs are all constants (initializers that are not graph
inputs, Constant nodes), and a Shape only where the dims it reads are fixed numbers in the file:
a dim the file leaves symbolic stays computed at run time."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import onnx_ir as ir
from onnx_ir.passes.common import RemoveUnusedNodesPass
from onnxscript.optimizer._constant_folding import FoldConstantsPass, Replacement

from fusebridge.fuse_passes.passes import FusePass
from fusebridge.fuse_passes.report import PassReport

# Elements (not bytes). A node reading a constant larger than INPUT_LIMIT is left alone: a
# weight matrix of up to 16M elements may still be sliced and reordered. A folded value larger
# than OUTPUT_LIMIT (16 MB of float32) is kept only where the constants it replaces, read by
# nothing else, were as large (onnxscript's rule), so folding never makes the model much larger
# (an Expand or Tile of a small constant to a large one stays computed).
INPUT_LIMIT = 1 << 24
OUTPUT_LIMIT = 1 << 22


class _Folder(FoldConstantsPass):
    """onnxscript's folder, leaving the standard ops in `kept` alone: besides folding, it
    rewrites some ops (an inference Dropout into an Identity), and the ops that the import
    passes convert (GRU, Dropout) are theirs to convert or to refuse, with the reason."""

    def __init__(self, kept: frozenset[str], input_limit: int, output_limit: int) -> None:
        super().__init__(
            shape_inference=False,  # the file's own types; inference runs after the import
            input_size_limit=input_limit,
            output_size_limit=output_limit,
        )
        self.kept = kept

    def process_node(self, node: ir.Node, is_function: bool) -> Replacement | None:
        if node.domain in ("", "ai.onnx") and node.op_type in self.kept:
            return None
        bound = output_bound(node)
        if bound is None or bound > self.output_size_limit:
            return None  # never evaluated: onnxscript checks a value's size after making it
        return super().process_node(node, is_function)


# Ops whose output has at most as many elements as their largest input (reshapes, slices,
# casts, unary elementwise ops, reductions).
_NOT_LARGER = frozenset(
    """Identity Cast CastLike Reshape Flatten Squeeze Unsqueeze Transpose Slice Split Shape
    Size Neg Abs Relu Sigmoid Tanh Sqrt Reciprocal Exp Log Not Floor Ceil Round Sign Erf
    ReduceSum ReduceMean ReduceMax ReduceMin ReduceProd ArgMax ArgMin Softmax""".split()
)
# Ops whose output takes the broadcast shape of their inputs.
_BROADCAST = frozenset("Add Sub Mul Div Pow Equal Less Greater And Or Where Min Max".split())


def output_bound(node: ir.Node) -> int | None:
    """An upper bound of the elements node's output can have when every input is a constant
    (0 for a node with an input computed at run time, which the folder does not evaluate), or
    None where the output's size is not bounded by its inputs' (Range, Expand, Tile,
    ConstantOfShape, Resize, ... take sizes from input values): such a node is not folded. A
    file cannot make the folder allocate more than its output limit."""
    if node.domain not in ("", "ai.onnx"):
        return None
    if node.op_type == "Constant":
        return 0  # its value is in the file already
    # Constants as the folder sees them: initializers, Constant nodes, what it folded so far.
    values = [ir.convenience.get_const_tensor(v) for v in node.inputs if v is not None]
    if any(t is None for t in values):
        return 0
    shapes = [tuple(t.shape) for t in values]
    sizes = [math.prod(s) for s in shapes]
    if node.op_type in _NOT_LARGER:
        return max(sizes, default=0)
    if node.op_type == "Concat":
        return sum(sizes)
    if node.op_type in _BROADCAST:
        try:
            return math.prod(np.broadcast_shapes(*shapes))
        except ValueError:  # shapes that do not broadcast: nothing to fold
            return None
    if node.op_type == "Gather" and len(shapes) == 2 and shapes[0]:
        axis = node.attributes.get_int("axis", 0) % len(shapes[0])
        return sizes[1] * sizes[0] // max(shapes[0][axis], 1)
    return None


class FoldConstants(FusePass):
    """Constant subgraphs folded into initializers, the standard ops in `kept` left as they
    are; fired counts the nodes that went, the note lists them by op type."""

    name = "fold_constants"

    def __init__(
        self,
        kept: tuple[str, ...] = (),
        input_limit: int = INPUT_LIMIT,
        output_limit: int = OUTPUT_LIMIT,
    ) -> None:
        self.kept = frozenset(kept)
        self.input_limit = input_limit
        self.output_limit = output_limit

    def run(self, model: ir.Model) -> PassReport:
        before = list(model.graph)
        folder = _Folder(self.kept, self.input_limit, self.output_limit)
        folded = folder(model).modified
        if folded:
            RemoveUnusedNodesPass()(model)
        now = set(model.graph)
        gone = Counter(n.op_type for n in before if n not in now)
        notes = ()
        if gone:
            what = ", ".join(f"{op} x{k}" for op, k in sorted(gone.items()))
            notes = (f"folded or removed: {what}",)
        return PassReport(self.name, folded, sum(gone.values()), notes=notes)
