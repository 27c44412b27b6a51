"""`save_mxnet(model, prefix)`: the MXNet model a fusebridge model was loaded from, written back
with its fused parts as fusebridge's native MXNet ops (op_library.py), so that it runs in MXNet.

MXNet symbols carry no shapes and take static shape attributes, so the rank-agnostic standard
ops of the IR have no faithful MXNet form: the writer starts from the model's own MXNet graph
(kept in the model's metadata by load.py) and replaces what fusebridge fuses:
- each `RNN(mode='gru')` by one `fusebridge_fusion_gru` per layer (tnc, the model's canonical
  weights of that layer, sequence lengths honoured: MXNet's oneDNN GRU ignores them);
- each inference-mode `Dropout` by `fusebridge_dropout(is_test=True)`.
The rest of the graph stays as it was; every parameter written is the model's own initializer
(the one the loader made of it), never an array read from a file."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx_ir as ir

from fusebridge.errors import ArgumentError, UnsupportedOpError
from fusebridge.integrations.mxnet.params import write_params
from fusebridge.integrations.mxnet.symbol import (
    MXSymbol,
    parse_bool,
    parse_int,
    parse_str,
    parse_symbol,
)

SYMBOL_KEY = "fusebridge.mxnet.symbol"
# Parameters the loader keeps only in another form (op_converters.py): (op, input slot) -> the
# initializer it made of the parameter (named after the op's node) and how to undo that.
_CONVERTED = {
    ("FullyConnected", 1): ("weight_t", np.transpose),
    ("LeakyReLU", 1): ("gamma", np.ravel),  # prelu's [C] as [C, 1]
}


class _Writer:
    def __init__(self, source: dict, symbol: MXSymbol, model: ir.Model) -> None:
        self.source = source
        self.symbol = symbol  # source parsed: attributes merged as MXNet merges them
        self.initializers = model.graph.initializers
        self.nodes: list[dict] = []
        self.moved: dict[int, int] = {}  # old node -> its copy, outputs in the same places
        self.entry: dict[tuple[int, int], list[int]] = {}  # old (node, out) -> new, replaced
        self.params: dict[str, np.ndarray] = {}
        # One pass over the graph: what each parameter was converted into (_CONVERTED), and
        # which outputs any node uses.
        self.converted: dict[str, list[tuple[str, object]]] = {}
        self.used: set[tuple[int, int]] = set()
        for node in symbol.nodes:
            for slot, (producer, output) in enumerate(node.inputs):
                self.used.add((producer, output))
                if (made := _CONVERTED.get((node.op, slot))) is not None:
                    name = symbol.nodes[producer].name
                    self.converted.setdefault(name, []).append((f"{node.name}/{made[0]}", made[1]))

    def add(self, node: dict) -> int:
        self.nodes.append(node)
        return len(self.nodes) - 1

    def variable(self, name: str, array: np.ndarray) -> list[int]:
        self.params[name] = array
        return [self.add({"op": "null", "name": name, "inputs": []}), 0, 0]

    def parameter(self, name: str) -> np.ndarray:
        """MXNet parameter `name` from the model's initializers: under its own name, or undone
        from the form a converter made of it (_CONVERTED)."""
        made = [(name, None), *self.converted.get(name, [])]
        for initializer, undo in made:
            value = self.initializers.get(initializer)
            if value is not None and value.const_value is not None:
                array = value.const_value.numpy()
                return array if undo is None else undo(array)
        raise UnsupportedOpError(
            f"save_mxnet: MXNet parameter {name!r}: the model has no initializer "
            f"{' or '.join(repr(i) for i, _ in made)} (a pass rewrote it); save the model as "
            "fb.load returned it"
        )

    def inputs(self, node: dict) -> list[list[int]]:
        return [self.new_entry(e) for e in node["inputs"]]

    def new_entry(self, old: list[int]) -> list[int]:
        node, out = old[0], old[1]
        return self.entry.get((node, out)) or [self.moved[node], out, 0]

    def weight(self, rnn: str, layer: int, part: str) -> np.ndarray:
        value = self.initializers.get(f"{rnn}/l{layer}/{part}")
        if value is None or value.const_value is None:
            raise UnsupportedOpError(
                f"save_mxnet: RNN {rnn!r} layer {layer}: the model has no weight "
                f"'{rnn}/l{layer}/{part}' (a pass rewrote it); save the model as loaded"
            )
        return value.const_value.numpy()

    def rnn(self, index: int, node: dict) -> None:
        name, attrs = node["name"], self.symbol.nodes[index].attrs
        if parse_str(attrs.get("mode", ""), name, "mode") != "gru":
            self.keep(index, node)
            return
        if parse_bool(attrs.get("state_outputs", "False"), name, "state_outputs") and any(
            (index, k) in self.used for k in (1, 2)
        ):
            raise UnsupportedOpError(f"save_mxnet: RNN {name!r}: its state output is used")
        layers = parse_int(attrs.get("num_layers", "1"), name, "num_layers")
        bidirectional = parse_bool(attrs.get("bidirectional", "False"), name, "bidirectional")
        inputs = self.inputs(node)
        x = inputs[0]
        if parse_bool(attrs.get("use_sequence_length", "False"), name, "use_sequence_length"):
            lengths = inputs[-1]
        else:  # every sentence is T long: T = the sum of ones down the time axis
            ones = self.add({"op": "ones_like", "name": f"{name}_ones", "inputs": [x]})
            first = self.add(
                {
                    "op": "slice_axis",
                    "name": f"{name}_column",
                    "inputs": [[ones, 0, 0]],
                    "attrs": {"axis": "2", "begin": "0", "end": "1"},
                }
            )
            total = self.add(
                {
                    "op": "sum",
                    "name": f"{name}_steps",
                    "inputs": [[first, 0, 0]],
                    "attrs": {"axis": "(0, 2)"},
                }
            )
            lengths = [total, 0, 0]
        state_node = self.symbol.nodes[node["inputs"][2][0]] if len(inputs) > 2 else None
        has_state = state_node is not None and state_node.op != "_zeros"
        d = 2 if bidirectional else 1
        for layer in range(layers):
            parts = [
                self.variable(f"{name}_l{layer}_{part}", self.weight(name, layer, part))
                for part in ("wx", "wh", "bias", "bias_h")
            ]
            gru_inputs = [x, lengths, *parts]
            if has_state:
                h0 = self.add(
                    {
                        "op": "slice_axis",
                        "name": f"{name}_l{layer}_h0",
                        "inputs": [inputs[2]],
                        "attrs": {
                            "axis": "0",
                            "begin": str(layer * d),
                            "end": str((layer + 1) * d),
                        },
                    }
                )
                gru_inputs.append([h0, 0, 0])
            gru = self.add(
                {
                    "op": "fusebridge_fusion_gru",
                    "name": f"{name}_l{layer}",
                    "inputs": gru_inputs,
                    "attrs": {
                        "direction": "bidirectional" if bidirectional else "forward",
                        "layout": "tnc",
                        "linear_before_reset": "True",
                        "origin_mode": "True",
                        "has_h0": str(has_state),
                    },
                }
            )
            x = [gru, 0, 0]
        self.entry[(index, 0)] = x

    def dropout(self, index: int, node: dict) -> None:
        attrs = self.symbol.nodes[index].attrs
        if parse_str(attrs.get("mode", "training"), node["name"], "mode") != "training":
            self.keep(index, node)  # 'always' drops at inference: MXNet's own bits, kept
            return
        new = self.add(
            {
                "op": "fusebridge_dropout",
                "name": node["name"],
                "inputs": self.inputs(node),
                "attrs": {
                    "p": attrs.get("p", "0.5"),
                    "axes": attrs.get("axes", "()"),
                    "seed": "0",
                    "is_test": "True",
                },
            }
        )
        self.entry[(index, 0)] = [new, 0, 0]
        self.entry[(index, 1)] = [new, 1, 0]

    def keep(self, index: int, node: dict) -> None:
        self.moved[index] = self.add({**node, "inputs": self.inputs(node)})


def save_mxnet(model: ir.Model, prefix: str | os.PathLike) -> tuple[Path, Path]:
    """Writes `prefix-symbol.json` and `prefix-0000.params`: the MXNet model `model` was loaded
    from, with GRUs and inference dropouts as fusebridge ops, and the parameters `model` holds.
    Load them in MXNet after fusebridge.integrations.mxnet.register(), e.g.
    mx.gluon.SymbolBlock.imports (docs/mxnet.md). Returns the two paths."""
    text = model.metadata_props.get(SYMBOL_KEY)
    if text is None:
        raise ArgumentError(
            "save_mxnet: the model was not loaded from an MXNet symbol file (fb.load of "
            "prefix-symbol.json keeps the MXNet graph it writes back)"
        )
    # Checked again: the metadata of a model read from an ONNX file is that file's to say.
    symbol = parse_symbol(text, f"save_mxnet: the model's {SYMBOL_KEY} metadata")
    source = json.loads(text)
    writer = _Writer(source, symbol, model)
    for index, node in enumerate(source["nodes"]):
        if node["op"] == "null":
            writer.moved[index] = writer.add(dict(node))
        elif node["op"] == "RNN":
            writer.rnn(index, node)
        elif node["op"] == "Dropout":
            writer.dropout(index, node)
        else:
            writer.keep(index, node)
    nodes, heads = _reachable(writer.nodes, [writer.new_entry(h) for h in source["heads"]])
    symbol = {
        "nodes": nodes,
        "arg_nodes": [i for i, n in enumerate(nodes) if n["op"] == "null"],
        "heads": heads,
        "attrs": source.get("attrs", {}),
    }
    # Variables that are not graph inputs of the model are parameters; the MXNet ops fusebridge
    # converts keep no auxiliary states, so every one is an "arg:".
    data = {v.name for v in model.graph.inputs}
    arrays = {}
    for name in (n["name"] for n in nodes if n["op"] == "null" and n["name"] not in data):
        array = writer.params[name] if name in writer.params else writer.parameter(name)
        arrays[name] = ("arg", array)
    base = Path(prefix)
    base.parent.mkdir(parents=True, exist_ok=True)
    symbol_path = base.with_name(base.name + "-symbol.json")
    params_out = base.with_name(base.name + "-0000.params")
    symbol_path.write_text(json.dumps(symbol, indent=2))
    write_params(params_out, arrays)
    return symbol_path, params_out


def _reachable(nodes: list[dict], heads: list[list[int]]) -> tuple[list[dict], list[list[int]]]:
    """The nodes the heads depend on, in order, with inputs renumbered (the RNN's per-gate
    weights and their packing are left behind)."""
    keep, stack = set(), [h[0] for h in heads]
    while stack:
        i = stack.pop()
        if i not in keep:
            keep.add(i)
            stack += [e[0] for e in nodes[i]["inputs"]]
    order = sorted(keep)
    new_index = {old: new for new, old in enumerate(order)}
    renumbered = [
        {**nodes[i], "inputs": [[new_index[e[0]], e[1], 0] for e in nodes[i]["inputs"]]}
        for i in order
    ]
    return renumbered, [[new_index[h[0]], h[1], 0] for h in heads]
