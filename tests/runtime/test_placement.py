"""The Session's placement by cost (fusebridge/runtime/placement.py): decisions on constructed
shapes, outputs under every placement against ONNX Runtime on the original file, one program
build per placement, results never overwritten by a later run, and the explain text."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers.error_bounds import ONNXRUNTIME
from helpers.graph_bounds import SESSION, check_outputs, output_bounds
from onnx import TensorProto, helper

import fusebridge as fb
from fusebridge.runtime.placement import DEFAULT_DIM, explain_text

ONNX = Path(__file__).resolve().parents[1] / "fixtures" / "onnx"


def gru_file(tmp_path: Path, i: int = 64, h: int = 128, x_shape=("T", "N", 64)) -> Path:
    """An ONNX GRU with sequence_lens fed ('lens'), its Y read by a Relu (ONNX Runtime's)."""
    rng = np.random.default_rng(0)
    weights = [
        onnx.numpy_helper.from_array((rng.standard_normal(s) * 0.1).astype(np.float32), n)
        for n, s in (("W", (1, 3 * h, i)), ("R", (1, 3 * h, h)), ("B", (1, 6 * h)))
    ]
    nodes = [
        helper.make_node("GRU", ["x", "W", "R", "B", "lens"], ["y"], hidden_size=h),
        helper.make_node("Relu", ["y"], ["out"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape) if x_shape else None),
        helper.make_tensor_value_info("lens", TensorProto.INT32, ["N"]),
    ]
    out = [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, "gru", inputs, out, initializer=weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    path = tmp_path / "gru.onnx"
    onnx.save(model, path)
    return path


def gru_feeds(t: int, n: int, lengths=None, i: int = 64) -> dict:
    x = np.random.default_rng(t * 100 + n).standard_normal((t, n, i)).astype(np.float32)
    lens = np.full(n, t, np.int32) if lengths is None else np.array(lengths, np.int32)
    return {"x": x, "lens": lens}


def placed(session: fb.Session, feeds: dict) -> list[bool]:
    return [d.on_kernel for d in session.explain(feeds)]


def test_batch_one_streaming_stays_in_onnxruntime(tmp_path):
    session = fb.Session(gru_file(tmp_path))
    assert placed(session, gru_feeds(1, 1)) == [False]


def test_padded_batch_of_unequal_lengths_runs_on_our_kernel(tmp_path):
    session = fb.Session(gru_file(tmp_path))
    lengths = [40] + [4] * 15  # one long sentence: ORT computes 16 * 40 steps, ours 100
    assert placed(session, gru_feeds(40, 16, lengths)) == [True]
    session.run(gru_feeds(40, 16, lengths))
    assert [s.kind for s in session._program.steps].count("fusebridge") == 1


def test_unresolvable_dims_take_the_lengths_or_the_default(tmp_path, monkeypatch):
    """x of unknown shape behind a Relu: no symbol to read T and N from. The lengths fed give N
    (their count) and T (at least their maximum); without them each counts as DEFAULT_DIM (the
    decision then stays with ONNX Runtime, whatever the run's size)."""
    path = gru_file(tmp_path, x_shape=None)
    model = onnx.load(path)
    graph = model.graph
    graph.node.insert(0, helper.make_node("Relu", ["x_in"], ["x"]))
    graph.input[0].name = "x_in"
    onnx.save(model, path)
    session = fb.Session(path)
    shapes = session.placement.shapes({}, gru_feeds(30, 16))
    assert (shapes[0].steps, shapes[0].batch, shapes[0].resolved) == (30, 16, False)
    feeds = {"x_in": gru_feeds(30, 16)["x"], "lens": np.full(16, 30, "i4")}
    assert "T and N from the lengths fed" in session.explain(feeds)[0].text()
    # Without lengths (an empty lengths vector reads as none): both dims the default.
    shapes = session.placement.shapes({}, {"lens": np.zeros(0, "i4")})
    assert (shapes[0].steps, shapes[0].batch, shapes[0].resolved) == (
        DEFAULT_DIM,
        DEFAULT_DIM,
        False,
    )
    decision = session.placement.explain(shapes, session.placement.decide(shapes))
    assert "an unresolved dim counted as 1" in decision[0].text()
    assert decision[0].on_kernel is False


def test_lengths_that_do_not_fit_go_to_the_kernel_which_names_them(tmp_path):
    session = fb.Session(gru_file(tmp_path))
    with pytest.raises(fb.ArgumentError, match="seq_lens must not exceed the padded length 1"):
        session.run(gru_feeds(1, 1, [2]))


def test_every_placement_matches_onnxruntime_on_the_original_file(monkeypatch):
    path = ONNX / "torch_bigru_2layer.onnx"
    want_session = ort.InferenceSession(str(path))
    session = fb.Session(fb.optimize(fb.load(path))[0])
    feeds = {"x": np.random.default_rng(3).standard_normal((4, 9, 12)).astype(np.float32)}
    want = dict(zip(session.output_names, want_session.run(None, feeds)))
    bounds = output_bounds(fb.load(path), feeds, (SESSION, ONNXRUNTIME))
    placements = list(itertools.product([False, True], repeat=2))
    seen = []
    for chosen in placements:
        monkeypatch.setattr(session.placement, "decide", lambda shapes, c=chosen: c)
        session._placements.clear()
        session._quick.clear()  # an all-ORT program of this signature would take the quick path
        got = session.run(feeds)
        seen.append([s.kind for s in session._program.steps].count("fusebridge"))
        check_outputs(got, want, bounds, f"placement {chosen}")
    assert seen == [0, 1, 1, 2]


def test_all_in_onnxruntime_is_one_session_that_spins_as_plain_ort():
    session = fb.Session(ONNX / "torch_bigru_2layer.onnx", placement="onnxruntime")
    assert [s.kind for s in session._program.steps] == ["onnx"]


def test_programs_are_built_once_per_placement(tmp_path, monkeypatch):
    session = fb.Session(gru_file(tmp_path))
    assert session.builds == 1  # every GRU on our kernel: built with the Session
    calls = []
    decide = session.placement.decide
    monkeypatch.setattr(
        session.placement, "decide", lambda shapes: calls.append(1) or decide(shapes)
    )
    for _ in range(3):
        session.run(gru_feeds(1, 1))  # ONNX Runtime: one more program
        session.run(gru_feeds(40, 16, [40] + [4] * 15))  # our kernel: the first program
    assert session.builds == 2
    assert len(calls) == 2  # decided once per distinct shapes and lengths


def test_no_run_overwrites_an_earlier_result(tmp_path):
    session = fb.Session(gru_file(tmp_path))
    runs = [gru_feeds(1, 1), gru_feeds(40, 16, [40] + [4] * 15), gru_feeds(1, 1)]
    results = [session.run(f)["out"] for f in runs]
    kept = [r.copy() for r in results]
    for f in runs:  # again, both placements, same shapes: buffers would fit
        session.run({k: v + 1 if k == "x" else v for k, v in f.items()})
    for r, k in zip(results, kept):
        np.testing.assert_array_equal(r, k)
    assert not np.shares_memory(results[0], results[2])


def test_explain_text_names_each_node_where_and_why(tmp_path):
    session = fb.Session(gru_file(tmp_path))
    text = explain_text(session.explain(gru_feeds(40, 16, [40] + [4] * 15)))
    assert text.startswith("placement:\n  fusebridge.FusionGRU node ")
    assert ": kernel (T=40 N=16 filled 100/640 I=64 H=128 D=1; kernel " in text
    assert "its kernel estimate plus the cuts it makes is below ONNX Runtime's" in text
    forced = fb.Session(gru_file(tmp_path), placement="kernels").explain(gru_feeds(1, 1))
    assert "Session(placement='kernels') puts every candidate there" in forced[0].text()


def test_ops_without_a_cost_model_stay_on_our_kernels():
    from fusebridge.models import assets

    session = fb.Session(fb.optimize(fb.load(assets.path("tagger")))[0])
    ids = np.zeros((3, 1), np.int64)
    decisions = session.explain({"words": fb.LoDTensor(ids, lengths=[3])})
    assert decisions and all(d.on_kernel for d in decisions)
    assert "layout lod" in decisions[0].reason


def test_cli_run_explain(tmp_path, capsys):
    from fusebridge.cli import command as cli

    feeds = gru_feeds(1, 1)
    for name, a in feeds.items():
        np.save(tmp_path / f"{name}.npy", a)
    args = [f"--input={n}={tmp_path / n}.npy" for n in feeds]
    assert cli.main(["run", str(gru_file(tmp_path)), *args, "--explain"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("placement:\n  fusebridge.FusionGRU node ")
    assert ": ONNX Runtime (T=1 N=1 filled 1/1 " in out


def test_the_session_leaves_the_model_as_it_was():
    """Probing each GRU's standard form builds nodes that read the graph's values: they must
    not stay among those values' uses (a later save would see readers that are not there)."""
    model = fb.optimize(fb.load(ONNX / "torch_bigru_2layer.onnx"))[0]

    def uses() -> dict:
        return {v.name: len(v.uses()) for n in model.graph for v in n.inputs if v is not None}

    before = uses()
    fb.Session(model).run({"x": np.zeros((2, 3, 12), np.float32)})
    assert uses() == before


def test_a_seen_signature_of_one_onnx_runtime_session_takes_the_quick_path(tmp_path):
    """Batch-1 runs of the GRU stay in ONNX Runtime: the second run with the same feed
    signature goes straight to that session. Its feeds get run()'s checks all the same (a
    feed the quick path cannot take goes the long way, which converts it or names what is
    wrong), and its results are the caller's."""
    path = gru_file(tmp_path)
    session = fb.Session(path)
    want = ort.InferenceSession(str(path))
    feeds = gru_feeds(1, 1)
    first = session.run(feeds)
    assert len(session._quick) == 1  # learnt from the first run
    calls = []
    quick = session._run_quick
    session._run_quick = lambda f: calls.append(1) or quick(f)
    second = session.run(feeds)
    assert calls and quick(feeds) is not None
    for out in (first, second):
        # Batch 1 stays in ONNX Runtime: one session runs the file, the oracle's computation.
        np.testing.assert_array_equal(out["out"], want.run(None, feeds)[0])
    assert not np.shares_memory(first["out"], second["out"])
    # The same shape in other strides: the long way copies it, with the same result.
    strided = {**feeds, "x": np.zeros(feeds["x"].shape + (2,), np.float32)[..., 0]}
    strided["x"][...] = feeds["x"]
    assert not strided["x"].flags.c_contiguous
    np.testing.assert_array_equal(session.run(strided)["out"], second["out"])
    assert quick(strided) is None  # a copy made by run() is not a signature to learn
    # int64 lengths (declared int32): the long way casts them, with the same result.
    cast = session.run({**feeds, "lens": feeds["lens"].astype(np.int64)})
    np.testing.assert_array_equal(cast["out"], second["out"])
    with pytest.raises(fb.ArgumentError, match="'N'"):  # one size per symbol, as run() says
        session.run({"x": feeds["x"], "lens": np.ones(2, np.int32)})
    with pytest.raises(fb.ArgumentError, match="shaped"):
        session.run({"x": feeds["x"][0], "lens": feeds["lens"]})
    with pytest.raises(fb.ArgumentError, match="sequence lengths"):
        session.run({"x": feeds["x"], "lens": np.array([-1], np.int32)})
