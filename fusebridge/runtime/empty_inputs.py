"""A partition's ONNX Runtime session for runs where an input is empty (a batch of 0, 0 steps).

ONNX Runtime 1.32 ends the process on some empty inputs of its recurrent ops: SIGABRT
("terminate called without an active exception") in GRU without sequence_lens at batch 0 or 0
steps and in LSTM at batch 0, SIGSEGV in GRU with sequence_lens at batch 0 (the speech
look-alike). Every other op the fixtures hold takes empty tensors. So a partition that holds a
GRU, LSTM or RNN gets, at its first run with an empty input, a second session in which each of
them sits in an If: where its X has no step or no sequence, the If gives Y empty and, as Y_h
and Y_c, the initial state (initial_h, initial_c, zeros where absent), as our GRU kernel does
for an empty sentence (docs/gru.md); otherwise the op itself runs. Both branches are right for
any input, so the choice of session changes no result; the first session keeps the If's cost
off normal runs. (Where ONNX Runtime survives 0 steps, its LSTM and RNN give zeros whatever the
initial state: a difference only where a model feeds a non-zero initial state to 0 steps.)

Not caught: an empty tensor made inside a partition from inputs that are not empty (a Slice to
nothing before a GRU) still reaches the op in the first session."""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from fusebridge.ops.standard import is_empty_unsafe


def guard_recurrences(model: onnx.ModelProto, elem_types: dict[str, int]) -> onnx.ModelProto:
    """A copy of `model` with each top-level GRU, LSTM and RNN inside an If on whether its X is
    empty. elem_types: the element type of each op's X (FLOAT where unknown)."""
    guarded = onnx.ModelProto()
    guarded.CopyFrom(model)
    nodes = []
    for k, node in enumerate(guarded.graph.node):
        if is_empty_unsafe(node):
            nodes += _guarded(node, f"fusebridge_empty_{k}", elem_types.get(node.input[0]))
        else:
            nodes.append(node)
    del guarded.graph.node[:]
    guarded.graph.node.extend(nodes)
    return guarded


def _guarded(node: onnx.NodeProto, p: str, elem_type: int | None) -> list[onnx.NodeProto]:
    """[the If's condition nodes..., If] standing for `node` (its outputs keep their names)."""
    x, w, r = node.input[:3]
    batch_first = any(a.name == "layout" and a.i == 1 for a in node.attribute)
    outputs = [o for o in node.output if o]

    def const(name: str, values: list[int]) -> onnx.NodeProto:
        value = helper.make_tensor(name, TensorProto.INT64, [1], values)
        return helper.make_node("Constant", [], [name], value=value)

    # T and N ([1] each), D from W [D, G*H, I], H from R [D, G*H, H]: no attribute is read.
    dims = [
        helper.make_node("Shape", [x], [f"{p}_xs"]),
        helper.make_node("Shape", [w], [f"{p}_ws"]),
        helper.make_node("Shape", [r], [f"{p}_rs"]),
        const(f"{p}_0", [0]),
        const(f"{p}_1", [1]),
        const(f"{p}_2", [2]),
        helper.make_node("Gather", [f"{p}_xs", f"{p}_{int(batch_first)}"], [f"{p}_t"]),
        helper.make_node("Gather", [f"{p}_xs", f"{p}_{1 - int(batch_first)}"], [f"{p}_n"]),
        helper.make_node("Gather", [f"{p}_ws", f"{p}_0"], [f"{p}_d"]),
        helper.make_node("Gather", [f"{p}_rs", f"{p}_2"], [f"{p}_h"]),
        helper.make_node("Mul", [f"{p}_t", f"{p}_n"], [f"{p}_tn"]),
        helper.make_node("Equal", [f"{p}_tn", f"{p}_0"], [f"{p}_empty"]),
    ]
    t, n, d, h = (f"{p}_{s}" for s in "tndh")
    y_dims = [n, t, d, h] if batch_first else [t, d, n, h]
    state_dims = [n, d, h] if batch_first else [d, n, h]
    zero = helper.make_tensor("zero", elem_type or TensorProto.FLOAT, [1], [0])
    then_nodes, then_outputs = [], []
    for slot, name in enumerate(node.output):
        if not name:
            continue
        shape, made = f"{p}_then_shape{slot}", f"{p}_then_out{slot}"
        # Y_h and Y_c: initial_h (input 5) and initial_c (input 6, LSTM's) where given
        start = node.input[4 + slot] if slot and len(node.input) > 4 + slot else ""
        then_nodes += (
            [helper.make_node("Identity", [start], [made])]
            if start
            else [
                helper.make_node("Concat", y_dims if slot == 0 else state_dims, [shape], axis=0),
                helper.make_node("ConstantOfShape", [shape], [made], value=zero),
            ]
        )
        then_outputs.append(helper.make_empty_tensor_value_info(made))
    body = onnx.NodeProto()
    body.CopyFrom(node)
    del body.output[:]
    body.output.extend(f"{p}_else_out{s}" if o else "" for s, o in enumerate(node.output))
    else_outputs = [helper.make_empty_tensor_value_info(o) for o in body.output if o]
    branch = helper.make_graph
    guard = helper.make_node(
        "If",
        [f"{p}_empty"],
        outputs,
        name=f"{node.name}_unless_empty" if node.name else "",
        then_branch=branch(then_nodes, f"{p}_then", [], then_outputs),
        else_branch=branch([body], f"{p}_else", [], else_outputs),
    )
    return [*dims, guard]
