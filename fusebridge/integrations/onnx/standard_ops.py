"""Standard-ONNX subgraphs for LoD data, recorded on a tape: the pieces the portable export
builds our ops from. Every function takes the builder first, as onnxscript's `op`. The builder
knows its target opset (the model's): each standard op is recorded in its form at that opset
(opset_forms.py)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import UnsupportedOpError
from fusebridge.integrations.onnx.opset_forms import emit_at

_INT64_MAX = np.iinfo(np.int64).max


class OpBuilder(ir.tape.Tape):
    """`op.Gather(x, i, axis=0)` -> the output Value, the node recorded on the tape;
    `_outputs=k` gives k outputs, `_domain` another domain, `_name` the node's name.
    `op.const(array, hint)` -> an initializer named after `prefix` and `hint`, unique in
    `taken` (the graph's names). Standard ops are written in opset 17's form and recorded in
    their form at `opset` (the model's standard opset); one that has none there raises
    UnsupportedOpError naming the node (`prefix`), the op and the opset."""

    def __init__(
        self, prefix: str, taken: set[str] | None = None, opset: int = conventions.ONNX_OPSET
    ) -> None:
        super().__init__()
        self.prefix = prefix
        self.taken = taken if taken is not None else set()
        self.opset = opset
        self._consts: dict[tuple, ir.Value] = {}

    def __getattr__(self, op_type: str) -> Callable[..., ir.Value | tuple[ir.Value, ...]]:
        if not op_type[:1].isupper():
            raise AttributeError(op_type)

        def make(
            *inputs: ir.Value | None,
            _outputs: int = 1,
            _domain: str = "",
            _name: str | None = None,
            **attributes: object,
        ):
            inputs = list(inputs)
            while inputs and inputs[-1] is None:  # optional inputs left off at the end
                inputs.pop()
            where = {"domain": _domain, "name": _name}

            def emit(inputs: list, attributes: dict, outputs: int):
                if outputs == 1:
                    return self.op(op_type, inputs, attributes, **where)
                return tuple(
                    self.op_multi_out(op_type, inputs, attributes, num_outputs=outputs, **where)
                )

            if _domain not in ("", "ai.onnx"):
                return emit(inputs, attributes, _outputs)
            node = f"node {self.prefix!r}"
            return emit_at(op_type, self.opset, inputs, attributes, _outputs, emit, self, node)

        return make

    def const(self, array: object, hint: str) -> ir.Value:
        array = np.asarray(array)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key in self._consts:  # one initializer per distinct constant
            return self._consts[key]
        name = conventions.unique_name(f"{self.prefix}/{hint}", self.taken)
        self._consts[key] = self.initializer(ir.tensor(array, name=name), name=name)
        return self._consts[key]

    def ints(self, values: list[int], hint: str) -> ir.Value:
        return self.const(np.asarray(values, np.int64), hint)


def model_opset(model: ir.Model) -> int:
    """The model's opset of the standard domain: the opset its standard ops are written at."""
    imports = model.opset_imports
    return imports.get("", imports.get("ai.onnx", conventions.ONNX_OPSET))


def constant_input(value: ir.Value | None, where: str, why: str) -> np.ndarray | None:
    """The data of an initializer input (None when the input is absent); an input computed in
    the graph raises UnsupportedOpError: `where` names the node and input, `why` says why."""
    if value is None:
        return None
    if value.const_value is None or value.is_graph_input():
        raise UnsupportedOpError(f"{where} {value.name!r} is computed in the graph; {why}")
    return value.const_value.numpy()


def sentence_bounds(op: OpBuilder, offsets: ir.Value) -> tuple[ir.Value, ir.Value]:
    """(starts, lengths), int64 [N] each, from offsets [N+1]."""
    starts = op.Slice(offsets, op.ints([0], "zero"), op.ints([-1], "minus_one"))
    ends = op.Slice(offsets, op.ints([1], "one"), op.ints([_INT64_MAX], "end"))
    return starts, op.Sub(ends, starts)


def seq_lens(op: OpBuilder, offsets: ir.Value) -> ir.Value:
    """int32 [N] sentence lengths: what ONNX GRU's sequence_lens takes."""
    return op.Cast(sentence_bounds(op, offsets)[1], to=ir.DataType.INT32)


def _step_grid(
    op: OpBuilder, steps: ir.Value, per_sentence: ir.Value, layout: str
) -> tuple[ir.Value, ir.Value]:
    """steps [T] and a per-sentence vector [N] broadcast to the padded grid: [T, N] for tnc,
    [N, T] for ntc."""
    if layout == "tnc":
        return op.Unsqueeze(steps, op.ints([1], "axis1")), op.Unsqueeze(
            per_sentence, op.ints([0], "axis0")
        )
    return op.Unsqueeze(steps, op.ints([0], "axis0")), op.Unsqueeze(
        per_sentence, op.ints([1], "axis1")
    )


def lod_to_padded(
    op: OpBuilder, x: ir.Value, offsets: ir.Value, layout: str = "tnc", min_steps: int = 0
) -> ir.Value:
    """x [words, C...] -> right-padded [T, N, C...] (tnc) or [N, T, C...] (ntc), zeros after
    each sentence: one Gather from x with a zero row appended, padding pointing at that row.
    T is the longest sentence, or min_steps if that is more (a Loop over T that must run)."""
    starts, lens = sentence_bounds(op, offsets)
    floor = op.ints([min_steps], "zero" if min_steps == 0 else "min_steps")
    longest = op.ReduceMax(op.Concat(floor, lens, axis=0), keepdims=0)
    steps = op.Range(op.const(np.int64(0), "scalar_zero"), longest, op.const(np.int64(1), "step"))
    step_grid, start_grid = _step_grid(op, steps, starts, layout)
    _, len_grid = _step_grid(op, steps, lens, layout)
    words = op.Shape(x, start=0, end=1)
    index = op.Where(op.Less(step_grid, len_grid), op.Add(step_grid, start_grid), words)
    zero_row = op.CastLike(
        op.ConstantOfShape(op.Concat(op.ints([1], "one"), op.Shape(x, start=1), axis=0)), x
    )
    return op.Gather(op.Concat(x, zero_row, axis=0), index, axis=0)


def padded_to_lod(
    op: OpBuilder, padded: ir.Value, offsets: ir.Value, layout: str = "tnc"
) -> ir.Value:
    """The inverse of lod_to_padded: NonZero over the [N, T] grid of real steps lists them in
    word order (sentence, then step); one Gather takes those rows."""
    _, lens = sentence_bounds(op, offsets)
    t_axis = 0 if layout == "tnc" else 1
    longest = op.Squeeze(op.Shape(padded, start=t_axis, end=t_axis + 1), op.ints([0], "axis0"))
    steps = op.Range(op.const(np.int64(0), "scalar_zero"), longest, op.const(np.int64(1), "step"))
    real = op.Less(
        op.Unsqueeze(steps, op.ints([0], "axis0")), op.Unsqueeze(lens, op.ints([1], "axis1"))
    )
    where = op.NonZero(real)  # [2, words]: sentence, step
    sentence = op.Gather(where, op.const(np.int64(0), "scalar_zero"), axis=0)
    step = op.Gather(where, op.const(np.int64(1), "scalar_one"), axis=0)
    if layout == "tnc":
        row = op.Add(op.Mul(step, op.Shape(padded, start=1, end=2)), sentence)
    else:
        row = op.Add(op.Mul(sentence, op.Shape(padded, start=1, end=2)), step)
    flat = op.Reshape(
        padded, op.Concat(op.ints([-1], "minus_one"), op.Shape(padded, start=2), axis=0)
    )
    return op.Gather(flat, row, axis=0)
