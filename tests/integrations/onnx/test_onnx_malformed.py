"""Malformed ONNX files: each is a ModelFormatError (or, for valid ONNX we cannot take, an
UnsupportedOpError) naming the file and what is wrong: the node, the value or attribute, the
value found and what was expected; none is an untyped exception, a hang or a big allocation."""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.error_bounds import ONNXRUNTIME, assert_within
from helpers.graph_bounds import SESSION, output_bounds
from helpers.onnx_models import gru_model
from helpers.python_under_test import run_python
from onnx import TensorProto, helper, numpy_helper

import fusebridge as fb
from fusebridge.fuse_passes import explicit_rng, optimize, recompute_dropout_mask
from fusebridge.integrations.onnx.load import import_onnx


def _save(tmp_path: Path, proto: onnx.ModelProto | bytes, name: str = "m.onnx") -> Path:
    path = tmp_path / name
    if isinstance(proto, bytes):
        path.write_bytes(proto)
    else:
        onnx.save(proto, path)
    return path


def _refused(path: Path, error: type, *fragments: str) -> str:
    """Loads `path` expecting `error` whose message names the file and every fragment."""
    with pytest.raises(error) as info:
        fb.load(path)
    message = str(info.value)
    assert type(info.value) is error, message
    assert repr(str(path)) in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


def _gru(proto: onnx.ModelProto) -> onnx.NodeProto:
    node = next(n for n in proto.graph.node if n.op_type == "GRU")
    node.name = node.name or "the_gru"
    return node


def _set_attribute(node: onnx.NodeProto, name: str, value: object) -> None:
    kept = [a for a in node.attribute if a.name != name]
    del node.attribute[:]
    node.attribute.extend([*kept, helper.make_attribute(name, value)])


# -- the file as a whole -----------------------------------------------------------------------
def test_empty_file(tmp_path):
    _refused(_save(tmp_path, b""), fb.ModelFormatError, "empty (0 bytes)")


def test_garbage_file(tmp_path):
    _refused(_save(tmp_path, b"\xff" * 64), fb.ModelFormatError, "not a readable ONNX model")


def test_no_graph(tmp_path):
    proto = gru_model()
    proto.ClearField("graph")
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "has no graph")


def test_no_outputs(tmp_path):
    proto = gru_model()
    del proto.graph.output[:]
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "has no outputs")


def test_no_opset_import(tmp_path):
    proto = gru_model()
    del proto.opset_import[:]
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "no opset import for the standard")


def test_unknown_opsets(tmp_path):
    proto = gru_model()
    proto.opset_import[0].version = 99
    _refused(_save(tmp_path, proto), fb.UnsupportedOpError, "opset 99", "expected 1 to")
    proto = gru_model()
    proto.opset_import.append(helper.make_opsetid("fusebridge", 2))
    _refused(_save(tmp_path, proto), fb.UnsupportedOpError, "fusebridge domain version 2")


def test_older_opset_is_kept_not_misread(tmp_path):
    """Softmax before opset 13 flattens the axes from `axis` on; run at opset 17 it would
    normalize over one axis only, with no error: the model keeps its opset 11, and so do the
    ONNX Runtime partitions that run it."""
    node = helper.make_node("Softmax", ["x"], ["y"], axis=1)
    graph = helper.make_graph(
        [node],
        "softmax",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3, 4])],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=8)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    want = ort.InferenceSession(proto.SerializeToString()).run(None, {"x": x})[0]
    model = fb.load(_save(tmp_path, proto))
    assert model.opset_imports[""] == 11
    got = fb.Session(model).run({"x": x})["y"]
    # No node of ours: one ONNX Runtime session runs the file, the oracle's own computation.
    np.testing.assert_array_equal(got, want)


