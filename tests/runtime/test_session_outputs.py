"""Session.run hands the caller arrays of its own, as ONNX Runtime does: a later run never
writes into a result already returned, and no result shares memory with a feed, with what the
Session keeps between runs (initializers, reused kernel buffers) or with another result.

Every path that can hand out a buffer is run twice with different feeds of the same shapes
(so that a reused buffer fits): the first result must still equal a copy taken right after
the first run and the reference backend's answer; then the caller overwrites its results, and
the feeds and a third run must be unaffected."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from helpers.error_bounds import assert_within
from helpers.graph_bounds import SESSION, output_bounds
from helpers.paddle_oracle import paddle_or_skip
from helpers.session_models import info, make_model
from onnx import TensorProto, helper

import fusebridge as fb
from fusebridge.models import assets

T, N, H = 5, 3, 4  # GRU steps, sentences, hidden size (input size H too, so a GRU can loop)
GRU_WEIGHTS = {
    "wx": (1, H, 3 * H),
    "wh": (1, H, 3 * H),
    "b": (1, 3 * H),
}


def arrays(value: np.ndarray | fb.LoDTensor) -> list[np.ndarray]:
    return [value.data, value.offsets] if isinstance(value, fb.LoDTensor) else [value]


def copied(results: dict) -> dict:
    return {name: [a.copy() for a in arrays(value)] for name, value in results.items()}


def assert_equal(results: dict, want: dict, bounds: dict | None = None) -> None:
    """Equal bit for bit; or, where `bounds` (tests/helpers/graph_bounds.py) are given for
    results of another implementation, each output's data within its bound (offsets and integers
    equal)."""
    assert results.keys() == want.keys()
    for name, value in results.items():
        got = arrays(value)
        expected = want[name] if isinstance(want[name], list) else arrays(want[name])
        for k, (g, w) in enumerate(zip(got, expected, strict=True)):
            bound = None if bounds is None or k else bounds[name]  # k 1: a LoDTensor's offsets
            if bound is None:
                np.testing.assert_array_equal(g, w, err_msg=name)
            else:
                assert_within(g, w, bound, name)


def reference_run(model: ir.Model, feeds: dict) -> tuple[dict, dict | None]:
    """The reference backend's results (onnx.reference and our NumPy formulas) and the bounds
    they and a Session's results lie within (None where every output is integer: equal; the
    tagger's tags, whose CRF margins are too thin to certify, tests/helpers/graph_bounds.py)."""
    want = fb.Session(model, backend="reference").run(feeds)
    if all(arrays(value)[0].dtype.kind in "iub" for value in want.values()):
        return want, None
    return want, output_bounds(model, feeds, (SESSION, SESSION))


def check_results_are_the_callers(
    model: ir.Model, feeds_a: dict, feeds_b: dict, backend: str = "kernels"
) -> dict:
    """Returns copies of the first run's results (the results themselves are overwritten).
    With the kernels backend, under each placement: GRUs on our kernels (buffers reused between
    runs) and lowered into ONNX Runtime."""
    if backend == "kernels":
        for placement in ("onnxruntime", "kernels"):
            kept = check_session(fb.Session(model, placement=placement), model, feeds_a, feeds_b)
        return kept
    return check_session(fb.Session(model, backend=backend), model, feeds_a, feeds_b)


def check_session(session: fb.Session, model: ir.Model, feeds_a: dict, feeds_b: dict) -> dict:
    fed = copied(feeds_a)
    first = session.run(feeds_a)
    kept = copied(first)
    assert_equal(first, *reference_run(model, feeds_a))
    second = session.run(feeds_b)
    assert_equal(second, *reference_run(model, feeds_b))
    assert_equal(first, kept)  # the second run wrote nowhere the caller holds
    handed = [a for value in first.values() for a in arrays(value)]
    feed_arrays = [a for value in feeds_a.values() for a in arrays(value)]
    for i, a in enumerate(handed):
        assert not any(np.shares_memory(a, f) for f in feed_arrays)
        assert not any(np.shares_memory(a, b) for b in handed[i + 1 :])
    # The caller owns its results: writing into them changes neither its feeds nor the
    # Session's constants (a third run on the first feeds gives the first answer again).
    # A LoDTensor's offsets are read-only: the check made when it was built must stay true.
    for a in handed:
        if a.flags.writeable:
            a[...] = 7
    assert_equal(feeds_a, fed)
    assert_equal(session.run(feeds_a), kept)
    return kept


