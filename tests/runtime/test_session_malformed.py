"""Malformed input to a Session (issue 15): every bad feed, graph or argument is a typed
fusebridge error that names the feed, node or value, what it got and what was expected; errors
from inside a kernel or ONNX Runtime name the model's node and the feed behind it; no run writes
into a feed, read-only feeds included."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from helpers.session_models import info, make_model
from onnx import TensorProto, helper

import fusebridge as fb
from fusebridge.fuse_passes import explicit_rng
from fusebridge.models import assets, mxnet_models

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
H = 4


def gru_model(layout: str = "tnc", x_shape: list | None = None) -> ir.Model:
    """FusionGRU 'gru' of the feed x, its lengths the float feed `lengths` cast to int64 (as
    MXNet's converted RNN takes them)."""
    rng = np.random.default_rng(0)
    weights = [
        onnx.numpy_helper.from_array((rng.standard_normal(s) * 0.3).astype(np.float32), n)
        for n, s in (("wx", (1, H, 3 * H)), ("wh", (1, H, 3 * H)), ("b", (1, 3 * H)))
    ]
    nodes = [
        helper.make_node("Cast", ["lengths"], ["lens64"], name="cast", to=TensorProto.INT64),
        helper.make_node(
            "FusionGRU",
            ["x", "lens64", "wx", "wh", "b"],
            ["y"],
            name="gru",
            domain=fb.conventions.DOMAIN,
            layout=layout,
        ),
    ]
    inputs = [info("x", shape=x_shape), info("lengths", shape=["n"])]
    return make_model(nodes, inputs, [info("y")], weights, check=False)


def padded(t: int = 5, n: int = 3) -> np.ndarray:
    return np.random.default_rng(1).standard_normal((t, n, H)).astype(np.float32)


@pytest.fixture(scope="module")
def tagger() -> fb.Session:
    return fb.Session(fb.optimize(fb.load(assets.path("tagger")))[0])


def words(ids: np.ndarray, offsets: np.ndarray) -> fb.LoDTensor:
    """A LoDTensor whose offsets were changed after its own check: LoDTensor refuses that, but
    its slots can still be set underneath it, and the Session checks again."""
    t = object.__new__(fb.LoDTensor)
    object.__setattr__(t, "_data", ids)
    object.__setattr__(t, "_offsets", offsets)
    return t


# -- 1. errors from inside a run name the model's node and the feed -----------------------------
@pytest.mark.parametrize("backend", ["kernels", "reference"])
def test_kernel_error_names_the_node_and_the_feed(backend):
    session = fb.Session(gru_model(), backend=backend)
    with pytest.raises(fb.ArgumentError) as caught:
        session.run({"x": padded(t=5), "lengths": np.array([6, 2, 3], np.float32)})
    message = str(caught.value)
    assert "fusebridge.FusionGRU node 'gru'" in message
    assert "seq_lens must not exceed the padded length 5, got 6" in message  # the kernel's text
    if backend == "kernels":
        assert "lengths is input 'lengths' through Cast" in message
    assert isinstance(caught.value.__cause__, fb.ArgumentError)  # the kernel's own error


@pytest.mark.parametrize("bad", [np.nan, np.inf, 1e30, -1.0])
@pytest.mark.parametrize("backend", ["kernels", "reference"])
def test_float_lengths_that_cast_to_int64_min_are_refused_by_feed_name(bad, backend):
    """NaN, inf and 1e30 become INT64_MIN in ONNX's Cast: refused before the cast, naming the
    feed and the GRU node that takes it."""
    session = fb.Session(gru_model(), backend=backend)
    with pytest.raises(fb.ArgumentError) as caught:
        session.run({"x": padded(), "lengths": np.array([5, bad, 3], np.float32)})
    message = str(caught.value)
    assert message.startswith("Session.run: input 'lengths' holds the sequence lengths of ")
    assert "fusebridge.FusionGRU node 'gru' (cast to int64)" in message
    assert f"got {np.float32(bad)} at [1]" in message


def test_offsets_changed_after_the_lod_tensor_checked_them(tagger):
    ids = np.zeros((5, 1), np.int64)
    cases = [
        (np.array([0, 3, 1, 5]), "offsets must be nondecreasing, got 3 then 1 at index 1"),
        (np.array([0, 2, 9]), r"offsets must end at the number of rows \(5\), got 9"),
        (np.array([1, 5]), "offsets must start at 0, got 1"),
        (np.array([0.0, 5.0]), "offsets must be an integer array, got float64"),
    ]
    for offsets, text in cases:
        with pytest.raises((fb.ArgumentError, fb.ArgumentTypeError), match=text) as caught:
            tagger.run({"words": words(ids, offsets)})
        assert str(caught.value).startswith("Session.run: input 'words': ")


def test_onnxruntime_error_names_the_partition_and_node(tagger):
    ids = np.full((3, 1), 5000, np.int64)  # past the vocabulary: ONNX Runtime's Gather refuses
    with pytest.raises(fb.ExecutionError) as caught:
        tagger.run({"words": fb.LoDTensor(ids, lengths=[3])})
    message = str(caught.value)
    assert re.search(r"ONNX partition \[Squeeze, .*Gather\]", message)  # (Paddle's id check)
    assert "(it reads input(s) ['words'])" in message
    assert ", at Gather node " in message
    assert caught.value.__cause__ is not None


def test_kernel_inputs_from_feeds_are_named_by_the_schema():
    """PaddedToLoD's offsets and a dropout's seed, fed directly: the error names the node, the
    input by our schema's name and the feed (the offsets used to reach the kernel as lengths,
    whose error spoke of seq_lens; an empty seed was an IndexError)."""
    nodes = [
        helper.make_node(
            "PaddedToLoD",
            ["padded", "offsets"],
            ["words"],
            name="unpad",
            domain=fb.conventions.DOMAIN,
        )
    ]
    inputs = [info("padded", shape=[3, 2, H]), info("offsets", TensorProto.INT64, ["n1"])]
    unpad = fb.Session(make_model(nodes, inputs, [info("words")], check=False))
    feeds = {"padded": np.zeros((3, 2, H), np.float32), "offsets": np.array([0, 3, 1])}
    with pytest.raises(fb.ArgumentError) as caught:
        unpad.run(feeds)
    assert str(caught.value) == (
        "Session: fusebridge.PaddedToLoD node 'unpad' (Padded is input 'padded', offsets is "
        "input 'offsets'): "
        "padded_to_lod: offsets must be nondecreasing, got 3 then 1 at index 1"
    )
    nodes = [
        helper.make_node("Dropout", ["x", "seed"], ["y"], name="drop", domain=fb.conventions.DOMAIN)
    ]
    inputs = [info("x", shape=[2]), info("seed", TensorProto.INT64)]
    drop = fb.Session(make_model(nodes, inputs, [info("y")], check=False))
    with pytest.raises(fb.ArgumentError) as caught:
        drop.run({"x": np.ones(2, np.float32), "seed": np.zeros(0, np.int64)})
    assert str(caught.value) == (
        "Session: fusebridge.Dropout node 'drop' (X is input 'x', seed is input 'seed'): input "
        "seed must hold one integer, got shape (0,)"
    )


# -- 2. feeds are checked before anything runs ------------------------------------------------
class Anything:
    pass


@pytest.mark.parametrize(
    ("feeds", "error", "match"),
    [
        (
            {"words": fb.LoDTensor(np.zeros((302, 2), np.int64), lengths=[302])},
            fb.ArgumentError,
            r"input 'words' is shaped \[302, 2\] where \[\?, 1\] is declared",
        ),
        (
            {"words": fb.LoDTensor(np.zeros((3, 1, 1), np.int64), lengths=[3])},
            fb.ArgumentError,
            r"input 'words' is shaped \[3, 1, 1\] where \[\?, 1\] is declared",
        ),
        (
            {"words": words([[1], [2]], np.array([0, 2]))},
            fb.ArgumentTypeError,
            "input 'words' must be a numpy array, got list",
        ),
        (
            {"words": words(None, np.array([0]))},
            fb.ArgumentTypeError,
            "input 'words' must be a numpy array, got NoneType",
        ),
        (
            {"words": fb.LoDTensor(np.array([["a"]], object), lengths=[1])},
            fb.ArgumentTypeError,
            "input 'words' must be int64, got object",
        ),
        (
            {"words": fb.LoDTensor(np.array([["a"]]), lengths=[1])},
            fb.ArgumentTypeError,
            "input 'words' must be int64, got <U1",
        ),
        (
            {"words": fb.LoDTensor(np.full((1, 1), 2**63, np.uint64), lengths=[1])},
            fb.ArgumentError,
            r"input 'words' must be int64; its uint64 value 9223372036854775808 at \[0, 0\] "
            "does not fit",
        ),
        (
            {"words": np.zeros((3, 1), np.int64)},
            fb.ArgumentTypeError,
            r"input 'words' must be a LoDTensor\(data, lengths=...\), got ndarray",
        ),
        ({"words": None}, fb.ArgumentTypeError, "'words' must be a LoDTensor.*got NoneType"),
        ({1: np.zeros(1)}, fb.ArgumentTypeError, "feed names must be strings, got int 1"),
        ([np.zeros(1)], fb.ArgumentTypeError, "feeds must be a dict name -> array, got list"),
        (
            {"words.offsets": np.array([0, 1])},
            fb.ArgumentError,
            r"inputs are \['words'\]; missing \['words'\]; unknown \['words.offsets'\]",
        ),
    ],
)
def test_bad_feeds_name_the_input_the_got_and_the_expected(tagger, feeds, error, match):
    with pytest.raises(error, match=match):
        tagger.run(feeds)


@pytest.fixture(scope="module")
def torch_gru() -> fb.Session:
    """x [seq, batch, 12], h0 [1, batch, 16]: the symbol 'batch' declared in both."""
    return fb.Session(fb.optimize(fb.load(FIXTURES / "onnx" / "torch_gru.onnx"))[0])


def torch_gru_feeds(seq=3, batch=2, features=12, h0_batch=None, dtype=np.float32) -> dict:
    rng = np.random.default_rng(0)
    return {
        "x": rng.standard_normal((seq, batch, features)).astype(dtype),
        "h0": np.zeros((1, batch if h0_batch is None else h0_batch, 16), np.float32),
    }


@pytest.mark.parametrize(
    ("feeds", "error", "match"),
    [
        (
            torch_gru_feeds(features=11),
            fb.ArgumentError,
            r"input 'x' is shaped \[3, 2, 11\] where \[seq, batch, 12\] is declared",
        ),
        (
            torch_gru_feeds(h0_batch=3),
            fb.ArgumentError,
            "input 'h0' has 3 in dimension 1, but input 'x' has 2 in dimension 1, and the "
            "model declares both as 'batch'",
        ),
        (
            {**torch_gru_feeds(), "x": torch_gru_feeds()["x"].astype(np.float64) * 1e300},
            fb.ArgumentError,
            r"input 'x' must be float32; its float64 value .* at \[0, 0, 0\] does not fit "
            r"\(cast to inf\)",
        ),
        (
            {**torch_gru_feeds(), "x": np.full((3, 2, 12), 2**40 + 1, np.int64)},
            fb.ArgumentError,
            "input 'x' must be float32; its int64 value 1099511627777 at",
        ),
        (
            {**torch_gru_feeds(), "x": torch_gru_feeds()["x"].astype(np.complex64)},
            fb.ArgumentTypeError,
            "input 'x' must be float32, got complex64",
        ),
        (
            {**torch_gru_feeds(), "x": np.ma.masked_array(torch_gru_feeds()["x"])},
            fb.ArgumentTypeError,
            "input 'x' must be a numpy array, got MaskedArray",
        ),
        (
            {**torch_gru_feeds(), "x": fb.LoDTensor(np.zeros((3, 12), np.float32), lengths=[3])},
            fb.ArgumentTypeError,
            "input 'x' must be an array, not a LoDTensor, got LoDTensor",
        ),
        (
            {**torch_gru_feeds(), "h0": Anything()},
            fb.ArgumentTypeError,
            "input 'h0' must be a numpy array, got Anything",
        ),
    ],
)
def test_bad_dense_feeds(torch_gru, feeds, error, match):
    with pytest.raises(error, match=match):
        torch_gru.run(feeds)


def test_casts_that_keep_every_value_are_accepted(torch_gru):
    want = torch_gru.run(torch_gru_feeds())["y"]
    feeds = torch_gru_feeds()
    for x in (
        feeds["x"].astype(np.float64),
        feeds["x"].astype(">f4"),
        feeds["x"][:, ::-1][:, ::-1],
    ):
        np.testing.assert_array_equal(torch_gru.run({**feeds, "x": x})["y"], want)


def test_an_input_with_an_initializer_is_a_constant_not_a_feed():
    """ONNX lets an initializer give a graph input its value; our steps read the initializer,
    so feeding it is refused instead of silently ignored."""
    w = onnx.numpy_helper.from_array(np.ones(2, np.float32), "w")
    model = make_model(
        [helper.make_node("Neg", ["w"], ["y"])],
        [info("w", shape=[2])],
        [info("y")],
        [w],
        check=False,
    )
    session = fb.Session(model)
    assert session.input_names == []
    np.testing.assert_array_equal(session.run({})["y"], [-1, -1])
    with pytest.raises(fb.ArgumentError, match=r"\['w'\] are initializers of the model"):
        session.run({"w": np.full(2, 5, np.float32)})


# -- 3. odd graphs: typed errors at Session creation -------------------------------------------
def value(name: str, shape=(2,)) -> ir.Value:
    return ir.Value(name=name, type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape(shape))


def ir_model(inputs, outputs, nodes=(), initializers=()) -> ir.Model:
    graph = ir.Graph(
        inputs,
        outputs,
        nodes=list(nodes),
        initializers=list(initializers),
        opset_imports={"": 17, fb.conventions.DOMAIN: 1},
    )
    return ir.Model(graph, ir_version=10)


def op(op_type: str, inputs, output: str, **kwargs) -> ir.Node:
    node = ir.node(op_type, inputs, name=f"{output}_node", **kwargs)
    node.outputs[0].name = output
    node.outputs[0].type = ir.TensorType(ir.DataType.FLOAT)
    return node


def ghost_output() -> ir.Model:
    return ir_model([value("x")], [value("ghost")])


def unproduced_input() -> ir.Model:
    x = value("x")
    node = op("Add", [x, value("orphan")], "y")
    return ir_model([x], node.outputs, [node])


def unproduced_kernel_input() -> ir.Model:
    node = op(
        "Dropout", [value("orphan")], "y", domain=fb.conventions.DOMAIN, attributes={"is_test": 1}
    )
    return ir_model([value("x")], node.outputs, [node])


def cycle() -> ir.Model:
    x = value("x")
    a = op("Relu", [x], "a")
    b = op("Neg", [a.outputs[0]], "b")
    a.replace_input_with(0, b.outputs[0])
    return ir_model([x], b.outputs, [a, b])


def duplicate_names() -> ir.Model:
    x = value("x")
    a, b = op("Relu", [x], "y"), op("Neg", [x], "y")
    return ir_model([x], [a.outputs[0], b.outputs[0]], [a, b])


def output_named_like_an_input() -> ir.Model:
    x = value("x")
    node = op("Relu", [x], "x")
    return ir_model([x], node.outputs, [node])


def input_listed_twice() -> ir.Model:
    x = value("x")
    return ir_model([x, x], [x])


def no_outputs() -> ir.Model:
    return ir_model([], [])


def input_of_another_graph() -> ir.Model:
    x = value("x")
    node = op("Relu", [value("x")], "y")  # a second Value named x, not the graph's input
    return ir_model([x], node.outputs, [node])


def loop_body_reads_nothing() -> ir.Model:
    """A Loop whose body (holding our Dropout) reads a value defined nowhere."""
    body_in = [ir.Value(name="i", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([]))]
    body_in.append(ir.Value(name="c", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([])))
    dropout = op(
        "Dropout", [value("nowhere")], "d", domain=fb.conventions.DOMAIN, attributes={"is_test": 1}
    )
    body = ir.Graph(body_in, [body_in[1], dropout.outputs[0]], nodes=[dropout], name="body")
    trip = value("trip", ())
    trip.type = ir.TensorType(ir.DataType.INT64)
    loop = ir.node("Loop", [trip, None], attributes={"body": body}, num_outputs=1, name="loop")
    loop.outputs[0].name = "scan"
    return ir_model([trip], loop.outputs, [loop])


def loop_with_wrong_body_arity() -> ir.Model:
    """Loop(M, cond, v) whose body (with our Dropout) takes only (i, cond)."""
    body_in = [ir.Value(name="i", type=ir.TensorType(ir.DataType.INT64), shape=ir.Shape([]))]
    body_in.append(ir.Value(name="c", type=ir.TensorType(ir.DataType.BOOL), shape=ir.Shape([])))
    x = value("x")
    dropout = op("Dropout", [x], "d", domain=fb.conventions.DOMAIN, attributes={"is_test": 1})
    body = ir.Graph(body_in, [body_in[1], dropout.outputs[0]], nodes=[dropout], name="body")
    trip = value("trip", ())
    trip.type = ir.TensorType(ir.DataType.INT64)
    loop = ir.node("Loop", [trip, None, x], attributes={"body": body}, num_outputs=1, name="loop")
    loop.outputs[0].name = "v"
    return ir_model([trip, x], loop.outputs, [loop])


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (
            ghost_output,
            "the graph lists as output 'ghost', which no node produces and which is neither a "
            "graph input nor an initializer",
        ),
        (unproduced_input, "Add node 'y_node' reads 'orphan', which no node produces"),
        (
            unproduced_kernel_input,
            "fusebridge.Dropout node 'y_node' reads 'orphan', which no node produces",
        ),
        (
            cycle,
            r"the graph has a cycle: 2 node\(s\) wait on each other or on a cycle "
            r"\(Relu node 'a_node', Neg node 'b_node'\)",
        ),
        (
            duplicate_names,
            "the name 'y' is given to two values, output 'y' of Relu node 'y_node' and output "
            "'y' of Neg node 'y_node'",
        ),
        (
            output_named_like_an_input,
            "the name 'x' is given to two values, input 'x' and output 'x' of Relu node",
        ),
        (input_listed_twice, "input 'x' is listed twice"),
        (no_outputs, "the graph has no outputs"),
        (input_of_another_graph, "Relu node 'y_node' reads a value named 'x' that is not input"),
        (
            loop_body_reads_nothing,
            "in body of Loop node 'loop', fusebridge.Dropout node 'd_node' reads 'nowhere'",
        ),
    ],
)
@pytest.mark.parametrize("backend", ["kernels", "reference"])
def test_malformed_graphs_are_model_format_errors(build, match, backend):
    with pytest.raises(fb.ModelFormatError, match=match):
        fb.Session(build(), backend=backend)


