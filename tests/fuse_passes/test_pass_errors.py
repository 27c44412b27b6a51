"""A fusebridge error raised by a pass inside a pipeline reaches the caller naming the pipeline
and the pass: the same type, the message "pipeline 'NAME', pass PASS: <the pass's message>"
(once, where the pass's message already starts with its name), the pass as `pass_name`, the
pass's own error as __cause__. The pipeline's step loop does it, for every pass."""

from __future__ import annotations

import onnx
import onnx_ir as ir
import pytest
from helpers.onnx_models import gru_model
from helpers.session_models import training_step_model

import fusebridge as fb
from fusebridge.fuse_passes import FusePass, PassReport, Pipeline
from fusebridge.fuse_passes.portable import OnnxChecker
from fusebridge.models import assets


def _raised(pipeline: str | Pipeline, model: ir.Model) -> fb.Error:
    with pytest.raises(fb.Error) as info:
        if isinstance(pipeline, Pipeline):
            pipeline.apply(model)
        else:
            fb.optimize(model, pipeline)
    return info.value


def _training_dropout_model() -> ir.Model:
    """One training dropout of ours (a seed input): ONNX has no form for its bits."""
    x = ir.val("x", ir.DataType.FLOAT, ir.Shape(["a"]))
    seed = ir.val("seed", ir.DataType.INT64, ir.Shape([1]))
    node = fb.ops.node("Dropout", [x, seed], {"p": 0.3}, name="drop")
    node.outputs[0].name, node.outputs[0].dtype = "y", ir.DataType.FLOAT
    graph = ir.Graph([x, seed], node.outputs, nodes=[node], opset_imports={"": 17}, name="d")
    return ir.Model(graph, ir_version=10)


def test_a_real_pass_refusing_an_op_is_named():
    exc = _raised("lowering", _training_dropout_model())
    assert type(exc) is fb.UnsupportedOpError
    assert str(exc).startswith(
        "pipeline 'lowering', pass lower_to_standard: fusebridge.Dropout node 'drop': "
        "a training dropout"
    )
    assert (exc.pipeline, exc.pass_name) == ("lowering", "lower_to_standard")
    assert type(exc.__cause__) is fb.UnsupportedOpError
    assert str(exc) == f"pipeline 'lowering', pass lower_to_standard: {exc.__cause__}"


def test_a_real_pass_whose_message_names_it_says_its_name_once(tmp_path):
    """onnx_checker's messages start "onnx_checker: ": the named error says it once."""
    onnx.save(gru_model(), tmp_path / "gru.onnx")
    model = fb.load(tmp_path / "gru.onnx")
    reshape = next(n for n in model.graph if n.op_type == "Reshape")
    reshape.attributes["allowzero"] = ir.AttrString("allowzero", "yes")  # an INT attribute
    exc = _raised("lowering", model)
    assert type(exc) is fb.ModelFormatError
    assert str(exc).startswith(
        "pipeline 'lowering', pass onnx_checker: the model is not valid ONNX: "
        "Mismatched attribute type"
    )
    assert str(exc).count("onnx_checker") == 1
    assert exc.pass_name == OnnxChecker.name
    assert str(exc.__cause__).startswith("onnx_checker: the model is not valid ONNX")


def test_a_real_pass_refusing_an_argument_is_named():
    """explicit_rng refuses a model that already has its state values' names."""
    model = training_step_model()
    model.graph.inputs[0].name = "rng_seed"  # x
    exc = _raised("training", model)
    assert type(exc) is fb.ArgumentError
    assert str(exc).startswith(
        "pipeline 'training', pass explicit_rng: the model already has values named ['rng_seed']"
    )
    assert exc.pass_name == "explicit_rng"


class _Raises(FusePass):
    """A tiny pass that raises `error(message)`."""

    def __init__(self, name: str, error: type[Exception], message: str) -> None:
        self.name, self.error, self.message = name, error, message

    def run(self, model: ir.Model) -> PassReport:
        raise self.error(self.message)


class _Records(FusePass):
    """A tiny pass that adds its name to `ran`."""

    def __init__(self, name: str, ran: list[str]) -> None:
        self.name, self.ran = name, ran

    def run(self, model: ir.Model) -> PassReport:
        self.ran.append(self.name)
        return PassReport(self.name, False)


@pytest.mark.parametrize("error", [fb.ModelFormatError, fb.UnsupportedOpError, fb.ArgumentError])
def test_a_test_pass_raising_a_fusebridge_error_is_named(error):
    ran: list[str] = []
    failing = _Raises("tiny_pass", error, "node 'n' holds something odd")
    pipeline = Pipeline("tiny", [_Records("before", ran), failing, _Records("after", ran)])
    original = None
    try:
        pipeline.apply(fb.load(assets.path("tagger")))
    except fb.Error as exc:
        original = exc
    assert type(original) is error
    assert str(original) == "pipeline 'tiny', pass tiny_pass: node 'n' holds something odd"
    assert (original.pipeline, original.pass_name) == ("tiny", "tiny_pass")
    assert type(original.__cause__) is error
    assert str(original.__cause__) == "node 'n' holds something odd"
    assert ran == ["before"]  # the pipeline stopped at the failing pass


def test_a_message_that_starts_with_the_pass_name_says_it_once():
    failing = _Raises("tiny_pass", fb.ModelFormatError, "tiny_pass: value 'v' has no producer")
    exc = _raised(Pipeline("tiny", [failing]), fb.load(assets.path("tagger")))
    assert str(exc) == "pipeline 'tiny', pass tiny_pass: value 'v' has no producer"


def test_other_exceptions_pass_through_unchanged():
    """A bug in a pass (not a fusebridge error) is left as it was raised."""
    failing = _Raises("tiny_pass", KeyError, "a bug")
    with pytest.raises(KeyError) as info:
        Pipeline("tiny", [failing]).apply(fb.load(assets.path("tagger")))
    assert info.value.args == ("a bug",)
    assert not hasattr(info.value, "pass_name")
