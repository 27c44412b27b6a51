"""Threads for the ONNX Runtime partitions beside our kernels (runtime/onnx_partition.py,
partition_work.py): the work estimate of MatMul, Gemm and Conv against the formulas, a run with
enough work on a session of the kernels' thread count (built then, once), one without on the
calling thread, and both giving ONNX Runtime's outputs on the original file, the same bits."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.error_bounds import ONNXRUNTIME, assert_within
from helpers.graph_bounds import SESSION, output_bounds
from onnx import TensorProto, helper

import fusebridge as fb
from fusebridge.runtime import onnx_partition
from fusebridge.runtime.partition_work import multiply_adds, work_terms

T, IN, H, OUT = 20, 16, 32, 256


def gru_then_matmul(tmp_path: Path) -> Path:
    """x [T, N, IN] -> ONNX GRU (our kernel) -> Squeeze -> MatMul W [H, OUT] (a partition)."""
    rng = np.random.default_rng(0)
    shapes = (("W", (1, 3 * H, IN)), ("R", (1, 3 * H, H)), ("B", (1, 6 * H)), ("P", (H, OUT)))
    weights = [
        onnx.numpy_helper.from_array((rng.standard_normal(s) * 0.1).astype(np.float32), n)
        for n, s in shapes
    ]
    weights.append(onnx.numpy_helper.from_array(np.array([1], np.int64), "axis1"))
    nodes = [
        helper.make_node("GRU", ["x", "W", "R", "B"], ["y"], hidden_size=H),
        helper.make_node("Squeeze", ["y", "axis1"], ["h"]),
        helper.make_node("MatMul", ["h", "P"], ["out"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [T, "N", IN])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "g", [x], [out], initializer=weights)
    path = tmp_path / "gru_matmul.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path


def test_a_run_with_enough_work_takes_a_threaded_session_built_once(tmp_path, threads, monkeypatch):
    threads(2)
    made = []
    real = ort.InferenceSession

    def recording(model, options=None, **kw):
        made.append(options.intra_op_num_threads)
        return real(model, options, **kw)

    monkeypatch.setattr(onnx_partition.ort, "InferenceSession", recording)
    # The partition's MatMul: T * N * H * OUT multiply-adds; N = 16 crosses the line, N = 1 not.
    monkeypatch.setattr(onnx_partition, "THREADED_MIN_MACS", T * 8 * H * OUT)
    path = gru_then_matmul(tmp_path)
    model = fb.load(path)
    session = fb.Session(fb.optimize(model)[0], placement="kernels")
    plain = real(str(path))
    rng = np.random.default_rng(1)
    results = {}
    for n, threaded in ((1, False), (16, True), (1, False), (16, True)):
        before = len(made)
        x = rng.standard_normal((T, n, IN)).astype(np.float32)
        got = session.run({"x": x})["out"]
        want = plain.run(None, {"x": x})[0]
        bound = output_bounds(model, {"x": x}, (SESSION, ONNXRUNTIME))["out"]
        assert_within(got, want, bound, f"batch {n}")
        results.setdefault(n, []).append(got)
        if threaded and 2 not in made:
            pytest.fail("a run with enough work did not build the threaded session")
        assert len(made) - before <= 1  # at most the threaded one, once
    assert made.count(2) == 1 and made[0] == 1  # the calling thread's session, then one more
    # The same bits on either session (ONNX Runtime splits rows and columns, never a sum).
    monkeypatch.setattr(onnx_partition, "THREADED_MIN_MACS", 1 << 62)
    alone = fb.Session(fb.optimize(fb.load(path))[0], placement="kernels")
    rng = np.random.default_rng(1)
    for n in (1, 16):
        x = rng.standard_normal((T, n, IN)).astype(np.float32)
        np.testing.assert_array_equal(alone.run({"x": x})["out"], results[n][0])


def test_the_threaded_session_stops_spinning_when_its_run_returns(tmp_path, threads, monkeypatch):
    """ONNX Runtime's workers spin for tens of milliseconds after a run by default, on the cores
    our kernels take next: the threaded partition's stop when its run returns. Measured as the
    process's CPU time while it sleeps after a run; the same partition on a session with ONNX
    Runtime's defaults shows the measure sees spinning."""
    threads(2)
    monkeypatch.setattr(onnx_partition, "THREADED_MIN_MACS", 1)  # every run on the threaded one
    path = gru_then_matmul(tmp_path)
    session = fb.Session(fb.optimize(fb.load(path))[0], placement="kernels")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    defaults = ort.InferenceSession(str(path), options)
    x = np.random.default_rng(2).standard_normal((T, 16, IN)).astype(np.float32)

    def cpu_while_idle(run) -> float:
        run()
        start = time.process_time()
        time.sleep(0.06)
        return time.process_time() - start

    ours = min(cpu_while_idle(lambda: session.run({"x": x})) for _ in range(3))
    spinning = max(cpu_while_idle(lambda: defaults.run(None, {"x": x})) for _ in range(3))
    assert spinning > 0.02, f"ONNX Runtime's defaults used {spinning * 1e3:.1f} ms of CPU idle"
    assert ours < 0.01, f"the threaded partition used {ours * 1e3:.1f} ms of CPU after its run"


