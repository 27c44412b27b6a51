"""If and Loop whose bodies hold our ops, interpreted here; each body is a program of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ArgumentError, ExecutionError, ModelFormatError
from fusebridge.graph.checks import describe
from fusebridge.runtime.schedule import captured
from fusebridge.runtime.step import Step


def _one(value: np.ndarray, what: str) -> object:
    """The single element of a Loop's or If's scalar input (ONNX allows shape [] or [1])."""
    flat = np.asarray(value).reshape(-1)
    if flat.size != 1:
        raise ArgumentError(f"Session: {what} must hold one value, got shape {np.shape(value)}")
    return flat[0]


def _truth(value: np.ndarray, what: str) -> bool:
    return bool(_one(value, what))


def _body(node: ir.Node, attribute: str) -> ir.Graph:
    """The If branch or Loop body `attribute` of node (an onnx_ir.Model need not have one)."""
    attr = node.attributes.get(attribute)
    if attr is None or attr.type != ir.AttributeType.GRAPH:
        raise ModelFormatError(f"Session: {describe(node)} has no graph attribute {attribute}")
    return attr.value


def _outputs_match(node: ir.Node, body_outputs: int, expected: int) -> None:
    if body_outputs != expected:
        raise ModelFormatError(
            f"Session: a body of {describe(node)} has {body_outputs} output(s), expected "
            f"{expected} for the node's {len(node.outputs)}"
        )


def _stacked(values: list[np.ndarray], output: ir.Value, label: str) -> np.ndarray:
    """A Loop's scan output: the iterations' values on a new first axis."""
    if values:
        return np.stack(values)
    shape = output.shape
    if shape is None or output.dtype is None or not all(isinstance(d, int) for d in shape):
        raise ExecutionError(
            f"Session: {label} ran zero times, and the shape of its scan output "
            f"{output.name!r} is not known from the graph"
        )
    return np.empty((0, *shape), output.dtype.numpy())


def control_step(
    node: ir.Node,
    constants: Mapping[str, np.ndarray],
    feeds: Mapping[str, ir.Value],
    program: Callable,
) -> tuple[Step, list]:
    """An If or a Loop whose bodies hold our ops, run here: each body is a Program, fed
    the values it reads from around it (ONNX outer-scope references) by name."""
    outer = [v.name for v in captured(node)]
    names = [v.name if v is not None else "" for v in node.inputs] + outer
    fixed = [constants.get(n) if n else None for n in names]
    given, label = len(node.inputs), f"{node.op_type} {node.name}"
    cond = f"the cond of {describe(node)}"
    if node.op_type == "If":
        branches = [
            program(_body(node, b), constants, feeds) for b in ("then_branch", "else_branch")
        ]
        for branch in branches:
            _outputs_match(node, len(branch.graph.outputs), len(node.outputs))

        def run_if(xs: list[np.ndarray]) -> list[np.ndarray]:
            env = dict(zip(outer, xs[given:]))
            branch = branches[0 if _truth(xs[0], cond) else 1]
            branch.run(env)
            return [env[v.name] for v in branch.graph.outputs]

        step = Step("control", label, names, [v.name for v in node.outputs], run_if, fixed)
        return step, branches
    body = program(_body(node, "body"), constants, feeds)
    carried = given - 2
    if carried < 0 or len(body.graph.inputs) != given or len(node.outputs) < carried:
        raise ModelFormatError(
            f"Session: {describe(node)} has {given} inputs (M, cond, N carried values) and "
            f"{len(node.outputs)} outputs; its body must take 2 + N inputs, got "
            f"{len(body.graph.inputs)}"
        )
    _outputs_match(node, len(body.graph.outputs), 1 + len(node.outputs))
    scan_values = body.graph.outputs[1 + carried :]

    def run_loop(xs: list[np.ndarray]) -> list[np.ndarray]:
        trips = None if xs[0] is None else int(_one(xs[0], f"the M of {describe(node)}"))
        going = True if xs[1] is None else _truth(xs[1], cond)
        state, scans = list(xs[2:given]), [[] for _ in scan_values]
        i = 0
        while going and (trips is None or i < trips):
            env = dict(zip(outer, xs[given:]))
            body_inputs = [np.array(i, np.int64), np.array(going), *state]
            env.update(zip((v.name for v in body.graph.inputs), body_inputs))
            body.run(env)
            results = [env[v.name] for v in body.graph.outputs]
            going = _truth(results[0], f"the cond the body of {describe(node)} returns")
            state = results[1 : 1 + carried]
            for scan, value in zip(scans, results[1 + carried :]):
                scan.append(value)
            i += 1
        return [*state, *(_stacked(s, v, label) for s, v in zip(scans, scan_values))]

    step = Step("control", label, names, [v.name for v in node.outputs], run_loop, fixed)
    return step, [body]