def test_loop_body_arity_is_checked():
    with pytest.raises(fb.ModelFormatError, match="its body must take 2 \\+ N inputs, got 2"):
        fb.Session(loop_with_wrong_body_arity())


@pytest.mark.parametrize("backend", ["kernels", "reference"])
def test_outputs_that_are_an_input_or_an_initializer_run(backend):
    x, w = value("x"), value("w")
    w.const_value = ir.tensor(np.arange(2, dtype=np.float32), name="w")
    feed = np.array([3, 4], np.float32)
    out = fb.Session(ir_model([x], [x, w], initializers=[w]), backend=backend).run({"x": feed})
    np.testing.assert_array_equal(out["x"], feed)
    np.testing.assert_array_equal(out["w"], [0, 1])
    assert not np.shares_memory(out["x"], feed)


@pytest.mark.parametrize(
    ("model", "kwargs", "error", "match"),
    [
        (onnx.ModelProto(), {}, fb.ArgumentTypeError, r"got ModelProto \(onnx_ir.from_proto"),
        (3, {}, fb.ArgumentTypeError, "model must be an onnx_ir.Model or the path"),
        (None, {"backend": 1}, fb.ArgumentError, "backend must be 'kernels' or 'reference'"),
        (None, {"backend": ["kernels"]}, fb.ArgumentError, r"got \['kernels'\]"),
    ],
)
def test_bad_session_arguments(model, kwargs, error, match):
    model = gru_model() if model is None else model
    with pytest.raises(error, match=match):
        fb.Session(model, **kwargs)


