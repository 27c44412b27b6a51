"""The committed ONNX fixtures (tests/fixtures/onnx, written by tests/helpers/torch_fixtures.py and
tests/helpers/paddle2onnx_fixtures.py) are valid models whose batch and sequence are free:
onnxruntime runs each at two sizes."""

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from helpers.error_bounds import ONNXRUNTIME
from helpers.graph_bounds import SESSION, check_outputs, output_bounds
from helpers.paddle2onnx_fixtures import BUILDERS
from helpers.torch_fixtures import FIXTURES, random_feeds

FIXTURE_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "onnx"
NAMES = sorted([*FIXTURES, *BUILDERS])


def sizes(batch: int, seq: int) -> dict[str, int]:
    # torch's dynamic_axes names; paddle2onnx numbers the free input dimensions in order, and
    # its models take [batch, seq, features].
    return {"batch": batch, "seq": seq, "DynamicDimension.0": batch, "DynamicDimension.1": seq}


def test_every_fixture_is_committed():
    assert sorted(p.stem for p in FIXTURE_DIR.glob("*.onnx")) == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_fixture_checks_and_runs_at_two_sizes(name):
    path = FIXTURE_DIR / f"{name}.onnx"
    assert path.stat().st_size < 200_000
    onnx.checker.check_model(onnx.load(str(path)), full_check=True)
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    # Neither size equals a fixed dimension of any fixture (1, 2, 4, 10, 12, 16, 32).
    for batch, seq in [(3, 5), (6, 9)]:
        outputs = session.run(None, random_feeds(session, sizes(batch, seq)))
        for out in outputs:
            assert batch in out.shape
            assert np.isfinite(out).all()
        assert seq in outputs[0].shape  # y, the per-step output, comes first in every fixture


# What fb.load + optimize make of each exported model: fused GRUs (and folded projections)
# that run equal to ONNX Runtime on the original file.
GRU_FIXTURES = {
    # name: (FusionGRU nodes, projection folds, MatMul nodes left)
    "torch_gru": (1, 0, 0),
    "torch_bigru_2layer": (2, 0, 0),
    "torch_linear_gru": (1, 1, 0),  # Add(bias, MatMul): the Add's inputs the other way round
    # paddle2onnx puts a Transpose (1, 0, 2) between the MatMul and the GRU: gru_input_layout
    # folds it into the GRU's layout, and then the projection folds too.
    "paddle2onnx_gru": (1, 1, 0),
    "torch_attention_eval": (0, 0, 6),
    "paddle2onnx_fc_dropout": (0, 0, 1),
}


@pytest.mark.parametrize("name", sorted(GRU_FIXTURES))
def test_imported_fixture_fuses_and_matches_onnxruntime(name):
    import fusebridge as fb

    path = str(FIXTURE_DIR / f"{name}.onnx")
    optimized, report = fb.optimize(fb.load(path))
    ops = [n.op_type for n in optimized.graph]
    grus, folds, matmuls = GRU_FIXTURES[name]
    assert ops.count("FusionGRU") == grus
    assert "GRU" not in ops
    assert report.fired("matmul_add_fusion_gru") + report.fired("matmul_fusion_gru") == folds
    assert ops.count("MatMul") == matmuls
    oracle = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    names = [o.name for o in oracle.get_outputs()]
    for batch, seq in [(3, 5), (1, 8)]:
        feeds = random_feeds(oracle, sizes(batch, seq))
        want = dict(zip(names, oracle.run(None, feeds)))
        bounds = output_bounds(optimized, feeds, (SESSION, ONNXRUNTIME))
        for backend in ("kernels", "reference"):
            ours = fb.Session(optimized, backend=backend).run(feeds)
            check_outputs(ours, want, bounds, f"{name} {backend} batch {batch} seq {seq}")


@pytest.mark.parametrize("name", ["torch_dropout_train", "torch_attention_train"])
def test_training_dropouts_import_next_to_their_producers(name):
    """MatMul -> Dropout and Softmax -> Dropout come in as our Dropout (is_test 0, no seed: the
    training-dropout passes fuse them and make the RNG explicit)."""
    import fusebridge as fb

    model = fb.load(str(FIXTURE_DIR / f"{name}.onnx"))
    dropouts = [n for n in model.graph if n.op_type == "Dropout"]
    assert dropouts and all(n.domain == fb.conventions.DOMAIN for n in dropouts)
    producers = set()
    for node in dropouts:
        attrs = fb.ops.schema("Dropout").attribute_values(node)
        assert (attrs["is_test"], len(node.inputs)) == (0, 1)
        source = node.inputs[0].producer()
        if source.op_type == "Add":  # a linear layer's bias
            source = next(v.producer() for v in source.inputs if v.producer() is not None)
        producers.add(source.op_type)
    assert producers == ({"MatMul"} if name == "torch_dropout_train" else {"Softmax", "MatMul"})
    with pytest.raises(fb.ArgumentError, match=f"Dropout node '{dropouts[0].name}': training"):
        fb.Session(model)
    assert dropouts[0].name.startswith("/")  # torch's own node name, kept
