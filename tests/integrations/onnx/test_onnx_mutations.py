"""Structural mutations of the bundled ONNX fixtures (tests/fixtures/onnx), and of the
fusebridge-domain files optimizing them writes: inputs dropped, references renamed to missing
values, cycles, attributes retyped or set to bad values, initializers corrupted. Loading,
optimizing, creating a Session and running it (on inputs of the declared shapes, free
dimensions 3), and the portable export may succeed or raise a fusebridge.Error; nothing else
(no AttributeError, KeyError, numpy ValueError, MemoryError...)."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper

import fusebridge as fb
from fusebridge.models import assets

FIXTURE_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "onnx"
FIXTURES = sorted(p.stem for p in FIXTURE_DIR.glob("*.onnx"))
PER_KIND = 3  # mutations of each kind per file, drawn with a fixed seed

Mutation = Callable[[onnx.ModelProto, random.Random], str]


def _node(model: onnx.ModelProto, rng: random.Random, domain: str | None = None):
    nodes = [n for n in model.graph.node if domain is None or n.domain == domain]
    return rng.choice(nodes) if nodes else None


def drop_input(model, rng, domain=None):
    node = _node(model, rng, domain) or _node(model, rng)
    if node.input:
        del node.input[rng.randrange(len(node.input))]
    return f"drop an input of {node.op_type} {node.name!r}"


def rename_reference(model, rng, domain=None):
    node = _node(model, rng, domain) or _node(model, rng)
    if node.input:
        node.input[rng.randrange(len(node.input))] = "missing_value"
    elif model.graph.output:
        model.graph.output[0].name = "missing_value"
    return f"a reference of {node.op_type} {node.name!r} renamed to a missing value"


def add_cycle(model, rng):
    first, last = model.graph.node[0], model.graph.node[-1]
    first.input.append(last.output[0]) if not first.input else first.input.__setitem__(
        0, last.output[0]
    )
    return f"{first.op_type} {first.name!r} reads the last node's output"


def duplicate_name(model, rng):
    a, b = rng.sample(list(model.graph.node), 2)
    b.output[0] = a.output[0]
    return f"{b.op_type} {b.name!r} writes {a.output[0]!r} again"


_BAD_VALUES = {
    AttributeProto.INT: [-1, 2, 2**40, -(2**63)],
    AttributeProto.FLOAT: [float("nan"), float("inf"), -3.0, 1.5],
    AttributeProto.STRING: [b"bogus", b""],
    AttributeProto.INTS: [[], [99], [0, 0], [2**40, -(2**40)]],
    AttributeProto.FLOATS: [[], [float("nan")]],
    AttributeProto.STRINGS: [[], [b"bogus"], [b"Sigmoid"] * 5],
}
_OTHER_TYPE = {  # a value of another type, for retyping
    AttributeProto.INT: 1.0,
    AttributeProto.FLOAT: "x",
    AttributeProto.STRING: 3,
    AttributeProto.INTS: 4,
    AttributeProto.FLOATS: [1, 2],
    AttributeProto.STRINGS: 0.5,
}


def _attribute(model, rng, domain=None):
    attrs = [
        (n, a)
        for n in model.graph.node
        if domain is None or n.domain == domain
        for a in n.attribute
        if a.type in _BAD_VALUES
    ]
    return rng.choice(attrs) if attrs else (None, None)


def _replace(attr, value) -> None:
    empty = isinstance(value, list) and not value  # an empty list says no type of its own
    attr.CopyFrom(helper.make_attribute(attr.name, value, attr_type=attr.type if empty else None))


def retype_attribute(model, rng, domain=None):
    node, attr = _attribute(model, rng, domain)
    if node is None:
        return "no attribute"
    _replace(attr, _OTHER_TYPE[attr.type])
    return f"{node.op_type} {node.name!r} attribute {attr.name} retyped"


def bad_attribute_value(model, rng, domain=None):
    node, attr = _attribute(model, rng, domain)
    if node is None:
        return "no attribute"
    value = rng.choice(_BAD_VALUES[attr.type])
    _replace(attr, value)
    return f"{node.op_type} {node.name!r} attribute {attr.name} = {value!r}"


def _initializer(model, rng):
    inits = list(model.graph.initializer)
    return rng.choice(inits) if inits else None


def corrupt_initializer(model, rng):
    t = _initializer(model, rng)
    if t is None:
        return "no initializer"
    how = rng.choice(["truncate", "extend", "huge_dims", "negative_dim", "retype", "values"])
    if how == "truncate" and t.raw_data:
        t.raw_data = t.raw_data[: len(t.raw_data) // 2]
    elif how == "extend" and t.raw_data:
        t.raw_data = t.raw_data + b"\0" * 8
    elif how == "huge_dims":
        t.dims[:] = [2**31, 2**31, 2**31]
    elif how == "negative_dim" and t.dims:
        t.dims[0] = -t.dims[0] - 1
    elif how == "retype":
        t.data_type = rng.choice([TensorProto.UNDEFINED, TensorProto.STRING, 77, TensorProto.INT8])
    elif how == "values" and t.data_type == TensorProto.FLOAT and t.raw_data:
        # Non-finite weights and dropout ratios (valid ONNX, but a ratio must be in [0, 1]).
        n = len(t.raw_data) // 4
        t.raw_data = np.full(n, rng.choice([np.nan, np.inf, 1.5, -3.0]), np.float32).tobytes()
    return f"initializer {t.name!r}: {how}"


def reshape_initializer(model, rng):
    """Dims that still fit the data but not the op: [a, b] -> [b, a], or flattened."""
    t = _initializer(model, rng)
    if t is None or len(t.dims) < 1:
        return "no initializer"
    dims = list(t.dims)
    t.dims[:] = dims[::-1] if rng.random() < 0.5 else [int(np.prod(dims))]
    return f"initializer {t.name!r}: dims {dims} -> {list(t.dims)}"


KINDS: dict[str, Mutation] = {
    "drop_input": drop_input,
    "rename_reference": rename_reference,
    "add_cycle": add_cycle,
    "duplicate_name": duplicate_name,
    "retype_attribute": retype_attribute,
    "bad_attribute_value": bad_attribute_value,
    "corrupt_initializer": corrupt_initializer,
    "reshape_initializer": reshape_initializer,
}
OUR_KINDS: dict[str, Mutation] = {  # on the fusebridge nodes of a file we wrote
    "retype_attribute": lambda m, r: retype_attribute(m, r, "fusebridge"),
    "bad_attribute_value": lambda m, r: bad_attribute_value(m, r, "fusebridge"),
    "drop_input": lambda m, r: drop_input(m, r, "fusebridge"),
    "rename_reference": lambda m, r: rename_reference(m, r, "fusebridge"),
    "corrupt_initializer": corrupt_initializer,
    "reshape_initializer": reshape_initializer,
}


def _feeds(model) -> dict[str, object]:
    """Normal floats, zero ints; a LoD input (x with x.offsets) as 2 sentences of 2 and 1."""
    rng = np.random.default_rng(0)
    names = {v.name for v in model.graph.inputs}
    feeds = {}
    for value in model.graph.inputs:
        if value.name.endswith(".offsets") and value.name[: -len(".offsets")] in names:
            continue
        lod = f"{value.name}.offsets" in names
        shape = [d if isinstance(d, int) else 3 for d in value.shape or []]
        dtype = np.float32 if value.dtype is None else value.dtype.numpy()
        real = np.issubdtype(dtype, np.floating)
        data = (rng.standard_normal(shape) if real else np.zeros(shape)).astype(dtype)
        feeds[value.name] = fb.LoDTensor(data, lengths=[2, 1]) if lod else data
    return feeds


def _load_optimize_run(path: Path) -> None:
    model = fb.load(path)
    try:
        fb.save_onnx(model, path.with_suffix(".portable.onnx"), portable=True)
    except fb.Error:
        pass  # what ONNX cannot express; the Session may still run it
    optimized, _ = fb.optimize(model)
    fb.Session(optimized).run(_feeds(optimized))


def _mutants(base: onnx.ModelProto, kinds: dict[str, Mutation], seed: str) -> Iterator:
    rng = random.Random(seed)
    for kind, mutate in kinds.items():
        for _ in range(PER_KIND):
            model = onnx.ModelProto()
            model.CopyFrom(base)
            yield kind, mutate(model, rng), model


def _check_mutants(tmp_path: Path, base: onnx.ModelProto, kinds: dict, seed: str) -> None:
    failures = []
    for k, (kind, what, model) in enumerate(_mutants(base, kinds, seed)):
        path = tmp_path / f"mutant{k}.onnx"
        onnx.save(model, path)
        try:
            _load_optimize_run(path)
        except fb.Error:
            pass
        except Exception as exc:  # the bug this test looks for
            failures.append(f"{kind}: {what}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)


@pytest.mark.parametrize("name", FIXTURES)
def test_mutated_fixture_raises_only_fusebridge_errors(tmp_path, name):
    base = onnx.load(FIXTURE_DIR / f"{name}.onnx")
    _check_mutants(tmp_path, base, KINDS, name)


@pytest.mark.parametrize("name", [*FIXTURES, "tagger"])
def test_mutated_fusebridge_file_raises_only_fusebridge_errors(tmp_path, name):
    """The files optimizing each fixture writes, and the bundled Paddle tagger's (LoD GRUs,
    CRFDecoding)."""
    source = assets.path("tagger") if name == "tagger" else FIXTURE_DIR / f"{name}.onnx"
    ours = tmp_path / "ours.onnx"
    fb.save_onnx(fb.optimize(fb.load(source))[0], ours)
    _check_mutants(tmp_path, onnx.load(ours), OUR_KINDS, name)
