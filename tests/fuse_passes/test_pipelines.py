"""The pass system: every pass is an onnx_ir pass whose result carries a PassReport; a pipeline
refuses a wrong order when it is built (naming both passes and the reason) and checks the graph
after each pass (naming the pass that broke it)."""

from __future__ import annotations

import re

import numpy as np
import onnx_ir as ir
import pytest
from helpers.session_models import training_step_model

import fusebridge as fb
from fusebridge.fuse_passes import (
    PIPELINES,
    ExplicitRng,
    FusePass,
    PassReport,
    Pipeline,
    RecomputeDropoutMask,
)
from fusebridge.fuse_passes.dropout import MatMulDropout
from fusebridge.fuse_passes.portable import LowerToStandard, ToPaddedRecurrences
from fusebridge.models import assets


@pytest.mark.parametrize(
    ("steps", "later", "earlier", "why"),
    [
        (
            [RecomputeDropoutMask(), ExplicitRng()],
            "recompute_dropout_mask",
            "explicit_rng",
            "a dropout without a seed input has no bits to recompute",
        ),
        (
            [MatMulDropout, ExplicitRng()],
            "matmul_dropout",
            "explicit_rng",
            "it numbers the streams in the order of the unfused dropouts",
        ),
        (
            [LowerToStandard(), ToPaddedRecurrences()],
            "lower_to_standard",
            "to_padded_recurrences",
            "a LoD GRU has no ONNX GRU form until it is padded",
        ),
    ],
)
def test_a_wrong_order_is_refused_when_built(steps, later, earlier, why):
    with pytest.raises(fb.ArgumentError) as info:
        Pipeline("bad", steps)
    message = str(info.value)
    assert message.startswith(f"pipeline 'bad': {later} must run after {earlier} ({why}")
    assert f"but the order is {[s if isinstance(s, str) else s.name for s in steps]}" in message


def test_a_pass_twice_is_refused():
    with pytest.raises(fb.ArgumentError, match=r"a pass appears twice in \['explicit_rng',"):
        Pipeline("twice", [ExplicitRng(), ExplicitRng()])


def test_every_pass_is_an_onnx_ir_pass_with_a_report():
    for pipeline in PIPELINES.values():
        for step in pipeline.passes:
            assert isinstance(step, ir.passes.InPlacePass), step
    model = fb.load(assets.path("tagger"))
    result = PIPELINES["inference"].passes[1](model)  # fc_gru, alone
    assert isinstance(result, ir.passes.PassResult) and result.model is model
    assert result.report == PassReport("fc_gru", True, 4)
    assert result.modified and sum(n.op_type == "FusionGRU" for n in model.graph) == 4


class _DropsAProducer(FusePass):
    """A broken pass: removes the first node whose output another node reads."""

    name = "drops_a_producer"

    def run(self, model: ir.Model) -> PassReport:
        node = next(n for n in model.graph if n.outputs[0].uses())
        model.graph.remove(node)
        return PassReport(self.name, True, 1)


def test_the_graph_is_checked_after_each_pass():
    model = fb.load(assets.path("tagger"))
    pipeline = Pipeline("broken", [ExplicitRng(), _DropsAProducer(), RecomputeDropoutMask()])
    with pytest.raises(
        fb.ModelFormatError, match=r"^pipeline 'broken', after drops_a_producer: "
    ) as info:
        pipeline.apply(model)
    assert (info.value.pipeline, info.value.pass_name) == ("broken", "drops_a_producer")


def test_a_pipeline_reports_every_pass_in_order():
    _, report = fb.optimize(fb.load(assets.path("tagger")), "portable")
    assert [r.name for r in report.passes] == [p.name for p in PIPELINES["portable"].passes]
    assert report.get("lower_to_standard").notes == (
        "CRFDecoding x1",
        "FusionGRU x2",
        "LoDToPadded x1",
        "PaddedToLoD x1",
    )
    assert report.get("onnx_checker").notes == ("valid ONNX",)
    assert re.search(r"^  onnx_checker +unchanged\n +valid ONNX$", report.text(), re.M)
    with pytest.raises(fb.ArgumentError, match="pipeline 'portable' has no pass 'fastest'"):
        report.get("fastest")


def test_the_training_pipeline_gives_streams_before_it_fuses():
    """fb.optimize(model, "training") is explicit_rng, the fusions, recompute_dropout_mask:
    a model without seeds comes out drawing from rng_seed/rng_offset."""
    model = training_step_model()
    trained, report = fb.optimize(model, "training")
    assert report.passes[0].name == "explicit_rng"
    assert report.get("explicit_rng").notes == ("Dropout 'drop' in main: offset rng_offset + 0",)
    assert [v.name for v in trained.graph.inputs] == ["x", "dy", "rng_seed", "rng_offset"]
    assert [v.name for v in model.graph.inputs] == ["x", "dy"]  # the input is left alone
    x = np.ones((5, 8), np.float32)
    out = fb.Session(trained).run({"x": x, "dy": np.ones((5, 6), np.float32)}, rng=fb.random.key(1))
    assert int(out["rng_offset_out"]) == 1