def test_bad_run_arguments():
    session = fb.Session(gru_model())
    feeds = {"x": padded(), "lengths": np.array([5, 2, 3], np.float32)}
    with pytest.raises(fb.ArgumentTypeError, match="profile must be a dict"):
        session.run(feeds, profile=[])


# -- 4. no run writes into a feed; read-only feeds run everywhere ------------------------------
def read_only(a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    a.flags.writeable = False
    return a


def frozen_lod(ids: np.ndarray, lengths: list[int]) -> fb.LoDTensor:
    t = fb.LoDTensor(read_only(ids), lengths=lengths)
    t.offsets.flags.writeable = False
    return t


def dense_feeds(model: ir.Model, size: int = 3) -> dict[str, np.ndarray]:
    """Normal float inputs, every free dimension `size`."""
    rng = np.random.default_rng(0)
    return {
        v.name: read_only(
            rng.standard_normal([d if isinstance(d, int) else size for d in v.shape]).astype(
                v.dtype.numpy()
            )
        )
        for v in model.graph.inputs
    }


def bundled_models():
    """(label, model, feeds, rng) for every bundled model: the Paddle assets, the ONNX and the
    MXNet fixtures, each as loaded and as optimized (training graphs with explicit RNG)."""
    for name in ("tagger", "sentiment"):
        path = assets.path(name)
        ids = np.load(path / "example_words.npy")
        lengths = [int(n) for n in (path / "example_lengths.txt").read_text().split()]
        yield name, lambda path=path: fb.load(path), {"words": frozen_lod(ids, lengths)}, None
    for path in sorted((FIXTURES / "onnx").glob("*.onnx")):
        yield path.stem, lambda path=path: fb.load(path), None, "train" in path.stem or None
    for path in sorted((FIXTURES / "mxnet").glob("*-symbol.json")):
        name = path.name.removesuffix("-symbol.json")
        feeds = dict(
            zip(
                ["data0", "data1"] if name == "gru_tagger" else ["data"],
                map(read_only, mxnet_models.sample_inputs(name)),
            )
        )
        yield name, lambda path=path: fb.load(path), feeds, None


BUNDLED = list(bundled_models())


def snapshot(feeds: dict) -> list[np.ndarray]:
    arrays = []
    for v in feeds.values():
        arrays += [v.data, v.offsets] if isinstance(v, fb.LoDTensor) else [v]
    return arrays


@pytest.mark.parametrize(
    ("label", "load", "feeds", "training"), BUNDLED, ids=[b[0] for b in BUNDLED]
)
def test_read_only_feeds_run_and_are_never_written(label, load, feeds, training):
    model = load()
    feeds = dense_feeds(model) if feeds is None else feeds
    if training:
        explicit_rng(model)
        variants = [model, fb.optimize(model, "training")[0]]
    else:
        variants = [model, fb.optimize(model)[0]]
    arrays = snapshot(feeds)
    before = [a.copy() for a in arrays]
    assert not any(a.flags.writeable for a in arrays)
    rng = fb.random.key(0) if training else None
    results = []
    for variant in variants:
        out = fb.Session(variant).run(feeds, rng=rng)
        results.append(out)
        for name, result in out.items():
            # A LoDTensor's offsets are immutable (read-only, possibly the feed's own); its
            # data, like every plain result, is the caller's to write.
            data = result.data if isinstance(result, fb.LoDTensor) else result
            assert data.flags.writeable, f"{label}: result {name} is read-only"
            assert not any(np.shares_memory(data, f) for f in arrays), name
    for a, b in zip(arrays, before):
        np.testing.assert_array_equal(a, b)
    # Each result equals, bit for bit, a fresh Session's on writable copies of the feeds.
    writable = {
        n: fb.LoDTensor(np.array(v.data), offsets=np.array(v.offsets))
        if isinstance(v, fb.LoDTensor)
        else np.array(v)
        for n, v in feeds.items()
    }
    for variant, out in zip(variants, results, strict=True):
        want = fb.Session(variant).run(writable, rng=rng)
        assert out.keys() == want.keys()
        for name in out:
            for g, w in zip(snapshot({name: out[name]}), snapshot({name: want[name]}), strict=True):
                np.testing.assert_array_equal(g, w, err_msg=f"{label} {name}")


def test_graph_input_of_undefined_element_type_is_a_model_format_error():
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.UNDEFINED), shape=ir.Shape([2]))
    y = ir.node("Identity", [x]).outputs[0]
    y.name = "y"
    graph = ir.Graph([x], [y], nodes=[y.producer()], opset_imports={"": 17})
    with pytest.raises(fb.ModelFormatError, match="graph input 'x' has element type UNDEFINED"):
        fb.Session(ir.Model(graph, ir_version=10))


def test_string_inputs_take_strings_and_refuse_numbers():
    """An ONNX string input takes numpy strings or objects (what ONNX Runtime takes) as they
    are, and a numeric array is refused by name."""
    model = make_model(
        [helper.make_node("Identity", ["s"], ["t"])],
        [info("s", TensorProto.STRING, [2])],
        [info("t", TensorProto.STRING, [2])],
    )
    session = fb.Session(model)
    for words in (np.array(["a", "bc"], dtype=object), np.array(["a", "bc"])):
        assert session.run({"s": words})["t"].tolist() == ["a", "bc"]
    with pytest.raises(fb.ArgumentTypeError, match=r"input 's' must be strings, got float64"):
        session.run({"s": np.zeros(2)})