def tensor(name: str, array: np.ndarray) -> onnx.TensorProto:
    return onnx.numpy_helper.from_array(array, name)


def gru_weights(prefix: str = "") -> list[onnx.TensorProto]:
    rng = np.random.default_rng(len(prefix))
    return [
        tensor(prefix + n, (rng.standard_normal(s) * 0.4).astype(np.float32))
        for n, s in GRU_WEIGHTS.items()
    ]


def gru(x: str, y: str, prefix: str = "", layout: str = "tnc", lengths: str = "") -> list:
    """A FusionGRU of x into y with weights named prefix + wx/wh/b (initializers)."""
    names = [x, lengths, *(prefix + n for n in GRU_WEIGHTS)]
    return [helper.make_node("FusionGRU", names, [y], domain=fb.conventions.DOMAIN, layout=layout)]


def padded(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((T, N, H)).astype(np.float32)


# -- the Paddle tagger of the report ----------------------------------------------------------
@pytest.mark.paddle
def test_tagger_fetching_scale_of_its_bigru(tmp_path):
    """fetch scale(1.0) of the BiGRU output: after optimize the graph output is an Identity of
    the bidirectional FusionGRU's output."""
    paddle_or_skip()
    from fusebridge.models import paddle_models

    built = paddle_models.build_tagger(
        vocab_size=50, emb_size=8, hidden=8, num_layers=1, head="features"
    )
    paddle_models.save_model(built, tmp_path)
    optimized, _ = fb.optimize(fb.load(tmp_path))
    (out,) = [v for v in optimized.graph.outputs if not v.name.endswith(".offsets")]
    assert out.producer().op_type == "Identity"
    assert out.producer().inputs[0].producer().op_type == "FusionGRU"

    def feeds(seed: int, lengths: list[int]) -> dict:
        ids = np.random.default_rng(seed).integers(0, 50, (sum(lengths), 1))
        return {"words": fb.LoDTensor(ids, lengths=lengths)}

    check_results_are_the_callers(optimized, feeds(0, [4, 6]), feeds(1, [7, 3]))


def test_tagger_tags_and_offsets():
    """Our CRF kernel's output, and LoD offsets that are the feed's offsets passed on."""
    optimized, _ = fb.optimize(fb.load(assets.path("tagger")))

    def feeds(seed: int, lengths: list[int]) -> dict:
        ids = np.random.default_rng(seed).integers(0, 1000, (sum(lengths), 1))
        return {"words": fb.LoDTensor(ids, lengths=lengths)}

    check_results_are_the_callers(optimized, feeds(0, [4, 0, 9]), feeds(1, [10, 3, 0]))


# -- pass-through steps -----------------------------------------------------------------------
def two_grus() -> ir.Model:
    """y: a graph output that a second GRU also reads, and an Identity of it (the same array);
    the second GRU's output reaches the graph only through an Identity; relu: ONNX Runtime's."""
    nodes = [
        *gru("x", "y"),
        helper.make_node("Identity", ["y"], ["y_again"]),
        *gru("y", "z", prefix="second_"),
        helper.make_node("Identity", ["z"], ["z_out"]),
        helper.make_node("Relu", ["z"], ["relu"]),
    ]
    outputs = [info(n, shape=[T, N, H]) for n in ("y", "y_again", "z_out", "relu")]
    weights = gru_weights() + gru_weights("second_")
    return make_model(nodes, [info("x", shape=[T, N, H])], outputs, weights)


def test_gru_output_through_identity_and_read_again():
    check_results_are_the_callers(two_grus(), {"x": padded(0)}, {"x": padded(1)})


def test_results_the_run_allocated_are_not_copied(kernel_outputs):
    """A copy is made only where memory may be shared: the kernels' and ONNX Runtime's
    results reach the caller as they were made, and only the second name of one array is a
    copy."""
    out = fb.Session(two_grus(), placement="kernels").run({"x": padded(0)})
    assert out["y"] is kernel_outputs[0] and out["z_out"] is kernel_outputs[1]
    assert not np.shares_memory(out["y_again"], out["y"])
    assert type(out["relu"].base).__name__ == "PyCapsule"  # ONNX Runtime's own buffer


@pytest.mark.parametrize("backend", ["kernels", "reference"])
def test_feeds_and_constants_passed_through(backend):
    """Identity and inference Dropout (scale 1) of a feed and of an initializer, a graph input
    and an initializer that are graph outputs themselves; beside them fresh arrays from ONNX
    Runtime (Relu) and from our training dropout kernel."""
    dropout = dict(domain=fb.conventions.DOMAIN, p=0.3)
    nodes = [
        helper.make_node("Identity", ["x"], ["x_id"]),
        helper.make_node("Dropout", ["x"], ["x_test"], is_test=1, **dropout),
        helper.make_node("Identity", ["w"], ["w_id"]),
        helper.make_node("Dropout", ["w"], ["w_test"], is_test=1, **dropout),
        helper.make_node("Relu", ["x"], ["relu"]),
        helper.make_node("Dropout", ["x", "seed"], ["dropped"], **dropout),
    ]
    names = ("x", "x_id", "x_test", "w", "w_id", "w_test", "relu", "dropped")  # all [2, 3]
    initializers = [
        tensor("w", np.arange(6, dtype=np.float32).reshape(2, 3)),
        tensor("seed", np.array(11, np.int64)),
    ]
    model = make_model(
        nodes, [info("x", shape=[2, 3])], [info(n, shape=[2, 3]) for n in names], initializers
    )
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    check_results_are_the_callers(model, {"x": x}, {"x": x + 1}, backend)


def test_lod_outputs():
    """A LoD output whose data is a GRU's (through an Identity) and whose offsets are an
    initializer (Paddle's lod_reset with target_lod), and one that passes a LoD feed on."""
    nodes = [
        *gru("x", "h", layout="lod", lengths="x.offsets"),
        helper.make_node("Identity", ["h"], ["reset"]),
        helper.make_node("Identity", ["target_lod"], ["reset.offsets"]),
        helper.make_node("Dropout", ["x"], ["same"], domain=fb.conventions.DOMAIN, is_test=1),
        helper.make_node("Identity", ["x.offsets"], ["same.offsets"]),
    ]
    inputs = [info("x", shape=["words", H]), info("x.offsets", TensorProto.INT64, ["n1"])]
    outputs = [info(n, shape=["words", H]) for n in ("reset", "same")]
    outputs += [info(n + ".offsets", TensorProto.INT64, ["n1"]) for n in ("reset", "same")]
    lod = tensor("target_lod", np.array([0, 2, 9], np.int64))
    model = make_model(nodes, inputs, outputs, [*gru_weights(), lod])

    def feeds(seed: int, lengths: list[int]) -> dict:
        words = np.random.default_rng(seed).standard_normal((9, H)).astype(np.float32)
        return {"x": fb.LoDTensor(words, lengths=lengths)}

    first = check_results_are_the_callers(model, feeds(0, [3, 6]), feeds(1, [8, 1]))
    assert first["reset"][1].tolist() == [0, 2, 9]


# -- control flow: If branches and Loop bodies are programs of their own ----------------------
def test_if_outputs():
    """Branches that return a GRU's output through an Identity, a feed the If reads from the
    enclosing graph, and an initializer of the branch itself (as its output)."""
    then_branch = helper.make_graph(
        [*gru("x", "t_y"), helper.make_node("Identity", ["t_y"], ["t_a"])]
        + [helper.make_node("Identity", ["x"], ["t_b"])],
        "then",
        [],
        [info("t_a", shape=[T, N, H]), info("t_b", shape=[T, N, H])],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["e_a"])],
        "else",
        [],
        [info("e_a", shape=[T, N, H]), info("e_w", shape=[T, N, H])],
        initializer=[tensor("e_w", np.full((T, N, H), 3, np.float32))],
    )
    node = helper.make_node(
        "If", ["cond"], ["a", "b_"], then_branch=then_branch, else_branch=else_branch
    )
    inputs = [info("x", shape=[T, N, H]), info("cond", TensorProto.BOOL, [])]
    outputs = [info("a", shape=[T, N, H]), info("b_", shape=[T, N, H])]
    model = make_model([node], inputs, outputs, gru_weights())
    for cond in (np.array(True), np.array(False)):
        check_results_are_the_callers(
            model, {"x": padded(0), "cond": cond}, {"x": padded(1), "cond": cond}
        )


