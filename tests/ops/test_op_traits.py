"""What an op carries (OpDef: input check, recurrence, placement cost, bindings per engine) is
what the layers above act on: no list of op names outside fusebridge/ops/ decides behaviour. A
recurrent op the runtime and the passes have never heard of, declared like FusionGRU under
another name, is padded by the portable export and placed by cost like FusionGRU."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest

from fusebridge import conventions, ops
from fusebridge.errors import ArgumentTypeError, UnsupportedOpError
from fusebridge.fuse_passes.portable import to_padded_recurrences
from fusebridge.ops.common import OpDef, Recurrence
from fusebridge.ops.gru import FUSION_GRU, FUSION_GRU_SCHEMA
from fusebridge.runtime.placement import Placement

PACKAGE = Path(ops.__file__).parents[1]


def _literals(path: Path) -> list[tuple[int, str, str]]:
    """(line, op name, where) for each string constant naming one of our ops: 'decides' where
    it is compared with (==, !=, in) or sits in a tuple, list or set; 'names' elsewhere."""
    tree = ast.parse(path.read_text())
    deciding = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            deciding |= {id(c) for c in [node.left, *node.comparators]}
            for c in node.comparators:
                if isinstance(c, (ast.Tuple, ast.List, ast.Set)):
                    deciding |= {id(e) for e in c.elts}
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            names = [
                e for e in node.elts if isinstance(e, ast.Constant) and e.value in ops.REGISTRY
            ]
            if len(names) > 1:
                deciding |= {id(e) for e in names}
    return [
        (n.lineno, n.value, "decides" if id(n) in deciding else "names")
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in ops.REGISTRY
    ]


def test_the_runtime_names_no_op_of_ours():
    found = {
        str(p.relative_to(PACKAGE)): _literals(p) for p in sorted(PACKAGE.glob("runtime/*.py"))
    }
    assert {k: v for k, v in found.items() if v} == {}


def test_no_pass_decides_by_a_list_of_op_names():
    """A rule names the ops of its own pattern and the node it builds; it never compares an op
    name with a list, nor dispatches on one (that is the op's trait)."""
    found = {
        str(p.relative_to(PACKAGE)): [hit for hit in _literals(p) if hit[2] == "decides"]
        for p in sorted(PACKAGE.glob("fuse_passes/*.py"))
    }
    assert {k: v for k, v in found.items() if v} == {}


def test_the_scan_finds_a_deciding_literal(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text('def f(node):\n    return node.op_type in ("GRU", "FusionGRU")\n')
    assert _literals(probe) == [(2, "GRU", "decides"), (2, "FusionGRU", "decides")]


@pytest.fixture
def probe_gru(monkeypatch) -> OpDef:
    """FusionGRU under the name ProbeGRU, in the registry for this test only."""
    schema = dataclasses.replace(FUSION_GRU_SCHEMA, op_type="ProbeGRU")
    probe = dataclasses.replace(FUSION_GRU, schema=schema)
    monkeypatch.setitem(ops.REGISTRY, "ProbeGRU", probe)
    monkeypatch.setitem(ops.SCHEMAS, "ProbeGRU", schema)
    return probe


def _constant(name: str, array: np.ndarray) -> ir.Value:
    return ir.Value(
        name=name,
        const_value=ir.tensor(array, name=name),
        shape=ir.Shape(array.shape),
        type=ir.TensorType(ir.DataType.FLOAT),
    )


def _probe_graph(layout: str, x_shape: list) -> tuple[ir.Graph, ir.Node]:
    rng = np.random.default_rng(0)
    x = ir.Value(name="x", shape=ir.Shape(x_shape), type=ir.TensorType(ir.DataType.FLOAT))
    lengths_dtype = ir.DataType.INT64 if layout == "lod" else ir.DataType.INT32
    lengths = ir.Value(name="lens", shape=ir.Shape(["N1"]), type=ir.TensorType(lengths_dtype))
    wx = _constant("wx", rng.standard_normal((1, 4, 9)).astype(np.float32))
    wh = _constant("wh", rng.standard_normal((1, 3, 9)).astype(np.float32))
    node = ops.node("ProbeGRU", [x, lengths, wx, wh], {"layout": layout}, name="probe")
    graph = ir.Graph([x, lengths], node.outputs, nodes=[node], initializers=[wx, wh])
    return graph, node


def test_a_new_recurrent_op_is_padded_by_the_portable_export(probe_gru):
    graph, _ = _probe_graph("lod", ["words", 4])
    assert to_padded_recurrences(graph) == 1
    nodes = list(graph)
    kinds = [n.op_type for n in nodes]
    assert kinds[0] == "LoDToPadded" and kinds[-1] == "PaddedToLoD"
    (gru,) = [n for n in nodes if n.op_type == "ProbeGRU"]
    assert gru.attributes.get_string("layout") == "tnc"
    assert gru.inputs[0] is nodes[0].outputs[0] and nodes[-1].inputs[0] is gru.outputs[0]


def test_a_new_recurrent_op_is_placed_by_its_cost(probe_gru):
    graph, node = _probe_graph("tnc", ["T", "N", 4])
    placement = Placement(graph, {v.name: v for v in graph.inputs})
    assert placement.refused == {}
    (candidate,) = placement.candidates
    assert candidate.node is node and candidate.sizes == {"I": 4, "H": 3, "D": 1}
    assert (candidate.steps, candidate.batch, candidate.lengths_feed) == ("T", "N", "lens")


def test_an_op_without_a_cost_stays_on_our_kernel(probe_gru, monkeypatch):
    monkeypatch.setitem(ops.REGISTRY, "ProbeGRU", dataclasses.replace(probe_gru, cost=None))
    graph, node = _probe_graph("tnc", ["T", "N", 4])
    placement = Placement(graph, {v.name: v for v in graph.inputs})
    assert placement.candidates == []
    assert "no cost model" in placement.refused[node]


def test_a_recurrence_names_slots_of_its_schema():
    with pytest.raises(TypeError, match="names no slot"):
        dataclasses.replace(FUSION_GRU, recurrence=Recurrence(lengths="offsets"))
    with pytest.raises(TypeError, match="unknown engines"):
        dataclasses.replace(FUSION_GRU, bindings={"tpu": FUSION_GRU.bindings["cpu"]})


def test_an_engine_without_a_binding_is_refused_by_name():
    inputs = [ir.Value(name=n) for n in ("x", "offsets")]
    node = ops.node("SequencePool", inputs, {}, name="pool")
    with pytest.raises(
        UnsupportedOpError, match=r"SequencePool node .pool.: no binding for engine "
    ):
        ops.prepare(node, {}, engine="cuda")


def test_the_dropout_family_binds_the_cuda_engine():
    """Dropout and the fused dropouts run on fusebridge.cuda, which takes device arrays: a host
    array reaching it is refused by name, not copied behind the caller's back."""
    for op_type in ("Dropout", "DropoutGrad", "MatMulDropout", "SoftmaxDropout"):
        assert set(ops.op(op_type).bindings) == {"cpu", "cuda"}
    node = ops.node("Dropout", [ir.Value(name="x"), ir.Value(name="s")], {"p": 0.5}, name="drop")
    run = ops.prepare(node, {}, engine="cuda")
    with pytest.raises(ArgumentTypeError, match="must be a CUDA device array"):
        run([np.ones(4, np.float32), np.array(1), None])


def test_attributes_default_to_the_schema():
    """Writers read attributes through ops.attribute: ours from our schema (FusionGRU's layout
    is lod), standard ones from ONNX's (Softmax's axis -1 at opset 17)."""
    gru = ir.node("FusionGRU", [], domain=conventions.DOMAIN)
    assert ops.attribute(gru, "layout") == "lod"
    assert ops.attribute(ir.node("Softmax", []), "axis") == -1
    assert ops.attribute(ir.node("Transpose", []), "perm") is None
    assert ops.attribute(ir.node("Softmax", [], attributes={"axis": 1}), "axis") == 1