# -- graph structure (onnx.checker) ------------------------------------------------------------
def test_outputs_without_a_shape_still_load(tmp_path):
    # onnx.checker wants a shape on every graph input and output; ONNX Runtime does not.
    proto = gru_model()
    for value in (*proto.graph.input, *proto.graph.output):
        value.type.tensor_type.ClearField("shape")
    model = fb.load(_save(tmp_path, proto))
    feeds = {"X": np.ones((3, 2, 5), np.float32), "seq_lens": np.array([3, 1], np.int32)}
    assert fb.Session(fb.optimize(model)[0]).run(feeds)["Y"].shape == (3, 1, 2, 6)


def test_gru_without_weights(tmp_path):
    proto = gru_model()
    del _gru(proto).input[1:]
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "OpType: GRU", "input size 1")


def test_dangling_references(tmp_path):
    proto = gru_model()
    _gru(proto).input[0] = "undefined"
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "input 'undefined'", "OpType: GRU")
    proto = gru_model()
    proto.graph.output[0].name = "ghost"
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "Graph output 'ghost'")


def test_cycle(tmp_path):
    proto = gru_model(projection="matmul_add")
    proto.graph.node[0].input[0] = "Y"  # the MatMul before the GRU reads the GRU's output
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "input 'Y'", "OpType: MatMul")


def test_names_that_are_not_utf8(tmp_path):
    """proto2 strings are not checked on parse; onnx_ir would hand such a name over as bytes
    and fail only when the model is written again (in optimize)."""
    proto = gru_model(projection="matmul_add")
    proto.graph.node[0].name = "XnodeX"
    data = proto.SerializeToString().replace(b"XnodeX", b"X\xf5odeX")
    _refused(_save(tmp_path, data), fb.ModelFormatError, "node name b'X\\xf5odeX'", "UTF-8")


@pytest.mark.parametrize("attributes", [0, 2])
def test_a_constant_without_one_value_is_refused(tmp_path, attributes):
    """The long fuzz run (seed 1) retyped a Constant's value field: protobuf drops it as
    unknown, onnx.checker passes the node, and the constant folder failed on it untyped."""
    proto = gru_model(projection="matmul_add")
    values = [helper.make_attribute("value_float", 1.0), helper.make_attribute("value_int", 2)]
    constant = helper.make_node("Constant", [], ["c"], name="the_constant")
    constant.attribute.extend(values[:attributes])
    proto.graph.node.insert(0, constant)
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "Constant node 'the_constant'")


def test_duplicate_value_names(tmp_path):
    proto = gru_model(projection="matmul_add")
    proto.graph.node[1].output[0] = "mm"  # the Add writes the MatMul's output name again
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "'mm' has been used as output")


def test_unknown_domain(tmp_path):
    proto = gru_model()
    _gru(proto).domain = "com.example"
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "No opset import for domain")


@pytest.mark.parametrize("value", [6.0, "6"])
def test_attribute_of_the_wrong_type(tmp_path, value):
    proto = gru_model(hidden=6)
    _set_attribute(_gru(proto), "hidden_size", value)
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "hidden_size", "Expected: 'INT'")


# -- tensors: sizes checked before anything is allocated ---------------------------------------
def _weight(proto: onnx.ModelProto) -> onnx.TensorProto:
    return next(t for t in proto.graph.initializer if t.name == "W")


@pytest.mark.parametrize(
    ("corrupt", "fragments"),
    [
        (lambda t: setattr(t, "raw_data", t.raw_data[:10]), ["10 bytes of raw_data", "360"]),
        (lambda t: setattr(t, "raw_data", t.raw_data * 2), ["720 bytes of raw_data", "360"]),
        (lambda t: t.dims.__setitem__(0, 2**40), ["expected 395824185999360 for dims"]),
        (lambda t: t.dims.extend([2**32, 2**32]), ["[1, 18, 5, 4294967296, 4294967296]"]),
        (lambda t: t.dims.__setitem__(0, -1), ["dims [-1, 18, 5], expected no negative"]),
    ],
)
def test_initializer_of_the_wrong_size(tmp_path, corrupt, fragments):
    proto = gru_model()
    corrupt(_weight(proto))
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "tensor 'W'", *fragments)


