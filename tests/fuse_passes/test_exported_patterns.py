"""The GRU rules fire on what the real exporters write (torch.onnx, legacy exporter, opsets 17
and 13): the batch_first Transposes and the import's/exporter's Reshape/Transpose round trips
fold into FusionGRU's layouts, the zero H0 built from ConstantOfShape -> Slice goes, and a
Linear before a batch_first GRU folds into it. Oracle: ONNX Runtime on the original file;
the portable export of the optimized model runs in plain ORT to the same outputs."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.error_bounds import ONNXRUNTIME
from helpers.graph_bounds import SESSION, check_outputs, output_bounds
from helpers.gru_pattern_exports import EXPORTS, PatternExport, export

import fusebridge as fb

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "onnx" / "exported_patterns"
SIZES = [{"batch": 3, "seq": 7}, {"batch": 1, "seq": 4}]


def ort_outputs(path, feeds) -> list[np.ndarray]:
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, feeds)


def feeds_for(path, sizes, seed=0) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    return {
        a.name: rng.standard_normal([sizes.get(d, d) for d in a.shape]).astype(np.float32)
        for a in session.get_inputs()
    }


def assert_matches_onnxruntime(path, optimized, tmp_path) -> None:
    """Session on the optimized model and plain ORT on its portable export, both against ORT on
    the original file, within both error bounds of the model (tests/helpers/graph_bounds.py)."""
    portable = tmp_path / "portable.onnx"
    fb.save_onnx(optimized, portable, portable=True)
    session = fb.Session(optimized)
    model = fb.load(path)
    names = [o.name for o in onnx.load(str(path)).graph.output]
    for sizes in SIZES:
        feeds = feeds_for(path, sizes)
        want = dict(zip(names, ort_outputs(path, feeds)))
        bounds = output_bounds(model, feeds, (SESSION, ONNXRUNTIME))
        ours = session.run(feeds)
        check_outputs({n: ours[n] for n in names}, want, bounds, f"{path.stem} {sizes}")
        plain = dict(zip(names, ort_outputs(portable, feeds)))
        check_outputs(plain, want, bounds, f"{path.stem} {sizes} portable")


def expected_ops(spec: PatternExport) -> Counter:
    """What is left: one FusionGRU per layer (the projection folded in), the Concat of the
    layers' final states, the Identity that names the output, and the residual Add with its
    unfolded Linear."""
    ops = Counter({"FusionGRU": spec.layers})
    if not spec.residual:
        ops["Identity"] = 1  # the last GRU's Y under the graph output's name
    if spec.layers > 1:
        ops["Concat"] = 1
    if spec.residual:
        ops.update({"MatMul": 1, "Add": 2})
    return ops


def expected_firings(spec: PatternExport) -> dict[str, int]:
    return {
        "zero_initial_state": spec.layers,
        # torch writes Squeeze for one direction; two cancel their Transposes first.
        "gru_output_squeeze": 0 if spec.bidirectional else spec.layers,
        "transpose_pairs": spec.layers if spec.bidirectional else 0,
        "gru_output_round_trip": spec.layers if spec.bidirectional else 0,
        # batch_first: the Transpose moves down the stack, one layer at a time
        "gru_input_layout": spec.layers if spec.batch_first else 0,
        "gru_layout_transposes": 1 if spec.batch_first else 0,
        "matmul_add_fusion_gru": int(spec.projection and not spec.residual),
    }


def check_export(path, spec: PatternExport, tmp_path) -> None:
    optimized, report = fb.optimize(fb.load(str(path)))
    for name, count in expected_firings(spec).items():
        assert report.fired(name) == count, (name, report.text())
    assert Counter(n.op_type for n in optimized.graph) == expected_ops(spec)
    layouts = {n.attributes["layout"].value for n in optimized.graph if n.op_type == "FusionGRU"}
    assert layouts == {"ntc" if spec.batch_first else "tnc"}
    assert_matches_onnxruntime(path, optimized, tmp_path)


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_committed_export_folds_and_matches_onnxruntime(name, tmp_path):
    check_export(FIXTURES / f"{name}.onnx", EXPORTS[name], tmp_path)


def test_every_export_is_committed():
    assert sorted(p.stem for p in FIXTURES.glob("*.onnx")) == sorted(EXPORTS)


@pytest.mark.parametrize("opset", [13, 17])
@pytest.mark.parametrize("batch_first", [True, False])
@pytest.mark.parametrize(
    ("layers", "bidirectional", "projection"),
    [(1, False, True), (2, False, False), (1, True, False), (2, True, True)],
)
def test_fresh_torch_export_folds_and_matches_onnxruntime(
    tmp_path, monkeypatch, opset, batch_first, layers, bidirectional, projection
):
    pytest.importorskip("torch")
    spec = PatternExport(projection, batch_first, layers, bidirectional, opset=opset)
    monkeypatch.setitem(EXPORTS, "fresh", spec)
    check_export(export("fresh", tmp_path), spec, tmp_path)


def test_linear_output_used_twice_is_a_near_miss_with_its_reason(tmp_path):
    """The residual Add reads the Linear's output too: the GRU is laid out again, but the
    projection stays (folding it would compute it twice), and the report says why."""
    optimized, report = fb.optimize(fb.load(str(FIXTURES / "torch_linear_gru_residual.onnx")))
    ((at, why),) = report.refusals("matmul_add_fusion_gru")
    gru = next(n for n in optimized.graph if n.op_type == "FusionGRU")
    assert at == gru.outputs[0].name
    assert why == (
        "the projection output (after the bias) '/fc/Add_output_0' has a second consumer "
        "(Add '/Add', FusionGRU '/gru/GRU')"
    )


def _with_h0_fill(path, tmp_path, fill: float) -> Path:
    """The file with its zero state's ConstantOfShape filled with `fill`."""
    model = onnx.load(str(path))
    (node,) = [n for n in model.graph.node if n.op_type == "ConstantOfShape"]
    node.attribute[0].t.CopyFrom(onnx.numpy_helper.from_array(np.array([fill], np.float32)))
    out = tmp_path / f"h0_{fill}.onnx"
    onnx.save(model, str(out))
    return out


