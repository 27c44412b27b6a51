"""The frontends' converter tables (integrations/converters.py): one registration idiom, one
converter per op type, an unknown op refused naming its type and node, and no module of
fusebridge/integrations importing another module's private names."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import onnx_ir as ir
import pytest

import fusebridge as fb
from fusebridge.graph.checks import qualified_op
from fusebridge.integrations.converters import ConverterRegistry, ir_node_label, node_label
from fusebridge.integrations.mxnet.converters import CONVERTERS as MXNET_CONVERTERS
from fusebridge.integrations.mxnet.emitters import WRITERS as MXNET_WRITERS
from fusebridge.integrations.mxnet.load import SymbolConverter
from fusebridge.integrations.mxnet.symbol import parse_symbol
from fusebridge.integrations.paddle.converters import CONVERTERS as PADDLE_CONVERTERS
from fusebridge.integrations.paddle.load import ProgramConverter
from fusebridge.integrations.paddle.params import read_paddle_model
from fusebridge.integrations.paddle.save import MAPPERS as PADDLE_MAPPERS
from fusebridge.models import assets

INTEGRATIONS = Path(fb.__file__).parent / "integrations"
TABLES = {
    "paddle converters": (PADDLE_CONVERTERS, INTEGRATIONS / "paddle" / "converters"),
    "mxnet converters": (MXNET_CONVERTERS, INTEGRATIONS / "mxnet" / "converters"),
    "mxnet emitters": (MXNET_WRITERS, INTEGRATIONS / "mxnet" / "emitters"),
    "paddle mappers": (PADDLE_MAPPERS, INTEGRATIONS / "paddle" / "save.py"),
}


def _literal_registrations(path: Path) -> list[tuple[str, str]]:
    """(op type, module) of every `X.register("op", ...)` call with literal op types in the
    modules under path (a family module or a folder of them)."""
    files = [path] if path.is_file() else sorted(path.glob("*.py"))
    found = []
    for file in files:
        for node in ast.walk(ast.parse(file.read_text(), str(file))):
            call = node if isinstance(node, ast.Call) else None
            if call is None or not isinstance(call.func, ast.Attribute):
                continue
            if call.func.attr != "register":
                continue
            for arg in call.args:
                if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                    found.append((arg.value, file.name))
    return found


@pytest.mark.parametrize("table", list(TABLES))
def test_every_registered_op_type_has_exactly_one_converter(table):
    registry, source = TABLES[table]
    assert len(registry) > 0
    for op_type in registry:
        assert callable(registry.lookup(op_type, "here"))
    # Each op type written out in a register() call is written once, in one family module,
    # and is in the table (the table refuses a second converter when the modules register).
    literal = _literal_registrations(source)
    seen: dict[str, str] = {}
    for op_type, module in literal:
        assert op_type not in seen, f"{op_type!r} registered in {seen[op_type]} and {module}"
        seen[op_type] = module
        assert op_type in registry


def test_a_second_converter_for_an_op_type_is_refused():
    registry = ConverterRegistry("test converter", lod="X")

    @registry.register("a", "b", lod=None)
    def first(cx, op):
        pass

    assert set(registry) == {"a", "b"} and registry.option("a", "lod") is None
    with pytest.raises(ValueError, match=r"op type 'b' has a test converter already .*first"):
        registry.register("b")(lambda cx, op: None)
    with pytest.raises(TypeError, match="options"):
        registry.register("c", keeps=True)
    assert registry.lookup("b", "here") is first


@pytest.mark.parametrize(
    ("registry", "where", "node"),
    [
        (PADDLE_CONVERTERS, node_label("Paddle", "no_such_op", 3) + " of block 0", "node #3"),
        (MXNET_CONVERTERS, node_label("MXNet", "no_such_op", "mystery"), "node 'mystery'"),
        (MXNET_WRITERS, node_label("ONNX", "no_such_op", "mystery"), "node 'mystery'"),
        (PADDLE_MAPPERS, node_label("ONNX", "no_such_op", "mystery"), "node 'mystery'"),
    ],
)
def test_an_unknown_op_type_is_refused_naming_it_and_its_node(registry, where, node):
    with pytest.raises(fb.UnsupportedOpError) as info:
        registry.lookup("no_such_op", where)
    message = str(info.value)
    assert message.startswith(f"{where}: no {registry.name} for op type 'no_such_op'")
    assert "no_such_op node" in message and node in message


def test_node_labels_have_one_form():
    assert node_label("MXNet", "RNN", "rnn") == "MXNet RNN node 'rnn'"
    assert node_label("Paddle", "scale", 1) == "Paddle scale node #1"
    x = ir.Value(name="x")
    gru = ir.node("GRU", [x], name="the_gru")
    drop = ir.node("Dropout", [x], domain="fusebridge", name="d")
    assert ir_node_label(gru) == "ONNX GRU node 'the_gru'"
    assert qualified_op(drop) == "fusebridge.Dropout"
    assert ir_node_label(drop) == "ONNX fusebridge.Dropout node 'd'"


def test_an_unknown_paddle_op_is_refused_naming_its_type_and_node():
    program, params = read_paddle_model(assets.path("sentiment"))
    block = program.blocks[0]
    k = next(i for i, op in enumerate(block.ops) if op.type == "softmax")
    ops = list(block.ops)
    ops[k] = dataclasses.replace(ops[k], type="no_such_op")
    edited = dataclasses.replace(program, blocks=(dataclasses.replace(block, ops=tuple(ops)),))
    with pytest.raises(fb.UnsupportedOpError) as info:
        ProgramConverter(edited, params, "m").convert()
    message = str(info.value)
    assert message.startswith("paddle model m: 1 unsupported op type(s): no_such_op (e.g. node ")
    assert f"no_such_op (e.g. node #{k}, inputs X=" in message


def test_an_unknown_mxnet_op_is_refused_naming_its_type_and_node():
    symbol = {
        "nodes": [
            {"op": "null", "name": "x", "inputs": []},
            {"op": "NoSuchOp", "name": "mystery", "inputs": [[0, 0, 0]]},
        ],
        "arg_nodes": [0],
        "heads": [[1, 0, 0]],
    }
    converter = SymbolConverter(parse_symbol(json.dumps(symbol), "m"), {}, "m")
    with pytest.raises(fb.UnsupportedOpError) as info:
        converter.convert()
    message = str(info.value)
    assert "1 unsupported op type(s): NoSuchOp (e.g. node 'mystery')" in message


def _private_imports(file: Path) -> list[str]:
    """Every private name (one leading underscore) `file` imports from another module: from
    `from m import _x`, `from m import _x as y`, and modules `import m._x`, wherever the import
    is (inside functions and TYPE_CHECKING blocks too)."""

    def private(name: str) -> bool:
        return name.startswith("_") and not name.startswith("__")

    found = []
    for node in ast.walk(ast.parse(file.read_text(), str(file))):
        if isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            parts = (node.module or "").split(".")
            found += [f"{module} (module)" for p in parts if private(p)]
            found += [f"{module}.{a.name}" for a in node.names if private(a.name)]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if any(map(private, a.name.split(".")))]
    return [f"{file.name}: {name}" for name in found]


def test_no_integrations_module_imports_another_modules_private_names():
    files = sorted(INTEGRATIONS.rglob("*.py"))
    assert len(files) > 40
    offenders = [hit for file in files for hit in _private_imports(file)]
    assert offenders == []


def test_the_private_import_check_sees_nested_and_aliased_imports(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from a.b import public, _hidden as shown\n"
        "import e.public, __future__\n"
        "def f():\n"
        "    from c import _inner\n"
        "    import d._module\n"
    )
    hits = _private_imports(sample)
    assert hits == ["sample.py: a.b._hidden", "sample.py: c._inner", "sample.py: d._module"]
