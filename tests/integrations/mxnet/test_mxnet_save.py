"""save_mxnet writes the IR itself: a graph made by hand (no MXNet behind it) runs in MXNet with
the Session's numbers, parameters are the model's initializers, shapes computed at run time
become MXNet Reshape codes, and what has no MXNet form is refused by name before any file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest
from helpers.error_bounds import MXNET, assert_within
from helpers.graph_bounds import SESSION, output_bounds

import fusebridge as fb
from fusebridge import conventions, kernels
from fusebridge.integrations.mxnet import shape_codes as sc
from fusebridge.integrations.mxnet.params import read_params

T, N, IC, OC, K = 6, 3, 5, 4, 7


def _const(name: str, array: np.ndarray) -> ir.Value:
    return ir.Value(name=name, const_value=ir.tensor(array, name=name))


def _gru_matmul_add() -> ir.Model:
    """FusionGRU (bidirectional, tnc, sentence lengths) -> MatMul -> Add, built in the IR."""
    rng = np.random.default_rng(3)

    def weight(*shape: int) -> np.ndarray:
        return rng.uniform(-0.5, 0.5, shape).astype(np.float32)

    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([T, N, IC]))
    lens = ir.Value(name="lens", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([N]))
    params = [
        _const("wx", weight(2, IC, 3 * OC)),
        _const("wh", weight(2, OC, 3 * OC)),
        _const("b", weight(2, 3 * OC)),
        _const("bh", weight(2, 3 * OC)),
    ]
    proj, bias = _const("proj", weight(2 * OC, K)), _const("proj_bias", weight(K))
    gru = ir.node(
        "FusionGRU",
        [x, lens, *params],
        {"direction": "bidirectional", "layout": "tnc", "linear_before_reset": 1},
        domain=conventions.DOMAIN,
        name="gru",
    )
    matmul = ir.node("MatMul", [gru.outputs[0], proj], name="proj")
    add = ir.node("Add", [matmul.outputs[0], bias], name="proj_add")
    graph = ir.Graph(
        [x, lens],
        [add.outputs[0]],
        nodes=[gru, matmul, add],
        initializers=[*params, proj, bias],
        opset_imports=conventions.opset_imports(),
    )
    return ir.Model(graph, ir_version=conventions.IR_VERSION)


def _feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((T, N, IC)).astype(np.float32)
    return {"x": x, "lens": np.array([T, 2, 4], np.int64)}


def test_a_model_built_in_the_ir_is_written_from_its_graph(tmp_path):
    model = _gru_matmul_add()
    assert not model.metadata_props
    symbol_path, params_path = fb.save_mxnet(model, tmp_path / "m")
    symbol = json.loads(symbol_path.read_text())
    ops = [n["op"] for n in symbol["nodes"] if n["op"] != "null"]
    assert ops == ["fusebridge_fusion_gru", "dot", "broadcast_add"]
    (gru,) = [n for n in symbol["nodes"] if n["op"] == "fusebridge_fusion_gru"]
    assert gru["attrs"]["direction"] == "bidirectional" and gru["attrs"]["has_h0"] == "False"
    assert gru["attrs"]["linear_before_reset"] == "True"
    saved = read_params(params_path)
    inits = model.graph.initializers
    # The GRU's weights are written packed (the layout its op reads), the others as they are.
    (gru_node,) = [n for n in model.graph if n.op_type == "FusionGRU"]
    raw = [v.const_value.numpy() for v in gru_node.inputs[2:6]]
    packed = kernels.pack_gru_weights(*raw)
    names = {f"{gru_node.name}/packed_{k}": k for k in ("wx", "wh", "bias_x", "bias_hc")}
    assert saved.keys() == (inits.keys() - {v.name for v in gru_node.inputs[2:6]}) | names.keys()
    for name, array in saved.items():
        want = getattr(packed, names[name]) if name in names else inits[name].const_value.numpy()
        np.testing.assert_array_equal(array, want, err_msg=name)
    args = [n["name"] for n in symbol["nodes"] if n["op"] == "null"]
    assert [a for a in args if a not in saved] == ["x", "lens"]
    (lens,) = [n for n in symbol["nodes"] if n["name"] == "lens"]
    assert lens["attrs"] == {"__dtype__": "6"}  # int64, as the graph input is


@pytest.mark.mxnet
def test_a_model_built_in_the_ir_runs_in_mxnet_as_in_the_session(tmp_path):
    mx = pytest.importorskip("mxnet")
    from fusebridge.integrations.mxnet import register

    register()
    model = _gru_matmul_add()
    symbol_path, params_path = fb.save_mxnet(model, tmp_path / "m")
    feeds = _feeds()
    net = mx.gluon.SymbolBlock.imports(str(symbol_path), ["x", "lens"], str(params_path))
    theirs = net(mx.nd.array(feeds["x"]), mx.nd.array(feeds["lens"], dtype="int64")).asnumpy()
    (ours,) = fb.Session(model).run(feeds).values()
    assert theirs.shape == (T, N, K)
    (bound,) = output_bounds(model, feeds, (SESSION, MXNET)).values()
    assert_within(theirs, ours, bound)
    # Sentence 1 has 2 words: the GRU's output past them is zero, leaving the bias alone.
    bias = model.graph.initializers["proj_bias"].const_value.numpy()
    np.testing.assert_array_equal(theirs[2:, 1], np.broadcast_to(bias, (T - 2, K)))


def _with_node(node: ir.Node, x: ir.Value, extra: list[ir.Value] = ()) -> ir.Model:
    graph = ir.Graph(
        [x],
        [node.outputs[0]],
        nodes=[node],
        initializers=extra,
        opset_imports=conventions.opset_imports(),
    )
    return ir.Model(graph, ir_version=conventions.IR_VERSION)


def test_an_op_with_no_mxnet_form_is_refused_by_name_before_any_file(tmp_path):
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT))
    model = _with_node(ir.node("Sin", [x], name="the_sine"), x)
    with pytest.raises(fb.UnsupportedOpError, match=r"ONNX Sin node 'the_sine': no MXNet"):
        fb.save_mxnet(model, tmp_path / "m")
    assert not list(tmp_path.iterdir())


def test_what_mxnet_cannot_take_is_refused_with_the_reason(tmp_path):
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT))
    # A shape that comes from a graph input is known only when the model runs.
    shape = ir.Value(name="shape", type=ir.TensorType(ir.DataType.INT64))
    reshape = ir.node("Reshape", [x, shape], name="r")
    graph = ir.Graph(
        [x, shape], [reshape.outputs[0]], nodes=[reshape], opset_imports=conventions.opset_imports()
    )
    model = ir.Model(graph, ir_version=conventions.IR_VERSION)
    with pytest.raises(fb.UnsupportedOpError, match=r"ONNX Reshape node 'r': shape input 'shape'"):
        fb.save_mxnet(model, tmp_path / "m")
    # A training dropout's seed that is not a constant: fusebridge_dropout takes it as an attribute.
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT))
    seed = ir.Value(name="seed", type=ir.TensorType(ir.DataType.INT64))
    drop = ir.node("Dropout", [x, seed], {"p": 0.5}, domain=conventions.DOMAIN, name="d")
    graph = ir.Graph(
        [x, seed], [drop.outputs[0]], nodes=[drop], opset_imports=conventions.opset_imports()
    )
    with pytest.raises(fb.UnsupportedOpError, match=r"ONNX fusebridge.Dropout node 'd': seed"):
        fb.save_mxnet(ir.Model(graph, ir_version=conventions.IR_VERSION), tmp_path / "m")
    assert not list(tmp_path.iterdir())


def test_reshape_codes_of_the_loaders_swap_axes():
    """The loader's SwapAxis(0, 1) of x [A, B, rest...]: x as [1, A, 1, B, prod(rest)],
    transposed (0, 3, 2, 1, 4), then [B, A, rest...]; the rest unflattened by reshape_like."""
    x = ir.Value(name="x")
    rest = sc.Run(x, 2, None)
    a, b = sc.Dim(x, 0), sc.Dim(x, 1)
    five = (sc.Lit(1), a, sc.Lit(1), b, sc.product((rest,)))
    codes, unflatten = sc.reshape_codes(sc.own(x), five)
    assert codes == [-4, 1, -1, -4, 1, -1, -1] and not unflatten
    # MXNet 1.9 puts a -1 after a -4 in the wrong dim: the splits go to a second Reshape.
    assert sc.mxnet_steps(codes) == [[0, 0, -1], [-4, 1, -1, -4, 1, -1, 0]]
    swapped = tuple(five[p] for p in (0, 3, 2, 1, 4))
    codes, unflatten = sc.reshape_codes(swapped, (b, a, rest))
    assert codes == [-3, -3, 0] and unflatten == [(2, rest)]
    assert sc.mxnet_steps(codes) == [codes]
    with pytest.raises(ValueError, match="besides another dim inferred"):
        sc.reshape_codes(sc.own(x), (sc.Dim(ir.Value(name="y"), 0), sc.Dim(ir.Value(name="z"), 0)))


@pytest.mark.mxnet
def test_fully_connected_and_prelu_run_in_mxnet_as_the_original(tmp_path):
    """The weights as the model holds them (transposed for dot, prelu's slope as [C, 1]) give
    MXNet's own output of the original FullyConnected + LeakyReLU(prelu). (The loader's
    [C, 1] slope is right for rank 3 only: on [N, C] it does not broadcast, and the IR fails
    to run, in the Session as in MXNet.)"""
    mx = pytest.importorskip("mxnet")
    from fusebridge.integrations.mxnet import register

    register()
    x = mx.sym.var("data")
    fc = mx.sym.FullyConnected(
        x, mx.sym.var("w"), mx.sym.var("b"), num_hidden=3, flatten=False, name="fc"
    )
    sym = mx.sym.LeakyReLU(fc, mx.sym.var("gamma"), act_type="prelu", name="act")
    rng = np.random.default_rng(0)
    params = {"w": (3, 4), "b": (3,), "gamma": (2,)}  # prelu scales axis 1 of [5, 2, 3]
    params = {n: mx.nd.array(rng.standard_normal(s).astype(np.float32)) for n, s in params.items()}
    params["gamma"] = mx.nd.array([0.25, 0.5])  # positive: negative inputs stay negative
    data = rng.standard_normal((5, 2, 4)).astype(np.float32)
    exe = sym.bind(mx.cpu(), {"data": mx.nd.array(data), **params}, grad_req="null")
    theirs = exe.forward(is_train=False)[0].asnumpy()
    sym.save(str(tmp_path / "m-symbol.json"))
    mx.nd.save(str(tmp_path / "m-0000.params"), {f"arg:{k}": v for k, v in params.items()})
    model = fb.load(tmp_path / "m-symbol.json")
    symbol_path, params_path = fb.save_mxnet(model, tmp_path / "saved")
    net = mx.gluon.SymbolBlock.imports(str(symbol_path), ["data"], str(params_path))
    (bound,) = output_bounds(model, {"data": data}, (MXNET, MXNET)).values()
    assert_within(net(mx.nd.array(data)).asnumpy(), theirs, bound)
    assert (theirs < 0).any()  # the slope is used


def test_saved_files_do_not_depend_on_where_the_model_came_from(tmp_path):
    """The same graph saved twice gives the same bytes (no path or time written)."""
    model = _gru_matmul_add()
    first = fb.save_mxnet(model, tmp_path / "a")
    second = fb.save_mxnet(model, tmp_path / "b")
    for p, q in zip(first, second):
        assert Path(p).read_bytes() == Path(q).read_bytes()


def test_a_shape_slice_far_past_any_rank_is_not_followed_dim_by_dim(tmp_path):
    """A crafted Shape end of 10**12 would peel 10**12 dims: it is refused as a shape MXNet
    codes cannot make (a Run of unknown count in the middle), at once."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT))
    shape = ir.node("Shape", [x], {"start": 1, "end": 10**12}, name="s")
    minus_one = _const("minus_one", np.array([-1], np.int64))
    concat = ir.node("Concat", [shape.outputs[0], minus_one], {"axis": 0}, name="c")
    reshape = ir.node("Reshape", [x, concat.outputs[0]], name="r")
    graph = ir.Graph(
        [x],
        [reshape.outputs[0]],
        nodes=[shape, concat, reshape],
        initializers=[minus_one],
        opset_imports=conventions.opset_imports(),
    )
    model = ir.Model(graph, ir_version=conventions.IR_VERSION)
    with pytest.raises(fb.UnsupportedOpError, match=r"ONNX Reshape node 'r': its shape"):
        fb.save_mxnet(model, tmp_path / "m")