def test_a_state_of_ones_is_refused_with_its_source(tmp_path):
    path = _with_h0_fill(FIXTURES / "torch_gru_2layer_batch_first_o13.onnx", tmp_path, 1.0)
    optimized, report = fb.optimize(fb.load(str(path)))
    assert report.fired("zero_initial_state") == 0
    reasons = [why for _, why in report.refusals("zero_initial_state")]
    assert len(reasons) == 2
    assert all(
        why.endswith(
            "is not all zeros: it comes from ConstantOfShape '/gru/ConstantOfShape' of 1.0"
        )
        for why in reasons
    ), reasons
    assert_matches_onnxruntime(path, optimized, tmp_path)


def test_a_zero_state_of_the_wrong_shape_is_refused():
    """A zero H0 whose known shape is not the GRU's state [D, N, OC] (here two directions for a
    one-direction GRU): dropping it would run a model that ORT refuses, so it stays."""
    model = fb.load(str(FIXTURES / "torch_linear_gru_batch_first.onnx"))
    gru = next(n for n in model.graph if n.op_type == "FusionGRU")
    gru.inputs[6].shape = ir.Shape([2, "batch", 8])
    _, report = fb.optimize(model)
    ((_, why),) = report.refusals("zero_initial_state")
    assert why == (
        "H0 is zeros (ConstantOfShape '/gru/ConstantOfShape' of 0.0), but H0 "
        "'/gru/ConstantOfShape_output_0' is [2, batch, 8], the GRU's state is "
        "[D, N, OC] = [1, batch, 8]"
    )
