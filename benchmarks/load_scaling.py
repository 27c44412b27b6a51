"""How fb.load scales with a model's size: chains of 1000 to 30000 ops for every frontend (an
MXNet symbol JSON, an ONNX model, a Paddle ProgramDesc), each generated here. The time per
node stays flat when loading is linear in the nodes; a quadratic step (a list search per node)
shows as a time per node that grows with the chain.

    python -m benchmarks.load_scaling [--quick]
    python -m benchmarks.run --only load_scaling [--quick]    (the same)
"""

from __future__ import annotations

import gc
import json
import struct
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper

import fusebridge as fb
from benchmarks.common import best_time, markdown_table
from fuzz.wire import encode_varint

SIZES = (1000, 2000, 4000, 8000, 16000, 30000)
QUICK_SIZES = (1000, 4000, 16000)


# -- MXNet: symbol JSON -----------------------------------------------------------------------
def mxnet_chain(n: int, directory: Path) -> Path:
    """x -> n ops cycling through relu, _plus_scalar, Reshape(0, -1) and Dropout (a constant,
    a run-time shape and one of our ops each)."""
    kinds = [
        ("relu", {}),
        ("_plus_scalar", {"scalar": "1.5"}),
        ("Reshape", {"shape": "(0, -1)"}),
        ("Dropout", {"p": "0.1"}),
    ]
    nodes = [{"op": "null", "name": "x", "inputs": [], "attrs": {"__shape__": "(2, 8)"}}]
    for i in range(n):
        op, attrs = kinds[i % len(kinds)]
        nodes.append({"op": op, "name": f"n{i}", "attrs": attrs, "inputs": [[i, 0, 0]]})
    path = directory / f"chain{n}-symbol.json"
    path.write_text(json.dumps({"nodes": nodes, "arg_nodes": [0], "heads": [[n, 0, 0]]}))
    return path