_BOUNDED = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
import fusebridge as fb
for path in sys.argv[1:]:
    try:
        fb.Session(fb.optimize(fb.load(path))[0])
        print("loaded", path)
    except fb.Error as exc:
        print(type(exc).__name__)
"""


def test_huge_declared_sizes_fail_under_a_4_gib_address_space(tmp_path):
    paths = []
    for k, dims in enumerate([[2**40, 18, 5], [2**20, 2**20, 5], [2**62, 2**62]]):
        proto = gru_model()
        _weight(proto).dims[:] = dims  # 360 bytes of data, whatever the dims say
        paths.append(str(_save(tmp_path, proto, f"m{k}.onnx")))
    ext = _external(tmp_path, length="360")
    proto = onnx.load(ext, load_external_data=False)
    _weight(proto).dims[:] = [2**40, 18, 5]
    (length,) = [e for e in _weight(proto).external_data if e.key == "length"]
    length.value = str(2**40 * 18 * 5 * 4)
    paths.append(str(_save(ext.parent, proto, "ext.onnx")))
    out = run_python(_BOUNDED, *paths)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ModelFormatError"] * len(paths), out.stdout + out.stderr


def test_a_negative_declared_dim_is_refused_before_shape_inference(tmp_path):
    """onnx's shape inference aborts the process (a failed std::clamp assertion in Slice's
    inference) on a value declared with dim -1 that a Slice reads: run in a child, so that a
    regression fails this test instead of killing pytest."""
    proto = gru_model(projection="matmul_add")
    shape = helper.make_node("Shape", ["X"], ["shape"])
    start, end = (
        numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("s", 0), ("e", 1))
    )
    sliced = helper.make_node("Slice", ["shape", "s", "e"], ["first"])
    proto.graph.node.extend([shape, sliced])
    proto.graph.initializer.extend([start, end])
    proto.graph.value_info.append(helper.make_tensor_value_info("shape", TensorProto.INT64, [-1]))
    proto.graph.output.append(helper.make_tensor_value_info("first", TensorProto.INT64, [1]))
    path = _save(tmp_path, proto)
    out = run_python(_BOUNDED, str(path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["ModelFormatError"], out.stdout + out.stderr
    _refused(path, fb.ModelFormatError, "value 'shape' is declared with dims [-1]")


def test_typed_data_of_the_wrong_length(tmp_path):
    proto = gru_model()
    w = _weight(proto)
    values = np.frombuffer(w.raw_data, np.float32)
    w.ClearField("raw_data")
    w.float_data.extend([*values, 1.0])
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "tensor 'W': 91 values, expected 90")


# -- external data ----------------------------------------------------------------------------
def _external(tmp_path: Path, **keys: str) -> Path:
    """A GRU model in tmp_path/model whose weights are in w.bin; `keys` overwrite W's
    external_data entries."""
    model_dir = tmp_path / "model"
    model_dir.mkdir(exist_ok=True)
    onnx.save(
        gru_model(),
        model_dir / "m.onnx",
        save_as_external_data=True,
        location="w.bin",
        size_threshold=0,
    )
    proto = onnx.load(model_dir / "m.onnx", load_external_data=False)
    entries = {e.key: e.value for e in _weight(proto).external_data}
    entries.update(keys)
    del _weight(proto).external_data[:]
    for key, value in entries.items():
        _weight(proto).external_data.add(key=key, value=value)
    return _save(model_dir, proto, "m.onnx")


def test_external_data_is_read_in_and_saved_inline(tmp_path):
    path = _external(tmp_path)
    model = fb.load(path)
    (path.parent / "w.bin").unlink()  # the loaded model no longer needs it
    fb.save_onnx(model, tmp_path / "inline.onnx")
    saved = onnx.load(tmp_path / "inline.onnx", load_external_data=False)
    assert not any(t.data_location == TensorProto.EXTERNAL for t in saved.graph.initializer)
    x = np.ones((3, 2, 5), np.float32)
    feeds = {"X": x, "seq_lens": np.array([3, 1], np.int32)}
    want = ort.InferenceSession(gru_model().SerializeToString()).run(None, feeds)
    got = fb.Session(model).run(feeds)
    bounds = output_bounds(model, feeds, (SESSION, ONNXRUNTIME))
    assert_within(got["Y"], want[0], bounds["Y"], "Y")


@pytest.mark.parametrize(
    ("keys", "fragments"),
    [
        ({"location": "../secret.bin"}, ["contains '..'"]),
        ({"location": "sub/../../secret.bin"}, ["contains '..'"]),
        ({"location": "{tmp}/secret.bin"}, ["is absolute"]),
        ({"location": "link.bin"}, ["resolves (through a symlink)", "outside the model's"]),
        ({"location": "missing.bin"}, ["cannot open", "No such file"]),
        ({"location": "sub"}, ["is not a regular file"]),
        ({"location": "fifo"}, ["is not a regular file"]),  # and no wait for a writer
        ({"location": ""}, ["location '', expected a file name"]),
        ({"location": "w\x00.bin"}, ["expected a file name"]),
        ({"offset": "100000"}, ["360 bytes at offset 100000 do not fit the file's 936"]),
        ({"offset": "-8"}, ["offset '-8', expected a non-negative integer"]),
        ({"offset": "1e3"}, ["offset '1e3', expected a non-negative integer"]),
        ({"length": "100000"}, ["length 100000, but dims [1, 18, 5] of FLOAT take 360"]),
        ({"length": "4"}, ["length 4, but dims"]),
    ],
)
def test_external_data_refused(tmp_path, keys, fragments):
    (tmp_path / "secret.bin").write_bytes(bytes(4096))
    path = _external(tmp_path, **{k: v.format(tmp=tmp_path) for k, v in keys.items()})
    os.symlink(tmp_path / "secret.bin", path.parent / "link.bin")
    (path.parent / "sub").mkdir()
    os.mkfifo(path.parent / "fifo")
    _refused(path, fb.ModelFormatError, "tensor 'W'", *fragments)


def test_external_data_without_length_must_end_the_file(tmp_path):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    path = _external(tmp_path)
    proto = onnx.load(path, load_external_data=False)
    w = _weight(proto)
    keep = [(e.key, e.value) for e in w.external_data if e.key != "length"]
    del w.external_data[:]
    for key, value in keep:
        w.external_data.add(key=key, value=value)
    _refused(_save(model_dir, proto), fb.ModelFormatError, "it must end the file")


def test_external_data_of_huge_dims_is_refused_before_reading(tmp_path):
    path = _external(tmp_path, length="360")
    proto = onnx.load(path, load_external_data=False)
    _weight(proto).dims[0] = 2**40
    _refused(_save(path.parent, proto), fb.ModelFormatError, "take 395824185999360 bytes")


def test_save_refuses_external_tensors_it_cannot_inline(tmp_path):
    model = ir.load(_external(tmp_path))  # onnx_ir keeps the weights in w.bin
    with pytest.raises(fb.ArgumentError, match=r"tensor\(s\) \['W', 'R', 'B'\] refer to external"):
        fb.save_onnx(model, tmp_path / "out.onnx")


# -- ONNX GRU and Dropout: values ------------------------------------------------------------
@pytest.mark.parametrize(
    ("change", "error", "fragment"),
    [
        ({"direction": "forwad"}, fb.ModelFormatError, "attribute direction = 'forwad', expected"),
        ({"layout": 2}, fb.ModelFormatError, "attribute layout = 2, expected one of [0, 1]"),
        ({"linear_before_reset": 3}, fb.ModelFormatError, "linear_before_reset = 3, expected"),
        ({"hidden_size": 7}, fb.ModelFormatError, "hidden_size 7, but R has 6 columns"),
        ({"activations": ["Sigmoid"]}, fb.ModelFormatError, "1 names, expected 2"),
        ({"activations": ["Sigmoid"] * 3}, fb.ModelFormatError, "3 names, expected 2"),
    ],
)
def test_gru_attribute_values(tmp_path, change, error, fragment):
    proto = gru_model(hidden=6)
    for key, value in change.items():
        _set_attribute(_gru(proto), key, value)
    _refused(_save(tmp_path, proto), error, "ONNX GRU node 'the_gru'", fragment)


@pytest.mark.parametrize(
    ("name", "array", "fragment"),
    [
        ("R", np.zeros((1, 18), np.float32), "R [1, 18], expected [1, 3 * hidden, hidden]"),
        ("R", np.zeros((1, 0, 0), np.float32), "with hidden >= 1"),
        ("W", np.zeros((1, 18, 5), np.int64), "input W 'W' is int64, expected a float type"),
        ("W", np.zeros((1, 17, 5), np.float32), "W [1, 17, 5], expected [1, 18, input size]"),
        ("W", np.zeros((1, 18, 4), np.float32), "input X ['T', 'N', 5], expected [steps"),
        ("B", np.zeros((1, 35), np.float32), "B [1, 35], expected [1, 36]"),
        ("B", np.zeros(36, np.float32), "B [36], expected [1, 36]"),
    ],
)
def test_gru_weight_shapes_and_types(tmp_path, name, array, fragment):
    proto = gru_model(hidden=6)
    _gru(proto)
    old = next(t for t in proto.graph.initializer if t.name == name)
    old.CopyFrom(numpy_helper.from_array(array, name))
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "ONNX GRU node 'the_gru'", fragment)


def _dropout(ratio: object = None, training: object = None, seed: object = None):
    inits, inputs = [], ["x", "", ""]
    if ratio is not None:
        inits.append(numpy_helper.from_array(np.asarray(ratio), "ratio"))
        inputs[1] = "ratio"
    if training is not None:
        inits.append(numpy_helper.from_array(np.asarray(training), "training"))
        inputs[2] = "training"
    attrs = {} if seed is None else {"seed": seed}
    node = helper.make_node("Dropout", inputs, ["y"], name="drop", **attrs)
    graph = helper.make_graph(
        [node],
        "dropout",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("ratio", [1.5, -3.0, float("nan"), float("inf")])
@pytest.mark.parametrize("training", [True, False])
def test_dropout_ratio_out_of_range(tmp_path, ratio, training):
    proto = _dropout(np.float32(ratio), np.bool_(training), seed=1)
    _refused(
        _save(tmp_path, proto),
        fb.ModelFormatError,
        "ONNX Dropout node 'drop'",
        f"ratio {float(np.float32(ratio))}, expected a probability in [0, 1]",
    )


def test_dropout_ratio_one_drops_everything(tmp_path):
    proto = _dropout(np.float32(1.0), np.bool_(True), seed=3)
    y = fb.Session(fb.load(_save(tmp_path, proto))).run({"x": np.ones((4, 5), np.float32)})["y"]
    np.testing.assert_array_equal(y, np.zeros((4, 5), np.float32))


@pytest.mark.parametrize(
    ("proto", "fragment"),
    [
        (_dropout(np.float32([0.1, 0.2])), "ratio 'ratio' is float32 [2], expected a float scalar"),
        (_dropout(np.int64(0)), "ratio 'ratio' is int64 [], expected a float scalar"),
        (_dropout(0.1, np.float32(1)), "training_mode 'training' is float32 [], expected a bool"),
        (_dropout(0.1, True, seed=7.0), "type in 'drop : seed'. Expected: 'INT'"),
    ],
)
def test_dropout_inputs_of_the_wrong_kind(tmp_path, proto, fragment):
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "Dropout", "drop", fragment)


@pytest.mark.parametrize("seed", [float("nan"), 1e30, -(2.0**64)])
def test_dropout_seed_out_of_int64_in_memory(seed):
    # A file's seed is an int (onnx.checker); an in-memory model may carry a float one.
    model = ir.from_proto(_dropout(0.1, True, seed=seed))
    with pytest.raises(
        fb.ModelFormatError, match=r"attribute seed = .*, expected an int64"
    ) as info:
        import_onnx(model)
    assert "ONNX Dropout node 'drop'" in str(info.value)


# -- fusebridge-domain files -------------------------------------------------------------------
def _ours(tmp_path: Path) -> onnx.ModelProto:
    """A file fusebridge wrote: a training Dropout (seeded) on x [4, 5]."""
    path = tmp_path / "ours.onnx"
    fb.save_onnx(fb.load(_save(tmp_path, _dropout(0.25, True, seed=5))), path)
    return onnx.load(path)


def _our_dropout(proto: onnx.ModelProto) -> onnx.NodeProto:
    return next(n for n in proto.graph.node if n.domain == "fusebridge")


@pytest.mark.parametrize(
    ("name", "value", "fragment"),
    [
        ("p", 1.5, "attribute p = 1.5: expected a probability in [0, 1]"),
        ("p", -3.0, "attribute p = -3.0: expected a probability in [0, 1]"),
        ("p", float("nan"), "attribute p = nan: expected a probability"),
        ("p", float("inf"), "attribute p = inf: expected a probability"),
        ("axes", [99], "attribute axes = (99,): axis 99 is out of range for the input's rank 2"),
        ("axes", [1, -1], "attribute axes = (1, -1): expected each axis once"),
        ("axes", [0, 0], "attribute axes = (0, 0): expected each axis once"),
        ("mode", "sometimes", "attribute mode = 'sometimes', expected one of"),
        ("is_test", 2, "attribute is_test = 2, expected one of [0, 1]"),
    ],
)
def test_our_dropout_attribute_values(tmp_path, name, value, fragment):
    proto = _ours(tmp_path)
    _set_attribute(_our_dropout(proto), name, value)
    _refused(
        _save(tmp_path, proto), fb.ModelFormatError, "fusebridge.Dropout node 'drop'", fragment
    )


def test_our_ops_attribute_types_and_unknown_ops(tmp_path):
    # Our schemas are in onnx's registry: the checker knows their attribute types.
    proto = _ours(tmp_path)
    _set_attribute(_our_dropout(proto), "p", 1)
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "type in 'drop : p'. Expected: 'FLOAT'")
    proto = _ours(tmp_path)
    _set_attribute(_our_dropout(proto), "axes", "ab")
    _refused(_save(tmp_path, proto), fb.ModelFormatError, "type in 'drop : axes'. Expected: 'INTS")
    proto = _ours(tmp_path)
    _our_dropout(proto).op_type = "Dropper"
    _refused(_save(tmp_path, proto), fb.UnsupportedOpError, "fusebridge.Dropper", "unknown op")


def test_our_schemas_check_values_from_every_frontend():
    x = ir.Value(name="x", shape=ir.Shape([4, 5]), type=ir.TensorType(ir.DataType.FLOAT))
    with pytest.raises(fb.ArgumentError, match=r"attribute p = 1\.5: expected a probability"):
        fb.ops.node("Dropout", [x], {"p": 1.5})
    with pytest.raises(fb.ArgumentError, match="axis 2 is out of range for the input's rank 2"):
        fb.ops.node("DropoutGrad", [x], {"axes": (2,)})
    with pytest.raises(fb.ArgumentError, match=r"attribute axis = -3: out of range"):
        fb.ops.node("SoftmaxDropout", [x, x], {"axis": -3})
    for axes in ("ab", 3):  # what onnx.checker refuses in a file, an in-memory node may hold
        with pytest.raises(fb.ArgumentError, match=f"axes = {axes!r}, expected a list of ints"):
            fb.ops.node("Dropout", [x], {"axes": axes})
    with pytest.raises(fb.ArgumentError, match="attribute p = 1, expected float"):
        fb.ops.node("Dropout", [x], {"p": 1})
    # A node made without fb.ops.node (onnx_ir directly) meets the same check in the Session.
    node = ir.node("Dropout", [x], {"axes": [0, 2], "is_test": 1}, domain="fusebridge")
    node.outputs[0].name, node.outputs[0].type = "y", x.type
    graph = ir.Graph([x], node.outputs, nodes=[node], opset_imports={"": 17, "fusebridge": 1})
    with pytest.raises(fb.ArgumentError, match=r"axes = \(0, 2\): axis 2 is out of range"):
        fb.Session(ir.Model(graph, ir_version=8))
    unknown_rank = ir.Value(name="u", type=ir.TensorType(ir.DataType.FLOAT))
    fb.ops.node("Dropout", [unknown_rank], {"axes": (99,)})  # the kernel checks it at run time
    fb.ops.node("Dropout", [x], {"p": 1.0, "axes": (-1,)})


# -- the passes on models built in memory ------------------------------------------------------
def _in_memory() -> ir.Model:
    return ir.from_proto(gru_model(projection="matmul_add"))


def _node(model: ir.Model, op_type: str) -> ir.Node:
    return next(n for n in model.graph if n.op_type == op_type)


@pytest.mark.parametrize(
    "run",
    [optimize, lambda m: optimize(m, "training"), explicit_rng, recompute_dropout_mask],
)
def test_passes_refuse_malformed_graphs(run):
    cyclic = _in_memory()
    _node(cyclic, "MatMul").replace_input_with(0, _node(cyclic, "GRU").outputs[0])
    cycle = r"cycle: 3 node\(s\) .*\(MatMul node '', Add node '', GRU node ''\)"
    with pytest.raises(fb.ModelFormatError, match=cycle):
        run(cyclic)
    dangling = _in_memory()
    dangling.graph.outputs.append(ir.Value(name="ghost"))
    with pytest.raises(fb.ModelFormatError, match="lists as output 'ghost', which no node"):
        run(dangling)
    undefined = _in_memory()
    _node(undefined, "MatMul").replace_input_with(0, ir.Value(name="nowhere"))
    with pytest.raises(fb.ModelFormatError, match=r"MatMul node '' reads 'nowhere', which no"):
        run(undefined)
    twice = _in_memory()
    _node(twice, "Add").outputs[0].name = "mm"
    with pytest.raises(fb.ModelFormatError, match="the name 'mm' is given to two values"):
        run(twice)
    negative = _in_memory()
    _node(negative, "Add").outputs[0].shape = ir.Shape([-1, 3])
    with pytest.raises(fb.ModelFormatError, match=r"shape \[-1, 3\], expected no negative"):
        run(negative)


def test_messages_name_the_file_once(tmp_path):
    proto = gru_model()
    _set_attribute(_gru(proto), "direction", "sideways")
    message = _refused(_save(tmp_path, proto), fb.ModelFormatError)
    assert len(re.findall(re.escape(str(tmp_path)), message)) == 1


def _our_gru_file(tmp_path: Path) -> onnx.ModelProto:
    path = tmp_path / "ours_gru.onnx"
    proto = gru_model(hidden=6)
    _gru(proto)
    fb.save_onnx(fb.load(_save(tmp_path, proto, "gru.onnx")), path)
    return onnx.load(path)


@pytest.mark.parametrize(
    ("suffix", "dims", "fragment"),
    [
        ("/wh", [108], "Wh [108], expected [1, hidden, 3 * hidden] with hidden >= 1"),
        ("/wh", [1, 18, 6], "Wh [1, 18, 6], expected [1, hidden, 3 * hidden]"),
        ("/wx", [90], "Wx [90], expected [1, input size >= 1, 18]"),
        ("/wx", [1, 18, 5], "Wx [1, 18, 5], expected [1, input size >= 1, 18]"),
        ("/bias", [2, 9], "B [2, 9], expected [1, 18]"),
    ],
)
def test_our_gru_weights_must_fit_each_other(tmp_path, suffix, dims, fragment):
    proto = _our_gru_file(tmp_path)
    next(t for t in proto.graph.initializer if t.name.endswith(suffix)).dims[:] = dims
    _refused(
        _save(tmp_path, proto), fb.ModelFormatError, "fusebridge.FusionGRU node 'the_gru'", fragment
    )


def test_our_gru_weights_may_leave_out_one_direction(tmp_path):
    proto = _our_gru_file(tmp_path)
    for tensor in proto.graph.initializer:
        if tensor.name.endswith(("/wh", "/wx", "/bias", "/bias_h")):
            tensor.dims[:] = tensor.dims[1:]  # [1, ...] -> [...], as the kernels take
    x = np.ones((3, 2, 5), np.float32)
    feeds = {"X": x, "seq_lens": np.array([3, 2], np.int32)}
    model = fb.load(_save(tmp_path, proto))
    got = fb.Session(model).run(feeds)["Y"]
    want = ort.InferenceSession(gru_model(hidden=6).SerializeToString()).run(None, feeds)[0]
    assert_within(got, want, output_bounds(model, feeds, (SESSION, ONNXRUNTIME))["Y"], "Y")


def test_portable_export_checks_gru_weights_of_models_built_in_memory(tmp_path):
    proto = gru_model(hidden=6)
    _gru(proto)
    model = fb.load(_save(tmp_path, proto))
    wh = next(v for v in model.graph.initializers.values() if v.name.endswith("/wh"))
    wh.const_value = ir.tensor(np.zeros((1, 6, 17), np.float32), name=wh.name)
    with pytest.raises(fb.ModelFormatError, match=r"FusionGRU node 'the_gru': Wh \[1, 6, 17\]"):
        fb.save_onnx(model, tmp_path / "portable.onnx", portable=True)


def test_save_refuses_a_model_too_large_for_one_file(tmp_path, monkeypatch):
    model = fb.load(_save(tmp_path, gru_model()))
    monkeypatch.setattr(onnx.checker, "MAXIMUM_PROTOBUF", 1000)  # not 2 GiB of test data
    with pytest.raises(fb.ArgumentError, match=r"save_onnx: the model takes \d+ bytes .* 1000"):
        fb.save_onnx(model, tmp_path / "big.onnx")
    assert not (tmp_path / "big.onnx").exists()


def test_save_names_an_invalid_model(tmp_path):
    model = fb.load(_save(tmp_path, gru_model()))
    next(n for n in model.graph if n.op_type == "Reshape").attributes["allowzero"] = ir.AttrString(
        "allowzero", "yes"
    )
    with pytest.raises(fb.ModelFormatError, match="save_onnx: the model is not valid ONNX"):
        fb.save_onnx(model, tmp_path / "bad.onnx")


def test_a_lod_gru_without_offsets_is_named(tmp_path):
    from fusebridge.models import assets

    path = tmp_path / "tagger.onnx"
    fb.save_onnx(fb.optimize(fb.load(assets.path("tagger")))[0], path)
    proto = onnx.load(path)
    gru = next(n for n in proto.graph.node if n.op_type == "FusionGRU")
    gru.input[1] = ""  # the offsets
    _refused(
        _save(tmp_path, proto),
        fb.ModelFormatError,
        f"fusebridge.FusionGRU node {gru.name!r}: layout lod needs the lengths input",
    )
