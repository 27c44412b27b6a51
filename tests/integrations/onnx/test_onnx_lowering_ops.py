"""CRFDecoding and SequencePool written in standard ONNX (integrations/onnx/viterbi.py and
pooling.py): each lowered into a one-op model that must pass onnx.checker's full check and run
alike in onnxruntime and in onnx.reference, against the float64 oracles (kernels.reference)
and the compiled kernels.

Integer-valued CRF scores are exact in float32 and float64 alike: there the paths must equal
the oracle's bit for bit, ties included (the first maximum wins, as in Paddle)."""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.error_bounds import assert_within, path_score_bound, pool_bound
from onnx.reference import ReferenceEvaluator

from fusebridge import kernels
from fusebridge.graph.builder import OpBuilder
from fusebridge.kernels import reference
from fusebridge.kernels.sequence_pool import POOLTYPES
from fusebridge.ops.crf import viterbi_graph as crf_decoding
from fusebridge.ops.sequence import pool_graph as sequence_pool

FLOAT, INT64 = ir.DataType.FLOAT, ir.DataType.INT64


def offsets_of(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def one_op_model(
    build: Callable[..., ir.Value],
    inputs: list[tuple[str, ir.DataType, list]],
    output: tuple[ir.DataType, list],
    opset: int = 17,
) -> onnx.ModelProto:
    """build(op, *input values) as a model of standard opset `opset` whose graph output is the
    value it returns."""
    values = [ir.Value(name=n, type=ir.TensorType(t), shape=ir.Shape(s)) for n, t, s in inputs]
    op = OpBuilder("lowered", {n for n, _, _ in inputs}, opset)
    out = build(op, *values)
    out.name, out.dtype, out.shape = "out", output[0], ir.Shape(output[1])
    graph = ir.Graph(
        values,
        [out],
        nodes=op.nodes,
        initializers=op.initializers,
        opset_imports={"": opset},
        name="lowered",
    )
    proto = ir.to_proto(ir.Model(graph, ir_version=10))
    onnx.checker.check_model(proto, full_check=True)
    return proto


class Runners:
    """The model in onnxruntime and in onnx.reference; run() gives both outputs."""

    def __init__(self, proto: onnx.ModelProto) -> None:
        self.proto = proto
        self.session = ort.InferenceSession(
            proto.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        self.evaluator = ReferenceEvaluator(proto)

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {
            "onnxruntime": self.session.run(None, feeds)[0],
            "reference": self.evaluator.run(None, feeds)[0],
        }


@functools.cache
def crf_runners(with_label: bool) -> Runners:
    inputs = [
        ("emission", FLOAT, ["words", "tags"]),
        ("offsets", INT64, ["sentences_1"]),
        ("transition", FLOAT, ["tags_2", "tags"]),
    ]
    if with_label:
        inputs.append(("label", INT64, ["words", 1]))
    return Runners(one_op_model(crf_decoding, inputs, (INT64, ["words", 1])))


def run_crf(emission, transition, offsets, label=None) -> dict[str, np.ndarray]:
    feeds = {"emission": emission, "offsets": offsets, "transition": transition}
    if label is not None:
        feeds["label"] = label
    return crf_runners(label is not None).run(feeds)


def kernel_tests():
    """tests/kernels/test_crf_decoding.py, whose helpers these tests share: scores, path_score,
    tie_cases and Paddle's op as an oracle. Called inside tests only: in a whole-suite run
    pytest has collected (imported) it by then under this name, and that module is reused."""
    name = "test_crf_decoding"
    if name not in sys.modules:
        path = Path(__file__).parents[2] / "kernels" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


CRF_CASES = {
    "random_with_empty": ([3, 0, 1, 12, 0, 5, 7, 0], 6),
    "empty_first": ([0, 4, 2], 3),
    "all_length_1": ([1, 1, 1, 1, 1], 4),
    "one_long": ([40], 7),
    "one_tag": ([2, 0, 3], 1),
    "no_sentences": ([], 5),
    "only_empty_sentences": ([0, 0], 5),
}


@pytest.mark.parametrize("kind", ["ties", "normal"])
@pytest.mark.parametrize("with_label", [False, True], ids=["path", "label"])
@pytest.mark.parametrize("case", list(CRF_CASES))
def test_crf_decoding_matches_kernel_and_oracle(case, with_label, kind):
    kt = kernel_tests()
    lengths, tags = CRF_CASES[case]
    rng = np.random.default_rng(len(case) + 10 * tags + with_label)
    offsets = offsets_of(lengths)
    words = int(offsets[-1])
    emission = kt.scores(rng, (words, tags), kind)
    transition = kt.scores(rng, (tags + 2, tags), kind)
    label = None
    if with_label:
        # About half the words right, so both 0 and 1 occur.
        path = kernels.crf_decoding(emission, transition, offsets)
        label = np.where(rng.random((words, 1)) < 0.5, path, rng.integers(0, tags, (words, 1)))
        label = label.astype(np.int64)
    expected = kernels.crf_decoding(emission, transition, offsets, label)
    oracle = reference.crf_decoding(emission, transition, offsets, label)
    for runtime, got in run_crf(emission, transition, offsets, label).items():
        assert got.dtype == np.int64 and got.shape == (words, 1), runtime
        # The same float32 arithmetic and tie rule as the compiled kernel: the same path.
        np.testing.assert_array_equal(got, expected, err_msg=runtime)
        if kind == "ties":
            np.testing.assert_array_equal(got, oracle, err_msg=runtime)
        elif not with_label:
            # float64 may choose another path only among paths within rounding of the best.
            # (each path score is a float32 sum of 2L + 1 terms: path_score_bound)
            assert_within(
                kt.path_score(emission, transition, offsets, got),
                kt.path_score(emission, transition, offsets, oracle),
                2 * path_score_bound(emission, transition, offsets, np.zeros_like(emission)),
                runtime,
            )


def test_crf_decoding_ties_go_to_the_first_tag():
    """The kernel tests' hand-made ties (start, end, from-tag, all equal) and all -inf
    sentence: every tie resolves to the lowest tag."""
    for emission, transition, lengths, expected in kernel_tests().tie_cases():
        for runtime, got in run_crf(emission, transition, offsets_of(lengths)).items():
            np.testing.assert_array_equal(got[:, 0], expected, err_msg=runtime)


def minus_inf_case() -> tuple[np.ndarray, np.ndarray, list[int]]:
    """No start allowed (-inf): every score of step 1 is -inf. Paddle's kernel starts its
    maxima at -FLT_MAX, so step 1 gets -FLT_MAX + x, finite, and the last tag follows x
    (tag 1); a float64 max keeps -inf and ties at tag 0."""
    emission = np.array([[0, 0], [0, 1e38]], np.float32)
    transition = np.zeros((4, 2), np.float32)
    transition[0] = -np.inf
    return emission, transition, [2]


def test_crf_decoding_minus_inf_scores_as_paddle():
    emission, transition, lengths = minus_inf_case()
    offsets = offsets_of(lengths)
    expected = kernels.crf_decoding(emission, transition, offsets)
    np.testing.assert_array_equal(expected[:, 0], [0, 1])
    for runtime, got in run_crf(emission, transition, offsets).items():
        np.testing.assert_array_equal(got, expected, err_msg=runtime)


@pytest.mark.paddle
def test_crf_decoding_matches_paddle():
    kt = kernel_tests()
    rng = np.random.default_rng(7)
    lengths = [3, 0, 1, 12, 0, 5, 7]
    tags = 5
    offsets = offsets_of(lengths)
    emission = kt.scores(rng, (int(offsets[-1]), tags), "normal")
    transition = kt.scores(rng, (tags + 2, tags), "normal")
    label = rng.integers(0, tags, (int(offsets[-1]), 1))
    cases = [(emission, transition, lengths, None), (emission, transition, lengths, label)]
    cases.append((*minus_inf_case(), None))
    for emission, transition, lengths, label in cases:
        expected = kt.paddle_crf_decoding(emission, transition, lengths, label)
        for runtime, got in run_crf(emission, transition, offsets_of(lengths), label).items():
            np.testing.assert_array_equal(got, expected, err_msg=runtime)


@functools.cache
def pool_runners(pooltype: str, pad_value: float) -> Runners:
    def build(op, x, offsets):
        return sequence_pool(op, x, offsets, pooltype, pad_value)

    inputs = [("x", FLOAT, ["words", "C"]), ("offsets", INT64, ["sentences_1"])]
    return Runners(one_op_model(build, inputs, (FLOAT, ["sentences", "C"])))


POOL_LENGTHS = {
    "with_empty": [3, 0, 1, 12, 0, 5, 0],
    "empty_first": [0, 2, 1],
    "no_sentences": [],
    "only_empty_sentences": [0, 0, 0],
}


# onnx.reference's Div warns on an empty sentence's 0 / 0, which the pad then replaces.
@pytest.mark.filterwarnings("ignore:invalid value encountered in divide:RuntimeWarning")
@pytest.mark.parametrize("pad_value", [0.0, 2.5])
@pytest.mark.parametrize("pooltype", POOLTYPES)
def test_sequence_pool_matches_kernel_and_oracle(pooltype, pad_value):
    runners = pool_runners(pooltype, pad_value)
    rng = np.random.default_rng(3)
    for name, lengths in POOL_LENGTHS.items():
        offsets = offsets_of(lengths)
        # Shifted down: MAX must not take a padding zero for a sentence's maximum.
        x = (rng.standard_normal((int(offsets[-1]), 4)) - 1.0).astype(np.float32)
        oracle = reference.sequence_pool(x, offsets, pooltype, pad_value)
        kernel = kernels.sequence_pool(x, offsets, pooltype, pad_value)
        for runtime, got in runners.run({"x": x, "offsets": offsets}).items():
            where = f"{name} in {runtime}"
            assert got.dtype == np.float32 and got.shape == (len(lengths), 4), where
            # Sums of a sentence's words, each within pool_bound of the exact float64 oracle.
            bound = pool_bound(x, offsets, pooltype)
            assert_within(got, oracle, bound, where)
            if pooltype in ("MAX", "LAST", "FIRST"):
                np.testing.assert_array_equal(got, kernel, err_msg=where)
            else:
                assert_within(got, kernel, 2 * bound, f"{where}, against the kernel")
