"""ONNX Runtime's contrib ops (domain com.microsoft) in standard ONNX ops, for the portable file:
ONNX Runtime's offline optimizer writes them (FusedMatMul, FusedConv, ...), fb.Session runs them
in ONNX Runtime partitions, and a portable file holds the standard domain only. One function a
op, each the op's definition in ONNX Runtime's ContribOperators.md; any other op of a domain
that is neither the standard one nor ours is refused by name before anything is rewritten."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import UnsupportedOpError
from fusebridge.graph.builder import OpBuilder, replace_node
from fusebridge.graph.checks import describe

MS_DOMAIN = "com.microsoft"
# The domains ONNX itself defines: a portable file may hold their ops.
_STANDARD = ("", "ai.onnx", "ai.onnx.ml", "ai.onnx.preview.training")


def _attr(node: ir.Node, name: str, default: object) -> object:
    attr = node.attributes.get(name)
    return default if attr is None else attr.value


def _swap_last_two(rank: int) -> list[int]:
    return [*range(rank - 2), rank - 1, rank - 2]


def _batch_to_rows(rank: int) -> list[int]:
    """transBatch: dim 0 moves behind the batch dims 1 .. rank-2 (ONNX Runtime's FusedMatMul)."""
    return [*range(1, rank - 1), 0, rank - 1]


def _fused_matmul(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    """alpha * MatMul(A', B'), A' = A with transBatchA then transA applied (B' likewise). A
    transA/transB on an input of unknown rank (behind another contrib op, which onnx's shape
    inference does not know) is an Einsum over `...`, which needs no rank."""
    operands, subscripts = [], []
    for value, side, plain in zip(node.inputs[:2], "AB", ("ij", "jk")):
        batch, trans = _attr(node, f"transBatch{side}", 0), _attr(node, f"trans{side}", 0)
        rank = value.shape.rank() if value.shape is not None else None
        if trans and not batch and rank is None and op.opset >= 12:
            operands.append(value)
            subscripts.append(plain[::-1])
            continue
        if batch or trans:
            if rank is None or rank < 2 or (batch and rank < 3):
                raise UnsupportedOpError(
                    f"{describe(node)}: transposing input {side} ({value.name!r}) needs its rank, "
                    f"known and >= {3 if batch else 2}, got {rank}"
                )
            perm = list(range(rank))
            if batch:
                perm = _batch_to_rows(rank)
            if trans:
                perm = [perm[i] for i in _swap_last_two(rank)]
            value = op.Transpose(value, perm=perm)
        operands.append(value)
        subscripts.append(plain)
    if subscripts == ["ij", "jk"]:
        product = op.MatMul(*operands)
    else:
        product = op.Einsum(*operands, equation=f"...{subscripts[0]},...{subscripts[1]}->...ik")
    alpha = float(_attr(node, "alpha", 1.0))
    if alpha == 1.0:
        return [product]
    return [op.Mul(product, op.const(np.array(alpha, np.float32), "alpha"))]


def _activation(op: OpBuilder, node: ir.Node, x: ir.Value, name: str, params: list) -> ir.Value:
    """x through FusedConv's / FusedGemm's activation `name` (none: "") with its parameters."""
    if name == "":
        return x
    if name == "Relu":
        return op.Relu(x)
    if name == "Tanh":
        return op.Tanh(x)
    if name == "Sigmoid":
        return op.Sigmoid(x)
    if name == "LeakyRelu":
        return op.LeakyRelu(x, alpha=float(params[0]) if params else 0.01)
    if name == "HardSigmoid":
        alpha, beta = (params + [0.2, 0.5][len(params) :])[:2]
        return op.HardSigmoid(x, alpha=float(alpha), beta=float(beta))
    if name == "Clip" and len(params) == 2:
        bounds = [op.const(np.array(p, np.float32), hint) for p, hint in zip(params, ("lo", "hi"))]
        return op.Clip(x, *bounds) if op.opset >= 11 else op.Clip(x, min=params[0], max=params[1])
    raise UnsupportedOpError(
        f"{describe(node)}: activation {name!r} with parameters {params}, expected none, Relu, "
        "Tanh, Sigmoid, LeakyRelu, HardSigmoid or Clip (min, max)"
    )


def _standard_attributes(node: ir.Node, drop: tuple[str, ...]) -> dict[str, object]:
    return {k: a.value for k, a in node.attributes.items() if k not in drop}


def _fused_conv(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    """activation(Conv(X, W, B) + Z)."""
    inputs = list(node.inputs) + [None] * 4
    x, w, b, z = inputs[:4]
    conv = op.Conv(x, w, b, **_standard_attributes(node, ("activation", "activation_params")))
    if z is not None:
        conv = op.Add(conv, z)
    params = list(_attr(node, "activation_params", []) or [])
    return [_activation(op, node, conv, str(_attr(node, "activation", "")), params)]


def _fused_gemm(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    """activation(Gemm(A, B, C)); LeakyRelu takes activation_alpha, HardSigmoid
    activation_alpha and activation_beta."""
    dropped = ("activation", "activation_alpha", "activation_beta", "activation_gamma")
    gemm = op.Gemm(*node.inputs, **_standard_attributes(node, dropped))
    params = [_attr(node, name, None) for name in ("activation_alpha", "activation_beta")]
    params = [p for p in params if p is not None]
    return [_activation(op, node, gemm, str(_attr(node, "activation", "")), params)]


def _gelu_of(op: OpBuilder, x: ir.Value) -> ir.Value:
    """0.5 x (1 + erf(x / sqrt 2))."""
    half = op.const(np.array(0.5, np.float32), "half")
    one = op.const(np.array(1.0, np.float32), "one")
    root2 = op.const(np.array(math.sqrt(2.0), np.float32), "sqrt2")
    return op.Mul(op.Mul(half, x), op.Add(one, op.Erf(op.Div(x, root2))))


def _gelu(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    return [_gelu_of(op, node.inputs[0])]


def _bias_gelu(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    return [_gelu_of(op, op.Add(node.inputs[0], node.inputs[1]))]


def _fast_gelu(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    """0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))), x = X + bias."""
    x = node.inputs[0]
    if len(node.inputs) > 1 and node.inputs[1] is not None:
        x = op.Add(x, node.inputs[1])
    c = op.const(np.array(math.sqrt(2.0 / math.pi), np.float32), "sqrt_2_over_pi")
    k = op.const(np.array(0.044715, np.float32), "gelu_cubic")
    half = op.const(np.array(0.5, np.float32), "half")
    one = op.const(np.array(1.0, np.float32), "one")
    inner = op.Mul(c, op.Add(x, op.Mul(k, op.Mul(x, op.Mul(x, x)))))
    return [op.Mul(op.Mul(half, x), op.Add(one, op.Tanh(inner)))]


def _quick_gelu(op: OpBuilder, node: ir.Node) -> list[ir.Value]:
    """x * sigmoid(alpha x)."""
    x = node.inputs[0]
    alpha = op.const(np.array(float(_attr(node, "alpha", 1.702)), np.float32), "alpha")
    return [op.Mul(x, op.Sigmoid(op.Mul(alpha, x)))]


LOWERINGS: dict[tuple[str, str], Callable[[OpBuilder, ir.Node], list[ir.Value]]] = {
    (MS_DOMAIN, "FusedMatMul"): _fused_matmul,
    (MS_DOMAIN, "FusedConv"): _fused_conv,
    (MS_DOMAIN, "FusedGemm"): _fused_gemm,
    (MS_DOMAIN, "Gelu"): _gelu,
    (MS_DOMAIN, "BiasGelu"): _bias_gelu,
    (MS_DOMAIN, "FastGelu"): _fast_gelu,
    (MS_DOMAIN, "QuickGelu"): _quick_gelu,
}


def _foreign(node: ir.Node) -> bool:
    return node.domain not in (*_STANDARD, conventions.DOMAIN)


def check_lowerable(graph: ir.Graph) -> None:
    """Every node of a domain neither standard nor ours (subgraphs included) has a lowering
    here; UnsupportedOpError naming each one that has not."""
    refused = [
        f"{describe(n)} ({n.op_type} of domain {n.domain!r})"
        for n in ir.traversal.RecursiveGraphIterator(graph)
        if _foreign(n) and (n.domain, n.op_type) not in LOWERINGS
    ]
    if refused:
        raise UnsupportedOpError(
            f"no standard ONNX form for {', '.join(refused)}: a portable file holds standard "
            f"ops only, and these contrib ops have none here (lowered: "
            f"{sorted(op for _, op in LOWERINGS)})"
        )


def lower_contrib_ops(graph: ir.Graph, opset: int) -> dict[str, int]:
    """Every contrib op of `graph` (subgraphs included) replaced by standard ops of `opset`;
    how many of each. Refuses, before any rewrite, what check_lowerable refuses."""
    check_lowerable(graph)
    taken = {v.name for v in graph.initializers.values()}
    counts: dict[str, int] = {}
    for node in list(ir.traversal.RecursiveGraphIterator(graph)):
        if not _foreign(node):
            continue
        op = OpBuilder(node.name or node.outputs[0].name or node.op_type, taken, opset)
        outputs = LOWERINGS[node.domain, node.op_type](op, node)
        replace_node(node.graph, node, op, outputs)
        counts[node.op_type] = counts.get(node.op_type, 0) + 1
    return counts
