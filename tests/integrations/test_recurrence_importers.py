"""The three importers give the same GRU for the same weights: the two-layer bidirectional GRU
that Paddle saved (tests/fixtures/paddle3/gru_tagger_lengths, its WeightList read by Paddle
itself) is written again as an MXNet RNN(mode=gru) symbol and as two stacked ONNX GRU nodes,
each packed here from the framework's own documented layout; the three files load into the same
FusionGRU layers, attribute for attribute and weight for weight, bit for bit (the import only
moves numbers). The packings below are written from the formats, not from our importers:

- Paddle `rnn` and MXNet `RNN` keep all weights, then all biases, each by (layer, direction),
  input-to-hidden before hidden-to-hidden, gate rows (r, z, n): MXNet's flat parameter vector
  is Paddle's WeightList flattened in order.
- ONNX GRU: W [D, 3H, I], R [D, 3H, H], B [D, 6H] = (Wb, Rb), gate rows (z, r, h);
  linear_before_reset 1 is Paddle's and MXNet's candidate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from helpers.paddle_oracle import paddle_or_skip
from onnx import TensorProto, helper

import fusebridge as fb
from fusebridge.integrations.mxnet.params import write_params

FIXTURE = Path(__file__).parents[1] / "fixtures" / "paddle3" / "gru_tagger_lengths" / "legacy"

pytestmark = pytest.mark.paddle


def paddle_rnn(model_dir: Path) -> tuple[dict, list[np.ndarray]]:
    """The rnn op's attributes and WeightList, as Paddle's Executor loads them."""
    paddle_or_skip()
    from fusebridge.bench.paddle_runtime import ExecutorRunner

    runner = ExecutorRunner(model_dir)
    (rnn,) = [op for op in runner.program.global_block().ops if op.type == "rnn"]
    attrs = {k: rnn.attr(k) for k in ("num_layers", "hidden_size", "is_bidirec", "mode")}
    weights = [np.array(runner.scope.find_var(n).get_tensor()) for n in rnn.input("WeightList")]
    return attrs, weights


def mxnet_file(tmp_path: Path, weights: list[np.ndarray], layers: int, hidden: int) -> Path:
    nodes = [
        {"op": "null", "name": "x", "inputs": []},
        {"op": "null", "name": "params", "inputs": []},
        {"op": "null", "name": "state", "inputs": []},
        {"op": "null", "name": "lens", "inputs": []},
        {
            "op": "RNN",
            "name": "rnn",
            "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]],
            "attrs": {
                "mode": "gru",
                "state_size": str(hidden),
                "num_layers": str(layers),
                "bidirectional": "True",
                "use_sequence_length": "True",
                "state_outputs": "True",
            },
        },
    ]
    path = tmp_path / "m-symbol.json"
    heads = [[4, 0, 0], [4, 1, 0]]
    path.write_text(json.dumps({"nodes": nodes, "arg_nodes": [0, 1, 2, 3], "heads": heads}))
    flat = np.concatenate([w.reshape(-1) for w in weights])
    write_params(tmp_path / "m-0000.params", {"params": ("arg", flat)})
    return path


def _zrh(a: np.ndarray) -> np.ndarray:
    r, z, n = np.split(a, 3)
    return np.concatenate([z, r, n])


def onnx_file(tmp_path: Path, weights: list[np.ndarray], layers: int, hidden: int) -> Path:
    d, per = 2, 2 * layers * 2  # directions; weights before the biases
    nodes, inits = [], []
    x = "x"
    for layer in range(layers):
        k = [2 * (layer * d + direction) for direction in range(d)]
        w = np.stack([_zrh(weights[i]) for i in k])
        r = np.stack([_zrh(weights[i + 1]) for i in k])
        b = np.stack(
            [np.concatenate([_zrh(weights[per + i]), _zrh(weights[per + i + 1])]) for i in k]
        )
        names = [f"W{layer}", f"R{layer}", f"B{layer}"]
        inits += [
            helper.make_tensor(n, TensorProto.FLOAT, a.shape, a.reshape(-1))
            for n, a in zip(names, (w, r, b))
        ]
        y, h0 = f"y{layer}", f"h0_{layer}"
        nodes.append(helper.make_node("Slice", ["state", f"rows{layer}_b", f"rows{layer}_e"], [h0]))
        inits += [
            helper.make_tensor(f"rows{layer}_b", TensorProto.INT64, [1], [layer * d]),
            helper.make_tensor(f"rows{layer}_e", TensorProto.INT64, [1], [layer * d + d]),
        ]
        nodes.append(
            helper.make_node(
                "GRU", [x, *names, "lens", h0], [y, f"h{layer}"], f"gru{layer}",
                hidden_size=hidden, direction="bidirectional", linear_before_reset=1,
            )
        )  # fmt: skip
        nodes.append(helper.make_node("Transpose", [y], [f"{y}t"], perm=[0, 2, 1, 3]))
        x = f"{y}r"
        shape = helper.make_tensor(f"shape{layer}", TensorProto.INT64, [3], [0, 0, d * hidden])
        inits.append(shape)
        nodes.append(helper.make_node("Reshape", [f"{y}t", f"shape{layer}"], [x]))
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "N", weights[0].shape[1]]),
            helper.make_tensor_value_info("lens", TensorProto.INT32, ["N"]),
            helper.make_tensor_value_info("state", TensorProto.FLOAT, [layers * d, "N", hidden]),
        ],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["T", "N", d * hidden])],
        initializer=inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return path


def gru_layers(model) -> list[tuple[dict, list[np.ndarray], tuple]]:
    """Each FusionGRU in graph order: its attributes, its weights (Wx, Wh, B, B_h) and its
    initial state: the rows of the [L*D, N, H] state it slices, and its declared directions and
    hidden size."""
    out = []
    for node in model.graph:
        if node.op_type != "FusionGRU":
            continue
        attrs = fb.ops.schema("FusionGRU").attribute_values(node)
        weights = [node.inputs[i].const_value.numpy() for i in range(2, 6)]
        h0 = node.inputs[6]
        rows = h0.producer()
        assert rows.op_type == "Slice", node.name
        begin, end = (int(rows.inputs[k].const_value.numpy()[0]) for k in (1, 2))
        shape = h0.shape
        declared = (len(shape), shape[0], shape[2]) if shape is not None else None
        out.append((attrs, weights, (begin, end, declared)))
    return out


def test_paddle_mxnet_and_onnx_import_the_same_gru(tmp_path):
    attrs, weights = paddle_rnn(FIXTURE)
    assert (attrs["mode"], attrs["is_bidirec"]) == ("GRU", True)
    layers, hidden = attrs["num_layers"], attrs["hidden_size"]
    assert layers == 2 and len(weights) == 8 * layers
    paddle = gru_layers(fb.load(FIXTURE))
    mxnet = gru_layers(fb.load(mxnet_file(tmp_path, weights, layers, hidden)))
    onnx_ = gru_layers(fb.load(onnx_file(tmp_path, weights, layers, hidden)))
    assert len(paddle) == len(mxnet) == len(onnx_) == layers
    for layer, (p, m, o) in enumerate(zip(paddle, mxnet, onnx_)):
        assert p[0] == m[0] == o[0], f"layer {layer}: attributes"
        assert p[0]["layout"] == "tnc" and p[0]["linear_before_reset"] == 1
        for k, name in enumerate(("Wx", "Wh", "B", "B_h")):
            np.testing.assert_array_equal(m[1][k], p[1][k], err_msg=f"layer {layer} {name}")
            np.testing.assert_array_equal(o[1][k], p[1][k], err_msg=f"layer {layer} {name}")
        d, hidden = 2, attrs["hidden_size"]
        assert p[2] == m[2] == o[2] == (layer * d, layer * d + d, (3, d, hidden)), f"layer {layer}"