def loop_model(scan: bool) -> ir.Model:
    """Loop(trip) carrying s (from the feed x; s = Identity(GRU(s)) each iteration) and acc
    (an initializer, passed on unchanged), scanning s."""
    body_nodes = [
        *gru("s_in", "s_new"),
        helper.make_node("Identity", ["s_new"], ["s_out"]),
        helper.make_node("Identity", ["c_in"], ["c_out"]),
        helper.make_node("Identity", ["acc_in"], ["acc_out"]),
    ]
    body_outputs = [info("c_out", TensorProto.BOOL, []), info("s_out", shape=[T, N, H])]
    body_outputs.append(info("acc_out", shape=[2, 2]))
    if scan:
        body_nodes.append(helper.make_node("Identity", ["s_out"], ["scan"]))
        body_outputs.append(info("scan", shape=[T, N, H]))
    body = helper.make_graph(
        body_nodes,
        "body",
        [info("i", TensorProto.INT64, []), info("c_in", TensorProto.BOOL, [])]
        + [info("s_in", shape=[T, N, H]), info("acc_in", shape=[2, 2])],
        body_outputs,
    )
    outputs = ["s", "acc", *(["scans"] if scan else [])]
    node = helper.make_node("Loop", ["trip", "true", "x", "acc0"], outputs, body=body)
    acc0 = tensor("acc0", np.zeros((2, 2), np.float32))
    true = tensor("true", np.array(True))
    inputs = [info("x", shape=[T, N, H]), info("trip", TensorProto.INT64, [])]
    shapes = {"s": [T, N, H], "acc": [2, 2], "scans": [None, T, N, H]}
    return make_model(
        [node], inputs, [info(n, shape=shapes[n]) for n in outputs], [*gru_weights(), acc0, true]
    )