# -- ONNX ----------------------------------------------------------------------------------------
def onnx_chain(n: int, directory: Path) -> Path:
    """x -> n ops cycling through Relu, Add of an initializer, Reshape and Dropout."""
    kinds = ["Relu", "Add", "Reshape", "Dropout"]
    nodes, previous = [], "x"
    for i in range(n):
        op = kinds[i % len(kinds)]
        inputs = [previous, *{"Add": ["bias"], "Reshape": ["shape"]}.get(op, [])]
        nodes.append(helper.make_node(op, inputs, [f"n{i}"], name=f"n{i}"))
        previous = f"n{i}"
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
        [helper.make_tensor_value_info(previous, TensorProto.FLOAT, None)],
        [
            onnx.numpy_helper.from_array(np.ones(8, np.float32), "bias"),
            onnx.numpy_helper.from_array(np.array([2, -1], np.int64), "shape"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    path = directory / f"chain{n}.onnx"
    onnx.save(model, path)
    return path


# -- Paddle: ProgramDesc, written field by field (fuzz/wire.py's varints) --------------------------
def _field(number: int, value: int | bytes | str) -> bytes:
    """A varint field (int; negatives as protobuf writes int64) or a length-delimited one
    (bytes, str)."""
    if isinstance(value, int):
        return encode_varint(number << 3) + encode_varint(value)
    payload = value.encode() if isinstance(value, str) else value
    return encode_varint(number << 3 | 2) + encode_varint(len(payload)) + payload


def _paddle_var(name: str, var_type: int = 7) -> bytes:
    """A VarDesc: feed (9) and fetch (10) hold no tensor, the others float32 [-1, 8]."""
    if var_type in (9, 10):
        return _field(1, name) + _field(2, _field(1, var_type)) + _field(3, 1)
    dims = _field(1, 5) + _field(2, -1) + _field(2, 8)  # TensorDesc: float32 [-1, 8]
    return _field(1, name) + _field(2, _field(1, var_type) + _field(3, _field(1, dims)))


def _paddle_op(op: str, x: str, out: str, attrs: bytes = b"") -> bytes:
    """An OpDesc reading slot X and writing slot Out (feed, fetch, relu, scale, dropout)."""
    return (
        _field(1, _field(1, "X") + _field(2, x))
        + _field(2, _field(1, "Out") + _field(2, out))
        + _field(3, op)
        + attrs
    )


def _paddle_attr(name: str, attr_type: int, value: bytes) -> bytes:
    return _field(4, _field(1, name) + _field(2, attr_type) + value)


def paddle_chain(n: int, directory: Path) -> Path:
    """feed x -> n ops cycling through relu, scale and dropout (inference) -> fetch."""
    col = _paddle_attr("col", 0, _field(3, 0))
    scale = _paddle_attr("scale", 1, struct.pack("<Bf", 4 << 3 | 5, 2.0))  # FLOAT in field 4
    dropout = _paddle_attr("dropout_prob", 1, struct.pack("<Bf", 4 << 3 | 5, 0.1)) + (
        _paddle_attr("is_test", 6, _field(10, 1))  # BOOLEAN in field 10
    )
    kinds = [("relu", b""), ("scale", scale), ("dropout", dropout)]
    variables = [_paddle_var("feed", 9), _paddle_var("fetch", 10), _paddle_var("x")]
    ops, previous = [_paddle_op("feed", "feed", "x", col)], "x"
    for i in range(n):
        op, attrs = kinds[i % len(kinds)]
        variables.append(_paddle_var(f"n{i}"))
        ops.append(_paddle_op(op, previous, f"n{i}", attrs))
        previous = f"n{i}"
    ops.append(_paddle_op("fetch", previous, "fetch", col))
    block = _field(1, 0) + _field(2, -1)
    block += b"".join(_field(3, v) for v in variables) + b"".join(_field(4, o) for o in ops)
    model = directory / f"paddle_chain{n}"
    model.mkdir(exist_ok=True)
    (model / "__model__").write_bytes(_field(1, block) + _field(4, _field(1, 3003001)))
    return model


FRONTENDS: dict[str, Callable[[int, Path], Path]] = {
    "MXNet symbol JSON": mxnet_chain,
    "ONNX": onnx_chain,
    "Paddle ProgramDesc": paddle_chain,
}


def _load_time(path: Path, repeat: int, collect: bool) -> float:
    """Best wall time of fb.load(path); with collect=False the garbage collector is paused
    while it runs, which leaves the loader's own work."""
    if collect:
        return best_time(lambda: fb.load(path), repeat)
    gc.collect()
    gc.disable()
    try:
        return best_time(lambda: fb.load(path), repeat)
    finally:
        gc.enable()


def run(quick: bool, threads: int) -> str:
    """The load time of each frontend's chains as a Markdown table."""
    sizes, repeat = (QUICK_SIZES, 1) if quick else (SIZES, 3)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for frontend, make in FRONTENDS.items():
            for n in sizes:
                path = make(n, Path(tmp))
                seconds = _load_time(path, repeat, collect=True)
                quiet = _load_time(path, repeat, collect=False)
                rows.append(
                    [frontend, str(n), f"{seconds:.3f}", f"{seconds / n * 1e6:.1f}"]
                    + [f"{quiet / n * 1e6:.1f}"]
                )
    header = ["frontend", "nodes", "load (s)", "per node (us)", "per node, gc paused (us)"]
    return (
        "### fb.load of op chains\n\nBest of "
        f"{repeat} loads. Linear loading keeps the time per node flat; with the garbage "
        "collector paused it is the loader's own work (the collector's full passes over a "
        "growing heap add a slowly rising share).\n\n" + markdown_table(header, rows)
    )


if __name__ == "__main__":
    from benchmarks import run as runner

    sys.exit(runner.main(["--only", "load_scaling", *sys.argv[1:]]))
