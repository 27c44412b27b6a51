"""Session: partitioning, zero-copy hand-over between ONNX Runtime and the kernels, feeds and
their errors, the reference backend as the oracle."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
import pytest

import fusebridge as fb
from fusebridge import ops
from fusebridge.models import assets


@pytest.fixture(scope="module")
def tagger():
    model = fb.load(assets.path("tagger"))
    optimized, _ = fb.optimize(model)
    return model, optimized


def tagger_feeds(lengths=(4, 0, 9, 1), seed=0):
    ids = np.random.default_rng(seed).integers(0, 1000, (sum(lengths), 1))
    return {"words": fb.LoDTensor(ids, lengths=list(lengths))}


def test_partitions_are_built_once_and_reused(tagger, monkeypatch):
    _, optimized = tagger
    session = fb.Session(optimized)
    kinds = [s.kind for s in session._program.steps]
    # Squeeze+Gather, two bidirectional GRUs, MatMul+Add, CRF, and the offsets output alias.
    assert sorted(kinds) == sorted(
        ["onnx", "fusebridge", "fusebridge", "onnx", "fusebridge", "alias"]
    )
    import onnxruntime

    def no_new_sessions(*args, **kwargs):
        raise AssertionError("an ONNX Runtime session was built during run")

    monkeypatch.setattr(onnxruntime, "InferenceSession", no_new_sessions)
    for lengths in ((3, 5), (7,), (1, 2, 3, 4)):
        out = session.run(tagger_feeds(lengths))["crf_decoding_0.tmp_0"]
        assert out.lengths.tolist() == list(lengths)


def test_an_identity_of_an_onnx_output_joins_its_partition():
    """Identity of an ONNX node's output (torch's Y_h outputs, paddle2onnx's chains) runs in
    that node's partition: as an alias step of its own it would cut it in two. Of a feed it
    stays an alias (no copy), and its output is still the caller's own array."""
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT), shape=ir.Shape([2, 3]))
    relu = ir.node("Relu", [x], outputs=[ir.Value(name="r")])
    same = ir.node("Identity", [relu.outputs[0]], outputs=[ir.Value(name="same")])
    again = ir.node("Identity", [same.outputs[0]], outputs=[ir.Value(name="again")])
    neg = ir.node("Neg", [again.outputs[0]], outputs=[ir.Value(name="neg")])
    fed = ir.node("Identity", [x], outputs=[ir.Value(name="fed")])
    graph = ir.Graph(
        [x],
        [neg.outputs[0], same.outputs[0], fed.outputs[0]],
        nodes=[relu, same, again, neg, fed],
        opset_imports={"": 17},
    )
    session = fb.Session(ir.Model(graph, ir_version=10))
    assert sorted(s.kind for s in session._program.steps) == ["alias", "onnx"]
    feeds = {"x": np.array([[-1, 2, -3], [4, -5, 6]], np.float32)}
    out = session.run(feeds)
    np.testing.assert_array_equal(out["neg"], -np.maximum(feeds["x"], 0))
    np.testing.assert_array_equal(out["same"], np.maximum(feeds["x"], 0))
    np.testing.assert_array_equal(out["fed"], feeds["x"])
    assert not np.shares_memory(out["fed"], feeds["x"])


def test_arrays_cross_between_onnxruntime_and_kernels_without_copies(tagger, monkeypatch):
    _, optimized = tagger
    received, returned = [], []
    prepare = ops.prepare

    def spy(node, constants, reuse_output):
        run = prepare(node, constants, reuse_output)

        def run_and_record(inputs):
            received.append((node.op_type, inputs[0]))
            outs = run(inputs)
            returned.append((node.op_type, outs[0]))
            return outs

        return run_and_record

    monkeypatch.setattr("fusebridge.ops.prepare", spy)
    session = fb.Session(optimized)
    session.run(tagger_feeds())
    (first_gru_in, second_gru_in, crf_in) = [x for _, x in received]
    (first_gru_out, _, _) = [y for _, y in returned]
    # GRU 1's output is GRU 2's input as it is; the embedding lookup (ORT) and the emission
    # projection (ORT) reach the kernels in ORT's own buffers (owned by an ORT capsule).
    assert second_gru_in is first_gru_out
    for x in (first_gru_in, crf_in):
        assert not x.flags.owndata and type(x.base).__name__ == "PyCapsule"


