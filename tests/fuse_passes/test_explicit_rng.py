"""explicit_rng on hand-built ONNX graphs: each executed dropout gets its own offset in the
documented order (checked through its output against kernels.dropout at that offset), the
state threads through If branches and Loop bodies, rng_offset_out counts the dropouts on the
path taken, and Session.run(rng=key) feeds it."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from helpers.session_models import info, make_model
from onnx import TensorProto, helper

import fusebridge as fb
from fusebridge import kernels, ops
from fusebridge import random as fbrandom
from fusebridge.fuse_passes import explicit_rng

P = 0.5
SHAPE = [4, 33]
F32 = TensorProto.FLOAT
X = np.random.default_rng(0).uniform(0.5, 1.5, SHAPE).astype(np.float32)
# A seed above 2^63 checks the uint64 -> int64 input pattern on the way in.
KEY = fbrandom.Key(2**64 - 12345, 7)


def drop(x: np.ndarray, offset: int, seed: int = KEY.seed) -> np.ndarray:
    return kernels.dropout(x, P, seed=seed, offset=offset)


def dropout(name: str, x: str, y: str, **attrs) -> onnx.NodeProto:
    attrs.setdefault("p", P)
    return helper.make_node("Dropout", [x], [y], name=name, domain="fusebridge", **attrs)


def run(model: ir.Model, backend: str, key: fbrandom.Key = KEY, **feeds) -> dict:
    return fb.Session(model, backend=backend).run({"x": X, **feeds}, rng=key)


def check_model(model: ir.Model) -> None:
    """The rewritten model is still valid ONNX (subgraph outputs, loop-carried values)."""
    onnx.checker.check_model(ir.to_proto(model), full_check=True)


# -- straight line ----------------------------------------------------------------------------
def straight_line() -> ir.Model:
    nodes = [
        dropout("d0", "x", "a"),
        dropout("test", "a", "t", is_test=1),  # draws nothing
        dropout("d1", "t", "b"),
        helper.make_node("Constant", [], ["s"], value=helper.make_tensor("s", 7, [1], [99])),
        helper.make_node("Dropout", ["x", "s"], ["own"], name="own", domain="fusebridge", p=P),
        dropout("d2", "x", "c"),
    ]
    outs = [info(n, shape=SHAPE) for n in ("a", "b", "own", "c")]
    return make_model(nodes, [info("x", shape=SHAPE)], outs)


def test_straight_line_structure_and_report():
    model = straight_line()
    report = explicit_rng(model)
    check_model(model)
    assert [s.node for s in report.streams] == ["d0", "d1", "d2"]
    assert [s.offset for s in report.streams] == [
        "rng_offset + 0",
        "rng_offset + 1",
        "rng_offset + 2",
    ]
    assert {s.graph for s in report.streams} == {"main"}
    assert report.seeded == ("own",)
    assert "3 dropout(s)" in str(report)
    g = model.graph
    assert [v.name for v in g.inputs] == ["x", "rng_seed", "rng_offset"]
    assert g.outputs[-1].name == "rng_offset_out"
    for v in (*g.inputs[1:], g.outputs[-1]):
        assert v.dtype == ir.DataType.INT64 and v.shape == ir.Shape([])
    # The pass is idempotent: nothing is left to thread.
    again = explicit_rng(model)
    assert again.count == 0 and len(model.graph.inputs) == 3


@pytest.mark.parametrize("backend", ["kernels", "reference"])
def test_straight_line_streams(backend):
    model = straight_line()
    explicit_rng(model)
    out = run(model, backend)
    base = KEY.offset
    a = drop(X, base)
    np.testing.assert_array_equal(out["a"], a)
    np.testing.assert_array_equal(out["b"], drop(a, base + 1))  # is_test in between: no stream
    np.testing.assert_array_equal(out["c"], drop(X, base + 2))
    np.testing.assert_array_equal(out["own"], drop(X, 0, seed=99))  # its own seed, offset 0
    assert out["rng_offset_out"] == base + 3
    assert out["rng_offset_out"].dtype == np.int64 and out["rng_offset_out"].shape == ()
    # Distinct offsets really give distinct masks here.
    masks = [out[n] == 0 for n in ("a", "c")] + [drop(X, base + 1) == 0]
    assert all((m != n).any() for i, m in enumerate(masks) for n in masks[i + 1 :])
    # Same key, same bits; another seed or offset, other bits.
    again = run(model, backend)
    for name in out:
        np.testing.assert_array_equal(again[name], out[name])
    assert (run(model, backend, fbrandom.Key(KEY.seed, base + 1))["a"] != out["a"]).any()
    assert (run(model, backend, fbrandom.Key(KEY.seed + 1, base))["a"] != out["a"]).any()


def test_offset_out_continues_the_stream():
    model = straight_line()
    explicit_rng(model)
    session = fb.Session(model)
    first = session.run({"x": X}, rng=KEY)
    nxt = fbrandom.Key(KEY.seed, first["rng_offset_out"])
    assert nxt == fbrandom.Key(KEY.seed, KEY.offset + 3)
    second = session.run({"x": X}, rng=nxt)
    np.testing.assert_array_equal(second["a"], drop(X, KEY.offset + 3))
    # Offsets are 64-bit patterns: the int64 Add wraps past 2^63 and 2^64 like the kernels.
    for offset in (2**63 - 2, 2**64 - 2):
        out = session.run({"x": X}, rng=fbrandom.Key(KEY.seed, offset))
        np.testing.assert_array_equal(out["c"], drop(X, (offset + 2) % 2**64))
        assert fbrandom.Key(0, out["rng_offset_out"]).offset == (offset + 3) % 2**64


# -- If ---------------------------------------------------------------------------------------
def branch(name: str, nodes, out: str) -> onnx.GraphProto:
    return helper.make_graph(nodes, name, [], [info(out, shape=SHAPE)])


def if_model(then_dropouts: int, else_dropouts: int) -> ir.Model:
    """w = d_pre(x); y = If(cond) with a chain of dropouts over x in each branch; z = d_post(x)."""

    def chain(prefix: str, k: int) -> list[onnx.NodeProto]:
        names = ["x"] + [f"{prefix}{i}" for i in range(k)]
        nodes = [dropout(f"{prefix}_d{i}", names[i], names[i + 1]) for i in range(k)]
        nodes.append(helper.make_node("Identity", [names[-1]], [f"{prefix}_out"]))
        return nodes

    nodes = [
        dropout("d_pre", "x", "w"),
        helper.make_node(
            "If",
            ["cond"],
            ["y"],
            name="branchy",
            then_branch=branch("then", chain("t", then_dropouts), "t_out"),
            else_branch=branch("else", chain("e", else_dropouts), "e_out"),
        ),
        dropout("d_post", "x", "z"),
    ]
    inputs = [info("x", shape=SHAPE), info("cond", TensorProto.BOOL, [])]
    return make_model(nodes, inputs, [info(n, shape=SHAPE) for n in ("w", "y", "z")])


def expected_chain(base: int, k: int) -> np.ndarray:
    y = X
    for i in range(k):
        y = drop(y, base + i)
    return y


@pytest.mark.parametrize("backend", ["kernels", "reference"])
@pytest.mark.parametrize("then_k, else_k", [(2, 0), (0, 1), (2, 1)])
@pytest.mark.parametrize("cond", [True, False])
def test_if_branches(then_k, else_k, cond, backend):
    model = if_model(then_k, else_k)
    report = explicit_rng(model)
    check_model(model)
    assert report.count == 2 + then_k + else_k
    paths = {s.node: s.graph for s in report.streams}
    assert paths["d_pre"] == paths["d_post"] == "main"
    if then_k:
        assert paths["t_d0"] == "main/If 'branchy'/then_branch"
    assert len(model.graph.node("branchy").outputs) == 2  # y and the advanced offset

    out = run(model, backend, cond=np.array(cond))
    base, taken = KEY.offset, then_k if cond else else_k
    np.testing.assert_array_equal(out["w"], drop(X, base))
    np.testing.assert_array_equal(out["y"], expected_chain(base + 1, taken))
    np.testing.assert_array_equal(out["z"], drop(X, base + 1 + taken))
    assert out["rng_offset_out"] == base + 2 + taken
    again = run(model, backend, cond=np.array(cond))
    for name in out:
        np.testing.assert_array_equal(again[name], out[name])


# -- Loop -------------------------------------------------------------------------------------
def loop_model(nested_if: bool, scan: bool = True) -> ir.Model:
    """d_pre(x); Loop(trip) carrying acc (and scanning e); d_post(x). The body draws
    d = drop(x); with nested_if, e = drop(d) on even iterations (an If), else e = d."""
    body_nodes = [dropout("body_d", "x", "d")]
    if nested_if:
        const = lambda name, v: helper.make_node(  # noqa: E731
            "Constant", [], [name], value=helper.make_tensor(name, TensorProto.INT64, [], [v])
        )
        body_nodes += [
            const("two", 2),
            const("zero", 0),
            helper.make_node("Mod", ["i", "two"], ["parity"]),
            helper.make_node("Equal", ["parity", "zero"], ["even"]),
            helper.make_node(
                "If",
                ["even"],
                ["e"],
                name="parity_if",
                then_branch=branch("then", [dropout("inner_d", "d", "inner")], "inner"),
                else_branch=branch("else", [helper.make_node("Identity", ["d"], ["d_id"])], "d_id"),
            ),
        ]
    else:
        body_nodes.append(helper.make_node("Identity", ["d"], ["e"]))
    body_nodes += [
        helper.make_node("Identity", ["c_in"], ["c_out"]),
        helper.make_node("Add", ["acc_in", "e"], ["acc_out"]),
    ]
    scans = ["scans"] if scan else []
    if scan:
        body_nodes.append(helper.make_node("Identity", ["e"], ["scan"]))
    body = helper.make_graph(
        body_nodes,
        "body",
        [
            info("i", TensorProto.INT64, []),
            info("c_in", TensorProto.BOOL, []),
            info("acc_in", shape=SHAPE),
        ],
        [info("c_out", TensorProto.BOOL, []), info("acc_out", shape=SHAPE)]
        + [info("scan", shape=SHAPE)] * scan,
    )
    nodes = [
        dropout("d_pre", "x", "w"),
        helper.make_node("Loop", ["trip", "true", "acc0"], ["acc", *scans], name="loop", body=body),
        dropout("d_post", "x", "z"),
    ]
    inits = [
        helper.make_tensor("true", TensorProto.BOOL, [], [True]),
        helper.make_tensor("acc0", F32, SHAPE, np.zeros(SHAPE, np.float32).ravel()),
    ]
    inputs = [info("x", shape=SHAPE), info("trip", TensorProto.INT64, [])]
    outputs = [
        info("w", shape=SHAPE),
        info("acc", shape=SHAPE),
        *[info("scans", shape=[None, *SHAPE])] * scan,
        info("z", shape=SHAPE),
    ]
    return make_model(nodes, inputs, outputs, inits)


def expected_loop(trip: int, nested_if: bool) -> tuple[dict[str, np.ndarray], int]:
    """Simulates the documented order: returns the outputs and the number of streams used."""
    o = KEY.offset
    w, o = drop(X, o), o + 1
    acc, scans = np.zeros(SHAPE, np.float32), []
    for i in range(trip):
        d, o = drop(X, o), o + 1
        e = d
        if nested_if and i % 2 == 0:
            e, o = drop(d, o), o + 1
        acc = acc + e
        scans.append(e)
    z, o = drop(X, o), o + 1
    return {"w": w, "acc": acc, "scans": np.stack(scans), "z": z}, o - KEY.offset


@pytest.mark.parametrize("backend", ["kernels", "reference"])
@pytest.mark.parametrize("nested_if", [False, True], ids=["flat", "nested_if"])
def test_loop(nested_if, backend):
    model = loop_model(nested_if)
    report = explicit_rng(model)
    check_model(model)
    where = {s.node: s.graph for s in report.streams}
    assert where["body_d"] == "main/Loop 'loop'/body"
    if nested_if:
        assert where["inner_d"] == "main/Loop 'loop'/body/If 'parity_if'/then_branch"
    loop = model.graph.node("loop")
    # One more carried value, placed before the scan outputs; the user's outputs keep names.
    assert [v.name for v in loop.outputs][::2] == ["acc", "scans"]
    assert len(loop.inputs) == 4

    out = run(model, backend, trip=np.array(3, np.int64))
    again = run(model, backend, trip=np.array(3, np.int64))
    for name in out:
        np.testing.assert_array_equal(again[name], out[name])
    want, used = expected_loop(3, nested_if)
    assert used == (2 + 3 + 2 if nested_if else 2 + 3)
    if backend == "reference":
        # onnx.reference's Loop joins scan outputs with np.vstack (ONNX Runtime and the
        # Session stack them on a new axis): (3 * 4, 33) here, the same elements in order.
        out["scans"] = out["scans"].reshape(want["scans"].shape)
    for name, value in want.items():
        np.testing.assert_array_equal(out[name], value, err_msg=name)
    assert out["rng_offset_out"] == KEY.offset + used


@pytest.mark.parametrize("backend", ["kernels", "reference"])
def test_loop_that_runs_zero_times_draws_nothing_inside(backend):
    # onnx.reference's Loop cannot np.vstack zero iterations: no scan output there.
    model = loop_model(nested_if=False, scan=backend == "kernels")
    explicit_rng(model)
    out = run(model, backend, trip=np.array(0, np.int64))
    np.testing.assert_array_equal(out["z"], drop(X, KEY.offset + 1))
    np.testing.assert_array_equal(out["acc"], np.zeros(SHAPE, np.float32))
    assert out["rng_offset_out"] == KEY.offset + 2
    if backend == "kernels":  # [0, 4, 33] from the scan output's declared shape
        assert out["scans"].shape == (0, *SHAPE) and out["scans"].dtype == np.float32


def test_onnx_control_flow_reading_our_ops_output_runs_in_onnxruntime():
    # An If of standard ops whose branches read w, which our Dropout makes: the ONNX Runtime
    # partition holding the If takes w as an input and runs after the Dropout.
    nodes = [
        dropout("d", "x", "w"),
        helper.make_node(
            "If",
            ["cond"],
            ["y"],
            name="plain_if",
            then_branch=branch("then", [helper.make_node("Neg", ["w"], ["n"])], "n"),
            else_branch=branch("else", [helper.make_node("Abs", ["w"], ["a"])], "a"),
        ),
    ]
    model = make_model(
        nodes,
        [info("x", shape=SHAPE), info("cond", TensorProto.BOOL, [])],
        [info("y", shape=SHAPE)],
    )
    explicit_rng(model)
    for cond, op in ((True, np.negative), (False, np.abs)):
        out = run(model, "kernels", cond=np.array(cond))
        np.testing.assert_array_equal(out["y"], op(drop(X, KEY.offset)))


# -- the threaded graph in ONNX Runtime ------------------------------------------------------
def offsets_made_visible(model: ir.Model) -> bytes:
    """The rewritten model with each Dropout(x, seed, offset) replaced by x + float(offset) (a
    seeded or is_test one by x), as a plain ONNX model: ONNX Runtime then checks the threaded
    If/Loop structure and shows which offset each dropout got."""

    def swap(graph: onnx.GraphProto) -> None:
        nodes = []
        for n in graph.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    swap(a.g)
            if n.domain != "fusebridge":
                nodes.append(n)
            elif len(n.input) > 2:
                as_float = n.output[0] + "_offset"
                nodes.append(helper.make_node("Cast", [n.input[2]], [as_float], to=F32))
                nodes.append(helper.make_node("Add", [n.input[0], as_float], [n.output[0]]))
            else:
                nodes.append(helper.make_node("Identity", [n.input[0]], [n.output[0]]))
        del graph.node[:]
        graph.node.extend(nodes)

    proto = ir.to_proto(model)
    swap(proto.graph)
    del proto.opset_import[:]
    proto.opset_import.append(helper.make_opsetid("", 17))
    return proto.SerializeToString()


@pytest.mark.parametrize("trip", [3, 0])
def test_threaded_loop_runs_in_onnxruntime(trip):
    import onnxruntime as ort

    model = loop_model(nested_if=True)
    explicit_rng(model)
    sess = ort.InferenceSession(offsets_made_visible(model), providers=["CPUExecutionProvider"])
    feeds = {"x": np.zeros(SHAPE, np.float32), "trip": np.array(trip, np.int64)}
    feeds |= {"rng_seed": np.array(1, np.int64), "rng_offset": np.array(100, np.int64)}
    w, acc, scans, z, after = sess.run(None, feeds)
    # d_pre 100; iteration 0: d 101, inner 102 on top; 1: d 103; 2: d 104, inner 105; d_post.
    per_iteration = [101 + 102, 103, 104 + 105][:trip]
    assert w[0, 0] == 100 and scans.shape == (trip, *SHAPE)
    assert scans[:, 0, 0].tolist() == per_iteration and acc[0, 0] == sum(per_iteration)
    assert z[0, 0] == 101 + (5 if trip else 0) and after == z[0, 0] + 1


@pytest.mark.parametrize("cond", [True, False])
def test_threaded_if_runs_in_onnxruntime(cond):
    import onnxruntime as ort

    model = if_model(2, 0)
    explicit_rng(model)
    sess = ort.InferenceSession(offsets_made_visible(model), providers=["CPUExecutionProvider"])
    feeds = {"x": np.zeros(SHAPE, np.float32), "cond": np.array(cond)}
    feeds |= {"rng_seed": np.array(1, np.int64), "rng_offset": np.array(100, np.int64)}
    w, y, z, after = sess.run(None, feeds)
    assert w[0, 0] == 100 and y[0, 0] == (101 + 102 if cond else 0)
    assert z[0, 0] == (103 if cond else 101) and after == z[0, 0] + 1


# -- refusals and Session.run(rng=) -----------------------------------------------------------
def test_scan_bodies_are_refused_before_anything_changes():
    body = helper.make_graph(
        [dropout("in_scan", "s_in", "s_out")],
        "body",
        [info("s_in", shape=SHAPE[1:])],
        [info("s_out", shape=SHAPE[1:])],
    )
    scan = helper.make_node("Scan", ["a"], ["ys"], name="scan", body=body, num_scan_inputs=1)
    nodes = [dropout("first", "x", "a"), scan]
    model = make_model(nodes, [info("x", shape=SHAPE)], [info("ys", shape=SHAPE)])
    before = ir.to_proto(model).SerializeToString()
    with pytest.raises(fb.ArgumentError, match=r"Scan 'scan'.*only If and Loop"):
        explicit_rng(model)
    assert ir.to_proto(model).SerializeToString() == before


def test_an_offset_without_a_seed_is_refused():
    nodes = [
        helper.make_node("Constant", [], ["o"], value=helper.make_tensor("o", 7, [], [3])),
        helper.make_node("Dropout", ["x", "", "o"], ["y"], name="odd", domain="fusebridge"),
    ]
    model = make_model(nodes, [info("x", shape=SHAPE)], [info("y", shape=SHAPE)])
    with pytest.raises(fb.ArgumentError, match=r"'odd'.*offset input but no seed"):
        explicit_rng(model)


@pytest.mark.skipif("MatMulDropout" not in ops.SCHEMAS, reason="no fused dropout schema")
def test_fused_dropouts_get_streams_in_their_own_slots():
    # Any fusebridge op whose schema has seed? and offset? draws: MatMulDropout's are 3 and 4.
    nodes = [
        dropout("d0", "x", "a"),
        helper.make_node("MatMulDropout", ["a", "w"], ["y"], name="mm", domain="fusebridge", p=P),
    ]
    w = helper.make_tensor("w", F32, [33, 8], np.ones(33 * 8, np.float32))
    model = make_model(nodes, [info("x", shape=SHAPE)], [info("y", shape=[4, 8])], [w])
    report = explicit_rng(model)
    assert [(s.op, s.offset) for s in report.streams] == [
        ("Dropout", "rng_offset + 0"),
        ("MatMulDropout", "rng_offset + 1"),
    ]
    mm = model.graph.node("mm")
    assert mm.inputs[2] is None and mm.inputs[3].name == "rng_seed"
    assert mm.inputs[4].producer().op_type == "Add"


def test_state_names_taken_already_are_refused():
    model = make_model(
        [dropout("d", "x", "rng_seed")], [info("x", shape=SHAPE)], [info("rng_seed", shape=SHAPE)]
    )
    with pytest.raises(fb.ArgumentError, match="rng_seed"):
        explicit_rng(model)


def test_session_rng_argument_errors():
    model = straight_line()
    explicit_rng(model)
    session = fb.Session(model)
    with pytest.raises(fb.ArgumentError, match=r"\['rng_seed', 'rng_offset'\].*rng="):
        session.run({"x": X})
    with pytest.raises(fb.ArgumentTypeError, match="Key"):
        session.run({"x": X}, rng=42)
    with pytest.raises(fb.ArgumentError, match="not both"):
        session.run({"x": X, "rng_seed": np.array(1), "rng_offset": np.array(0)}, rng=KEY)
    # Feeding the two inputs by hand still works, as int64 patterns.
    fed = session.run(
        {
            "x": X,
            "rng_seed": np.array(fbrandom.as_int64(KEY.seed)),
            "rng_offset": np.array(KEY.offset),
        }
    )
    np.testing.assert_array_equal(fed["c"], session.run({"x": X}, rng=KEY)["c"])

    plain = make_model(
        [dropout("d", "x", "y", is_test=1)], [info("x", shape=SHAPE)], [info("y", shape=SHAPE)]
    )
    assert explicit_rng(plain).count == 0
    with pytest.raises(fb.ArgumentError, match="no inputs"):
        fb.Session(plain).run({"x": X}, rng=KEY)