@pytest.mark.parametrize("trip, backend", [(0, "kernels"), (0, "reference"), (3, "kernels")])
def test_loop_outputs(trip, backend):
    """Zero trips hand back the Loop's own inputs (a feed, an initializer); three trips the
    last iteration's state, and scan outputs stacked from every iteration."""
    model = loop_model(scan=trip > 0)  # onnx.reference cannot stack zero iterations
    feeds_a = {"x": padded(0), "trip": np.array(trip, np.int64)}
    feeds_b = {"x": padded(1), "trip": np.array(trip, np.int64)}
    if trip == 0:
        check_results_are_the_callers(model, feeds_a, feeds_b, backend)
        return
    # onnx.reference's Loop joins scan outputs with np.vstack (the Session stacks them on a new
    # axis, as ONNX Runtime does): the oracle's scans are compared reshaped.
    session = fb.Session(model)
    first = session.run(feeds_a)
    kept = copied(first)
    want, bounds = reference_run(model, feeds_a)
    want["scans"] = want["scans"].reshape(trip, T, N, H)
    bounds["scans"] = np.reshape(bounds["scans"], (trip, T, N, H))
    assert_equal(first, want, bounds)
    # every iteration's state is its own array: the GRU kept no buffer between iterations
    assert not np.array_equal(first["scans"][0], first["scans"][1])
    session.run(feeds_b)
    assert_equal(first, kept)
    assert not np.shares_memory(first["s"], feeds_a["x"])
    first["acc"][...] = 7
    assert_equal(session.run(feeds_a), kept)