def test_kernels_and_reference_backends_agree(tagger):
    model, optimized = tagger
    feeds = tagger_feeds((6, 2, 11))
    want = fb.Session(model, backend="reference").run(feeds)["crf_decoding_0.tmp_0"]
    for m in (model, optimized):
        got = fb.Session(m).run(feeds)["crf_decoding_0.tmp_0"]
        np.testing.assert_array_equal(got.data, want.data)
        np.testing.assert_array_equal(got.offsets, want.offsets)


def test_profile_names_every_step(tagger):
    _, optimized = tagger
    session = fb.Session(optimized)
    profile = {}
    session.run(tagger_feeds(), profile=profile)
    assert len(profile) == len(session._program.steps) and all(t >= 0 for t in profile.values())


@pytest.mark.parametrize(
    ("feeds", "error", "match"),
    [
        ({}, fb.ArgumentError, r"inputs are \['words'\]; missing \['words'\]"),
        ({"words": np.zeros((3, 1), np.int64)}, fb.ArgumentTypeError, "must be a LoDTensor"),
        (
            {"words": fb.LoDTensor(np.zeros((3, 1), np.float32), lengths=[3])},
            fb.ArgumentTypeError,
            "must be int64, got float32",
        ),
        (
            {"words": fb.LoDTensor(np.zeros(3, np.int64), lengths=[3])},
            fb.ArgumentError,
            r"input 'words' is shaped \[3\] where \[\?, 1\] is declared",
        ),
        ({"words": tagger_feeds()["words"], "x": 1}, fb.ArgumentError, r"unknown \['x'\]"),
        (
            {"words": fb.LoDTensor(np.full((3, 1), 5000, np.int64), lengths=[3])},
            fb.ExecutionError,
            "ONNX partition",
        ),
    ],
)
def test_bad_feeds_are_typed_errors(tagger, feeds, error, match):
    _, optimized = tagger
    with pytest.raises(error, match=match):
        fb.Session(optimized).run(feeds)


def test_lod_tensor_checks_its_offsets():
    x = np.zeros((5, 2))
    assert fb.LoDTensor(x, lengths=[2, 0, 3]).offsets.tolist() == [0, 2, 2, 5]
    assert fb.LoDTensor(x, offsets=[0, 5]).lengths.tolist() == [5]
    with pytest.raises(fb.ArgumentError, match="must end at the number of rows"):
        fb.LoDTensor(x, lengths=[2, 2])
    with pytest.raises(fb.ArgumentError, match="exactly one"):
        fb.LoDTensor(x, lengths=[5], offsets=[0, 5])
    with pytest.raises(fb.ArgumentError, match="non-negative"):
        fb.LoDTensor(x, lengths=[6, -1])


def test_unknown_domain_is_refused():
    x = ir.Value(name="x", type=ir.TensorType(ir.DataType.FLOAT))
    node = ir.node("Foo", [x], domain="com.example")
    graph = ir.Graph([x], node.outputs, nodes=[node], opset_imports={"": 17, "com.example": 1})
    with pytest.raises(fb.ArgumentError, match=r"domain 'com\.example'"):
        fb.Session(ir.Model(graph, ir_version=10))


def test_intermediate_buffers_are_reused_across_runs_without_mixing_batches(tagger, kernel_outputs):
    """A GRU output that is not a graph output is written into the previous run's buffer when
    the shape allows: batches of the same word count but other sentences must still be right."""
    model, optimized = tagger
    session = fb.Session(optimized)
    reference = fb.Session(model, backend="reference")
    for lengths in ((6, 4), (3, 7), (10,), (6, 4)):
        feeds = tagger_feeds(lengths, seed=sum(lengths[:1]))
        got = session.run(feeds)["crf_decoding_0.tmp_0"]
        want = reference.run(feeds)["crf_decoding_0.tmp_0"]
        np.testing.assert_array_equal(got.data, want.data)
    first_gru = kernel_outputs[0::3]
    assert all(np.shares_memory(first_gru[0], y) for y in first_gru[1:])


def test_rng_key_is_refused_by_a_model_without_random_state(tagger):
    # rng= feeds rng_seed/rng_offset, which only explicit_rng adds
    # (tests/fuse_passes/test_explicit_rng.py runs models that have them).
    from fusebridge import random as fbrandom

    session = fb.Session(tagger[1])
    with pytest.raises(fb.ArgumentError, match="rng_seed"):
        session.run(tagger_feeds(), rng=fbrandom.key(0))
    with pytest.raises(fb.ArgumentTypeError, match="Key"):
        session.run(tagger_feeds(), rng=0)
    session.run(tagger_feeds(), rng=None)