def _terms(nodes, inputs, inits):
    graph = helper.make_graph(nodes, "g", inputs, [], initializer=inits)
    model = ir.from_proto(helper.make_model(graph))
    names = [v.name for v in model.graph.inputs]
    return work_terms(list(model.graph), names, {}), names


def _value(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _zeros(name, shape):
    return onnx.numpy_helper.from_array(np.zeros(shape, np.float32), name)


def test_the_estimate_follows_the_formulas():
    """MatMul behind a Transpose and a bias Add: M*K*N; Conv with groups and stride:
    N*C_out*L_out*(C_in/g)*k; Gather of an input's rows (torch's unsorting); an input that only
    a computed tensor reaches is not counted."""
    nodes = [
        helper.make_node("Transpose", ["a"], ["at"], perm=[1, 0]),
        helper.make_node("Add", ["at", "bias"], ["ab"]),
        helper.make_node("MatMul", ["ab", "w"], ["m"]),
        helper.make_node("Conv", ["c", "k"], ["co"], group=2, strides=[2]),
        helper.make_node("Gather", ["rows", "idx"], ["g"], axis=0),
        helper.make_node("MatMul", ["g", "w2"], ["gm"]),
        helper.make_node("Mul", ["u", "v"], ["uv"]),  # two data inputs: not traced
        helper.make_node("MatMul", ["uv", "w2"], ["um"]),
    ]
    inputs = [_value("a", [7, 5]), _value("c", [2, 8, 40]), _value("rows", [9, 6])]
    inputs += [helper.make_tensor_value_info("idx", TensorProto.INT64, [4])]
    inputs += [_value("u", [3, 6]), _value("v", [3, 6])]
    inits = [_zeros("bias", [7]), _zeros("w", [7, 11]), _zeros("k", [12, 4, 3])]
    inits += [_zeros("w2", [6, 10])]
    terms, names = _terms(nodes, inputs, inits)
    arrays = {
        "a": np.zeros((7, 5)),
        "c": np.zeros((2, 8, 40)),
        "rows": np.zeros((9, 6)),
        "idx": np.zeros(4, np.int64),
        "u": np.zeros((3, 6)),
        "v": np.zeros((3, 6)),
    }
    xs = [arrays[n] for n in names]
    matmul = 5 * 7 * 11  # [5, 7] @ [7, 11]
    conv = 2 * 12 * (40 // 2) * (8 // 2) * 3  # N, C_out, L_out, C_in / group, kernel
    gathered = 4 * 6 * 10  # 4 rows of 6 @ [6, 10]
    assert len(terms) == 3
    assert multiply_adds(terms, xs) == matmul + conv + gathered
