"""One recurrence toolkit for the importers (Paddle's `rnn` and `lstm`, MXNet's `RNN`, ONNX's
`GRU`) and the rules that fold a projection into a recurrence: the canonical gate order, one
layer's weights in one layout, layers stacked with each one's initial state sliced from the
framework's [L*D, N, H] state and their final states gathered, the layer builders (our
FusionGRU, ONNX's LSTM and RNN), and projection folding with one set of refusal reasons. A
frontend reads its framework's packing and hands the blocks over in its own gate order;
everything after that is done here, once.

Canonical: a GRU's gates are (update, reset, candidate), which are ONNX's (z, r, h); an LSTM's
are ONNX's (i, o, f, c); a simple RNN has one. Weights are kept in ONNX's form, W [D, G*H, I],
R [D, G*H, H], B and B_h [D, G*H], forward direction first; FusionGRU takes them transposed
(Wx [D, I, 3H], Wh [D, H, 3H])."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import onnx_ir as ir

from fusebridge import conventions

# The gate order of the frameworks' packings, as positions into it of the canonical gates.
# Paddle's rnn, MXNet's RNN and torch pack a GRU's gates (r, z, n) and an LSTM's (i, f, c, o);
# Paddle's legacy lstm op packs (c, i, f, o).
GRU_RZN = (1, 0, 2)
LSTM_IFCO = (0, 3, 1, 2)
LSTM_CIFO = (1, 3, 2, 0)
SAME_ORDER = {1: (0,), 3: (0, 1, 2), 4: (0, 1, 2, 3)}


def reorder_gates(a: np.ndarray, order: Sequence[int], axis: int = 0) -> np.ndarray:
    """a's len(order) equal gate blocks along `axis`, in the order `order` picks them (a NEW
    array)."""
    blocks = np.split(a, len(order), axis=axis)
    return np.concatenate([blocks[g] for g in order], axis=axis)


@dataclasses.dataclass(frozen=True)
class LayerWeights:
    """One layer's weights, canonical gate order, ONNX's form: w [D, G*H, I], r [D, G*H, H],
    b (input bias) and bh (recurrent bias) [D, G*H]."""

    w: np.ndarray
    r: np.ndarray
    b: np.ndarray
    bh: np.ndarray

    @classmethod
    def from_blocks(
        cls,
        per_direction: Sequence[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]],
        order: Sequence[int],
    ) -> LayerWeights:
        """From a framework's (w_ih [G*H, I], w_hh [G*H, H], b_ih, b_hh [G*H]) per direction,
        gate blocks in the framework's order (`order`: GRU_RZN, LSTM_IFCO, SAME_ORDER[g])."""
        parts = [[reorder_gates(np.asarray(a), order) for a in d] for d in per_direction]
        return cls(*(np.stack([p[k] for p in parts]) for k in range(4)))

    @property
    def directions(self) -> int:
        return self.r.shape[0]

    @property
    def hidden(self) -> int:
        return self.r.shape[-1]

    def fusion_gru(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(Wx [D, I, 3H], Wh [D, H, 3H], B, B_h): FusionGRU's inputs (NEW arrays)."""
        wx, wh = (np.ascontiguousarray(a.transpose(0, 2, 1)) for a in (self.w, self.r))
        return wx, wh, np.array(self.b), np.array(self.bh)

    def onnx_bias(self) -> np.ndarray:
        """ONNX's B [D, 2*G*H]: the input bias, then the recurrent one."""
        return np.concatenate([self.b, self.bh], axis=1)


class Builder(Protocol):
    """What the toolkit builds with: the frontends' GraphBuilder (integrations/graph_builder)."""

    def const(self, array: np.ndarray, name: str) -> ir.Value: ...

    def ints(self, values: Sequence[int], name: str) -> ir.Value: ...

    def cast(self, value: ir.Value, to: ir.DataType, name: str) -> ir.Value: ...

    def add(self, op_type: str, inputs: list, attrs: dict | None = None, **kw) -> object: ...


def layer_state(b: Builder, state: ir.Value, layer: int, d: int, hidden: int, name: str):
    """Rows layer*d .. layer*d + d of a [L*D, N, H] state, typed [D, N, H]: the zero-state rule
    needs H0's shape, which ONNX's inference cannot tell through a ConstantOfShape of a computed
    shape (Paddle's nn.GRU, gluon's begin state)."""
    begin, end = b.ints([layer * d], f"{name}/begin"), b.ints([layer * d + d], f"{name}/end")
    rows = b.add("Slice", [state, begin, end, b.ints([0], f"{name}/axis")], name=name)
    rows.shape = ir.Shape([d, None, hidden])
    return rows


# (builder, x, lengths, layer weights, initial states, name) -> (y, final states)
LayerBuilder = Callable[..., tuple[ir.Value, list[ir.Value]]]


def stack_layers(
    b: Builder,
    x: ir.Value,
    lengths: ir.Value | None,
    layers: Sequence[LayerWeights],
    states: Sequence[ir.Value],
    build: LayerBuilder,
    name: str,
    last_name: str | None = None,
) -> tuple[ir.Value, list[list[ir.Value]]]:
    """Layer after layer, each fed the previous one's output and its own rows of each initial
    state (`states`: [L*D, N, H] each, h then c for an LSTM); layer k is named `name/lk`, the
    last one `last_name` where given. The final states: for each that the layers return (h,
    then c), each layer's [D, N, H] in order (concat_layers makes the [L*D, N, H] value where
    it is read)."""
    finals: list[list[ir.Value]] = []
    for k, p in enumerate(layers):
        d, hidden = p.directions, p.hidden
        initial = [
            layer_state(b, s, k, d, hidden, f"{name}/l{k}/state{i}") for i, s in enumerate(states)
        ]
        layer_name = last_name if last_name and k == len(layers) - 1 else f"{name}/l{k}"
        x, lasts = build(b, x, lengths, p, initial, layer_name)
        finals += [[] for _ in range(len(lasts) - len(finals))]
        for i, last in enumerate(lasts):
            finals[i].append(last)
    return x, finals


def concat_layers(b: Builder, parts: Sequence[ir.Value], name: str) -> ir.Value:
    """The layers' final states [D, N, H] as the framework's one [L*D, N, H] state."""
    return parts[0] if len(parts) == 1 else b.add("Concat", list(parts), {"axis": 0}, name=name)


def fusion_gru_layer(attrs: dict[str, object]) -> LayerBuilder:
    """A LayerBuilder making one FusionGRU per layer with `attrs` (direction is the weights')."""

    def build(b: Builder, x, lengths, p: LayerWeights, initial, name: str):
        tensors = [
            b.const(a, f"{name}/{k}") for a, k in zip(p.fusion_gru(), ("wx", "wh", "b", "bh"))
        ]
        h0 = initial[0] if initial else None
        direction = "bidirectional" if p.directions == 2 else attrs.get("direction", "forward")
        y, last = b.add(
            "FusionGRU",
            [x, lengths, *tensors, h0],
            {**attrs, "direction": direction},
            name=name,
            domain=conventions.DOMAIN,
            num_outputs=2,
        )
        return y, [last]

    return build


def onnx_layer(op_type: str, activation: str = "Tanh") -> LayerBuilder:
    """A LayerBuilder making one ONNX LSTM (op_type "LSTM") or RNN ("RNN", its `activation`:
    "Tanh" or "Relu") per layer, which ONNX Runtime runs, time-major: x [T, N, I] in, ONNX's
    Y [T, D, N, H] turned back into the frameworks' [T, N, D*H]; lengths (int64, or None) as
    ONNX's int32 sequence_lens; the final states Y_h (and Y_c) [D, N, H]."""

    def build(b: Builder, x, lengths, p: LayerWeights, initial, name: str):
        d, hidden = p.directions, p.hidden
        attrs = {"hidden_size": hidden, "direction": "bidirectional" if d == 2 else "forward"}
        if op_type == "RNN":
            attrs["activations"] = [activation] * d
        lens = b.cast(lengths, ir.DataType.INT32, f"{name}/lens") if lengths is not None else None
        bias = b.const(p.onnx_bias(), f"{name}/B")
        w, r = b.const(p.w, f"{name}/W"), b.const(p.r, f"{name}/R")
        outputs = b.add(
            op_type,
            [x, w, r, bias, lens, *initial],
            attrs,
            name=f"{name}/onnx",
            num_outputs=3 if op_type == "LSTM" else 2,
        )
        y4 = b.add("Transpose", [outputs[0]], {"perm": [0, 2, 1, 3]}, name=f"{name}/tnd")
        y = b.add("Reshape", [y4, b.ints([0, 0, d * hidden], f"{name}/shape")], name=name)
        return y, list(outputs[1:])

    return build


def projection_refusal(
    w1_shape: tuple[int, int], weights: tuple[int, int, int], names: tuple[str, str]
) -> str | None:
    """Why a projection x @ w1 (w1 [K, C]) cannot fold into a recurrence's input weights of
    `weights` = (directions, inputs, gate columns), from the shapes alone, or None. names: (the
    weight, the op)."""
    d, ic, gates = weights
    k, columns = w1_shape
    if columns != ic:
        return f"the projection gives {columns} columns, {names[0]} takes {ic}"
    if k * d * gates > k * ic + d * ic * gates:
        return (
            f"folding would raise the projection from {k * ic + d * ic * gates} to "
            f"{k * d * gates} multiply-adds per word ({k} inputs, {ic} {names[1]} inputs)"
        )
    return None


def fold_projection(
    w1: np.ndarray, b1: np.ndarray | None, w: np.ndarray
) -> tuple[np.ndarray, np.ndarray | None]:
    """x @ w1 + b1, then x' @ w[d] per direction (w [D, I, G], input-major): (w1 @ w[d] as
    [D, K, G], b1 @ w[d] as [D, G], None without b1), in float32."""
    w = w.astype(np.float32)
    folded = np.einsum("ki,dio->dko", w1.astype(np.float32), w)
    if b1 is None:
        return folded, None
    return folded, np.einsum("i,dio->do", b1.reshape(-1).astype(np.float32), w)
