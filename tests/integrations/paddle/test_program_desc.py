"""parse_program_desc: hand-made wire-format programs (no paddle), then programs saved by Paddle
itself compared with what Paddle reports when it loads them (Paddle is the oracle).

The Paddle model builder here is shared with test_params.py."""

from __future__ import annotations

import ast
import contextlib
import functools
import struct
import warnings
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from helpers.paddle_oracle import legacy_static, paddle_or_skip
from helpers.protobuf_wire import f32, f64, ld, packed, varint, vi
from hypothesis import given
from hypothesis import strategies as st

from fusebridge.errors import ModelFormatError
from fusebridge.integrations.paddle.params import read_paddle_model
from fusebridge.integrations.paddle.program_desc import (
    DTYPES,
    BlockDesc,
    OpDesc,
    VarDesc,
    parse_program_desc,
)

# ---- ProgramDesc written by hand (helpers.protobuf_wire encodes the fields) ----


def tensor_desc(dtype: int, dims, *, pack: bool = False) -> bytes:
    dims_bytes = packed(2, dims) if pack else b"".join(vi(2, d) for d in dims)
    return vi(1, dtype) + dims_bytes


def var_desc(name, dtype=5, dims=(), *, lod_level=0, persistable=False, var_type=7) -> bytes:
    if var_type in (9, 10, 17):  # feed, fetch, raw: no tensor
        vtype = vi(1, var_type)
    else:
        dense = ld(1, tensor_desc(dtype, dims)) + (vi(2, lod_level) if lod_level else b"")
        vtype = vi(1, var_type) + ld(3, dense)
    return ld(1, name) + ld(2, vtype) + (vi(3, 1) if persistable else b"")


def attr(name: str, attr_type: int, *fields: bytes) -> bytes:
    return ld(1, name) + vi(2, attr_type) + b"".join(fields)


def op_desc(op_type: str, inputs=None, outputs=None, attrs=()) -> bytes:
    def slots(field, mapping):
        return b"".join(
            ld(field, ld(1, slot) + b"".join(ld(2, a) for a in args))
            for slot, args in (mapping or {}).items()
        )

    return slots(1, inputs) + slots(2, outputs) + ld(3, op_type) + b"".join(ld(4, a) for a in attrs)


def block_desc(idx=0, parent=-1, variables=(), ops=()) -> bytes:
    return (
        vi(1, idx)
        + vi(2, parent)
        + b"".join(ld(3, v) for v in variables)
        + b"".join(ld(4, o) for o in ops)
    )


def program_desc(*blocks: bytes, version: int | None = 3003001) -> bytes:
    return b"".join(ld(1, b) for b in blocks) + (ld(4, vi(1, version)) if version else b"")


def gru_program() -> bytes:
    """A small program in the shape Paddle writes: feed, mul, gru, fetch."""
    variables = [
        var_desc("feed", var_type=9, persistable=True),
        var_desc("fetch", var_type=10, persistable=True),
        var_desc("x", 5, [-1, 3], lod_level=1),
        var_desc("w", 5, [3, 6], persistable=True),
        var_desc("proj", 5, [-1, 6], lod_level=1),
        var_desc("hidden", 5, [-1, 2], lod_level=1),
    ]
    ops = [
        op_desc("feed", {"X": ["feed"]}, {"Out": ["x"]}, [attr("col", 0, vi(3, 0))]),
        op_desc(
            "mul",
            {"X": ["x"], "Y": ["w"]},
            {"Out": ["proj"]},
            [attr("x_num_col_dims", 0, vi(3, 1)), attr("y_num_col_dims", 0, vi(3, 1))],
        ),
        op_desc(
            "gru",
            {"Input": ["proj"], "H0": []},
            {"Hidden": ["hidden"]},
            [attr("activation", 2, ld(5, "tanh")), attr("is_reverse", 6, vi(10, 1))],
        ),
        op_desc("fetch", {"X": ["hidden"]}, {"Out": ["fetch"]}, [attr("col", 0, vi(3, 0))]),
    ]
    return program_desc(block_desc(0, -1, variables, ops))


# ---- hand-made programs ----


def test_hand_made_program():
    program = parse_program_desc(gru_program())
    assert program.version == 3003001
    (block,) = program.blocks
    assert (block.idx, block.parent_idx) == (0, -1)
    assert [op.type for op in block.ops] == ["feed", "mul", "gru", "fetch"]
    gru = block.ops[2]
    assert gru == OpDesc(
        "gru",
        {"Input": ("proj",), "H0": ()},
        {"Hidden": ("hidden",)},
        {"activation": "tanh", "is_reverse": True},
    )
    assert block.vars["x"] == VarDesc("x", 7, np.dtype(np.float32), (-1, 3), 1, False)
    assert block.vars["w"] == VarDesc("w", 7, np.dtype(np.float32), (3, 6), 0, True)
    assert block.vars["feed"] == VarDesc("feed", 9, None, (), 0, True)


def test_packed_and_unpacked_repeated_fields_read_the_same():
    def one(pack: bool) -> BlockDesc:
        ints = packed(6, [1, -2, 300]) if pack else vi(6, 1) + vi(6, -2) + vi(6, 300)
        floats = (
            ld(7, struct.pack("<3f", 0.5, -1.25, 3.0))
            if pack
            else f32(7, 0.5) + f32(7, -1.25) + f32(7, 3.0)
        )
        bools = packed(11, [1, 0, 1]) if pack else vi(11, 1) + vi(11, 0) + vi(11, 1)
        longs = packed(15, [-1, 2**40]) if pack else vi(15, -1) + vi(15, 2**40)
        doubles = ld(16, struct.pack("<2d", 0.1, -2.5)) if pack else f64(16, 0.1) + f64(16, -2.5)
        dims = tensor_desc(5, [-1, 7, 2**33], pack=pack)
        v = ld(1, "v") + ld(2, vi(1, 7) + ld(3, ld(1, dims)))
        attrs = [
            attr("ints", 3, ints),
            attr("floats", 4, floats),
            attr("bools", 7, bools),
            attr("longs", 11, longs),
            attr("float64s", 12, doubles),
        ]
        return parse_program_desc(program_desc(block_desc(0, -1, [v], [op_desc("t", attrs=attrs)])))

    unpacked, packed_ = one(False), one(True)
    assert unpacked == packed_
    (block,) = unpacked.blocks
    assert block.vars["v"].shape == (-1, 7, 2**33)
    assert block.ops[0].attrs == {
        "ints": [1, -2, 300],
        "floats": [0.5, -1.25, 3.0],
        "bools": [True, False, True],
        "longs": [-1, 2**40],
        "float64s": [0.1, -2.5],
    }


def test_negative_dims_are_ten_byte_varints():
    assert varint(-1) == b"\xff" * 9 + b"\x01"
    data = program_desc(block_desc(0, -1, [var_desc("x", 3, [-1, -1, 4])]))
    assert parse_program_desc(data).blocks[0].vars["x"].shape == (-1, -1, 4)


def test_every_attribute_type():
    scalar = ld(20, vi(1, 3) + f64(4, 2.5))
    scalars = ld(21, vi(1, 1) + vi(2, 1)) + ld(21, vi(1, 2) + vi(3, -7))
    complex_scalar = ld(20, vi(1, 4) + ld(5, f64(1, 1.0) + f64(2, -2.0)))
    attrs = [
        attr("int", 0, vi(3, -5)),
        attr("float", 1, f32(4, 0.1)),
        attr("string", 2, ld(5, "héllo")),
        attr("ints", 3, vi(6, 4), vi(6, -4)),
        attr("floats", 4, f32(7, 1.5)),
        attr("strings", 5, ld(8, "a"), ld(8, "")),
        attr("bool", 6, vi(10, 1)),
        attr("bools", 7, vi(11, 0)),
        attr("block", 8, vi(12, 1)),
        attr("long", 9, vi(13, -(2**40))),
        attr("blocks", 10, vi(14, 1), vi(14, 2)),
        attr("longs", 11, vi(15, 2**62)),
        attr("float64s", 12, f64(16, 1e300)),
        attr("var", 13, ld(17, "x")),
        attr("vars", 14, ld(18, "x"), ld(18, "y")),
        attr("float64", 15, f64(19, -0.1)),
        attr("scalar", 16, scalar),
        attr("scalars", 17, scalars),
        attr("complex", 16, complex_scalar),
        attr("absent_int", 0),
        attr("absent_ints", 3),
    ]
    everything = block_desc(0, -1, [], [op_desc("everything", attrs=attrs)])
    data = program_desc(everything, block_desc(1, 0), block_desc(2, 0))  # the blocks named
    got = parse_program_desc(data).blocks[0].ops[0].attrs
    assert got == {
        "int": -5,
        "float": float(np.float32(0.1)),
        "string": "héllo",
        "ints": [4, -4],
        "floats": [1.5],
        "strings": ["a", ""],
        "bool": True,
        "bools": [False],
        "block": 1,
        "long": -(2**40),
        "blocks": [1, 2],
        "longs": [2**62],
        "float64s": [1e300],
        "var": "x",
        "vars": ["x", "y"],
        "float64": -0.1,
        "scalar": 2.5,
        "scalars": [True, -7],
        "complex": complex(1.0, -2.0),
        "absent_int": 0,
        "absent_ints": [],
    }
    assert type(got["bool"]) is bool and type(got["float"]) is float


def test_unknown_fields_are_skipped():
    unknown = vi(90, 5) + f64(91, 1.0) + ld(92, b"\xff\x00junk") + f32(93, 2.0)
    var = var_desc("x", 5, [2]) + unknown  # also in VarDesc, VarType, TensorDesc below
    vtype = vi(1, 7) + unknown + ld(3, unknown + ld(1, tensor_desc(5, [2]) + unknown))
    var2 = ld(1, "y") + ld(2, vtype) + unknown
    op = op_desc("relu", {"X": ["x"]}, {"Out": ["y"]}, [attr("a", 0, vi(3, 1), unknown)]) + unknown
    block = block_desc(0, -1, [var, var2], [op]) + vi(5, -1) + unknown
    data = unknown + program_desc(block) + ld(5, ld(1, ld(1, "relu") + ld(2, vi(1, 1)))) + unknown
    plain = program_desc(
        block_desc(
            0,
            -1,
            [var_desc("x", 5, [2]), var_desc("y", 5, [2])],
            [op_desc("relu", {"X": ["x"]}, {"Out": ["y"]}, [attr("a", 0, vi(3, 1))])],
        )
    )
    assert parse_program_desc(data) == parse_program_desc(plain)


def test_all_data_types():
    variables = [var_desc(f"v{code}", code, [1]) for code in DTYPES]
    block = parse_program_desc(program_desc(block_desc(0, -1, variables))).blocks[0]
    assert {v.dtype for v in block.vars.values()} == set(DTYPES.values())
    assert block.vars["v22"].dtype == np.dtype(ml_dtypes.bfloat16)


def _op_attr(op_type: str, *attrs: bytes) -> bytes:
    return program_desc(block_desc(0, -1, [], [op_desc("feed"), op_desc(op_type, attrs=attrs)]))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "no blocks"),
        (vi(2, 7), "no blocks"),
        (b"\x0a", r"ProgramDesc: truncated varint at byte 1"),
        (b"\x0a\x05abc", "length 5 past the end at byte 2"),
        (b"\xff" * 11, "varint longer than 10 bytes at byte 0"),
        (b"\x0b", "unsupported wire type 3"),
        (vi(1, 5), r"field 1 \(blocks\) has wire type 0"),
        (
            program_desc(block_desc(0, -1, [var_desc("x", 99, [1])])),
            r"block 0, var 0 \(x\): dense_tensor: unknown data type enum 99",
        ),
        (
            program_desc(block_desc(0, -1, [var_desc("x"), var_desc("x")])),
            "duplicate variable 'x'",
        ),
        (program_desc(vi(1, 0)), r"block 0: missing field 'parent_idx'"),
        (
            _op_attr("gru", attr("is_reverse", 6) + b"\x50"),
            r"block 0, op 1 \(gru\): attribute 'is_reverse': truncated varint at byte",
        ),
        (
            _op_attr("gru", attr("origin_mode", 6, ld(10, b"x"))),
            r"op 1 \(gru\): attribute 'origin_mode': field 10 \(b\) has wire type 2",
        ),
        (_op_attr("gru", attr("x", 99)), r"attribute 'x': unknown attribute type 99"),
        (_op_attr("gru", attr("x", 4, ld(7, b"\0" * 6))), "packed length 6 is not a multiple"),
        (_op_attr("gru", attr("x", 2, ld(5, b"\xff"))), "attribute 'x': invalid UTF-8"),
        (_op_attr("gru", attr("x", 16, ld(20, vi(1, 9)))), "unknown scalar type 9"),
        (_op_attr("gru", vi(2, 0)), r"op 1 \(gru\): attribute 0: missing field 'name'"),
        (program_desc(block_desc(0, -1, [], [ld(1, ld(1, "X"))])), "op 0: missing field 'type'"),
        (program_desc(block_desc(0, -1, [], [f32(3, 1.0)])), r"op 0: field 3 \(type\) has wire"),
        (program_desc(block_desc(0, -1, [ld(1, "v")])), r"var 0 \(v\): missing field 'type'"),
    ],
)
def test_malformed_programs(data, message):
    with pytest.raises(ModelFormatError, match=message):
        parse_program_desc(data)


def test_error_positions_are_file_offsets():
    data = _op_attr("gru", attr("is_reverse", 6) + b"\x50")
    # The key 0x50 (field 10, varint) is the attribute's last byte; its value is missing.
    value_at = data.index(b"is_reverse") + len("is_reverse") + 3
    with pytest.raises(ModelFormatError, match=f"at byte {value_at}$"):
        parse_program_desc(data)


@given(st.binary(max_size=300))
def test_random_bytes_raise_only_model_format_error(data):
    with contextlib.suppress(ModelFormatError):
        parse_program_desc(data)


@given(st.data())
def test_truncated_or_mutated_program_raises_only_model_format_error(data):
    program = bytearray(gru_program())
    cut = data.draw(st.integers(0, len(program)))
    for _ in range(data.draw(st.integers(0, 4))):
        program[data.draw(st.integers(0, len(program) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ModelFormatError):
        parse_program_desc(bytes(program[:cut]))


def test_reader_uses_neither_paddle_nor_protobuf_nor_pickle():
    package = Path(parse_program_desc.__code__.co_filename).parent
    allowed = {"__future__", "collections", "dataclasses", "typing", "struct", "math", "os"}
    allowed |= {"pathlib", "ml_dtypes", "numpy", "fusebridge"}
    for module in ("program_desc.py", "params.py"):
        tree = ast.parse((package / module).read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert {name.split(".")[0] for name in imported} <= allowed, module


# ---- programs saved by Paddle ----


def _build_program(paddle):
    """One legacy program with the ops fusebridge cares about plus a sub-block and parameters
    of several dtypes: (main, startup, feeds, fetches)."""
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        ids = paddle.static.data("ids", [-1, 1], "int64", lod_level=1)
        emb = paddle.static.nn.embedding(ids, size=[50, 6])
        proj = paddle.static.nn.fc(emb, 12)  # mul + elementwise_add
        block = main.global_block()
        weight = paddle.static.create_parameter([4, 12], "float32", name="gru_weight")
        bias = paddle.static.create_parameter([1, 12], "float32", name="gru_bias")
        # The work buffers must exist as variables or the op does not run.
        outs = {
            name: [block.create_var(name=name.lower(), dtype="float32")]
            for name in ("BatchGate", "BatchResetHiddenPrev", "BatchHidden")
        }
        hidden = block.create_var(name="hidden", dtype="float32", lod_level=1)
        outs["Hidden"] = [hidden]
        block.append_op(
            type="gru",
            inputs={"Input": [proj], "Weight": [weight], "Bias": [bias]},
            outputs=outs,
            attrs={
                "activation": "tanh",
                "gate_activation": "sigmoid",
                "is_reverse": True,
                "origin_mode": False,
            },
        )
        with warnings.catch_warnings():  # deprecated: it exists for legacy programs only
            warnings.simplefilter("ignore")
            pooled = paddle.static.nn.sequence_lod.sequence_pool(hidden, "max")
        prob = paddle.nn.functional.softmax(paddle.concat([pooled, pooled], axis=1))

        x = paddle.static.data("x", [-1, 6], "float32")
        y = paddle.scale(x, scale=0.3, bias=0.1, bias_after_scale=False)
        y = paddle.transpose(paddle.reshape(y, [-1, 2, 3]), [0, 2, 1])
        y = paddle.nn.functional.dropout(y, p=0.25, training=False)
        y = paddle.clip(y, -0.5, 0.75)
        # Persistable non-parameters of other dtypes, one of them 0-D.
        for name, shape, value, dtype in [
            ("g16", [3, 2], 1.5, "float16"),
            ("gbf", [3, 2], -2.5, "bfloat16"),
            ("g0", [], 7, "int64"),
        ]:
            g = paddle.static.create_global_var(shape, value, dtype, persistable=True, name=name)
            y = y + paddle.cast(g, "float32")
        y = paddle.static.setitem(paddle.reshape(y, [-1, 6]), (slice(None), slice(1, 5, 2)), 3.0)
        i, n = paddle.full([1], 0, "int64"), paddle.full([1], 3, "int64")
        _, z = paddle.static.nn.while_loop(
            lambda i, v: i < n, lambda i, v: [i + 1, v * 2.0], [i, y]
        )
    return main, startup, [ids, x], [prob, z]


# layout -> (path prefix or directory written, save_inference_model options)
LAYOUTS = {
    "combined": ("combined/model", {}),
    "combined-no-clip": ("combined-no-clip/model", {"clip_extra": False}),
    "combined-legacy-format": ("combined-legacy/model", {"legacy_format": True}),
    "separate": ("separate/model", {"separate_parameters": True}),
    "separate-no-clip": (
        "separate-no-clip/model",
        {"separate_parameters": True, "clip_extra": False},
    ),
}


def saved_models(tmp_path_factory) -> dict[str, tuple[Path, object, dict[str, np.ndarray]]]:
    """layout -> (path for read_paddle_model, the program Paddle loads back, the parameters Paddle
    loads), every layout saved once per session. Paddle's arrays are read before the next load
    overwrites its global scope (bfloat16 comes back from Paddle as uint16)."""
    return _saved_models(tmp_path_factory.getbasetemp() / "paddle_models")


@functools.cache
def _saved_models(root: Path) -> dict[str, tuple[Path, object, dict[str, np.ndarray]]]:
    paddle = paddle_or_skip()
    models = {}
    with legacy_static(paddle):
        main, startup, feeds, fetches = _build_program(paddle)
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        for layout, (prefix, options) in LAYOUTS.items():
            path = root / prefix
            paddle.static.save_inference_model(
                str(path), feeds, fetches, exe, program=main, **options
            )
            if options.get("separate_parameters"):
                path = path.parent  # __model__ and one file per parameter, as Paddle 1.x wrote
                program, _, _ = paddle.static.load_inference_model(
                    str(path), exe, model_filename="__model__"
                )
            else:
                program, _, _ = paddle.static.load_inference_model(str(path), exe)
            scope = paddle.static.global_scope()
            params = {
                var.name: np.array(scope.find_var(var.name).get_tensor())
                for var in program.list_vars()
                if var.persistable and int(var.desc.type()) == 7
            }
            models[layout] = (path, program, params)
    return models


@pytest.fixture(name="saved_model", params=list(LAYOUTS))
def saved_model_fixture(request, tmp_path_factory):
    return saved_models(tmp_path_factory)[request.param]


def _paddle_value(op, name):
    """An attribute as Paddle reports it, in the Python types parse_program_desc uses."""
    paddle = paddle_or_skip()
    kind = op.desc.attr_type(name)
    if kind == paddle.base.core.AttrType.BLOCK:
        return op._block_attr_id(name)
    if kind == paddle.base.core.AttrType.BLOCKS:
        return op._blocks_attr_ids(name)
    value = op.desc.attr(name)
    if kind == paddle.base.core.AttrType.SCALAR:
        return value.value()
    if kind == paddle.base.core.AttrType.SCALARS:
        return [s.value() for s in value]
    return value


def _typed(value):
    # Equality alone would let True == 1 and 1 == 1.0 pass.
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return (type(value).__name__, value)


@pytest.mark.paddle
def test_ops_and_attributes_match_paddle(saved_model):
    path, paddle_program, _ = saved_model
    paddle = paddle_or_skip()
    program, _ = read_paddle_model(path)
    assert len(program.blocks) == len(paddle_program.blocks) == 2
    types = [op.type for op in program.blocks[0].ops]
    assert types[0] == "feed" and types[-1] == "fetch"
    for wanted in ("lookup_table_v2", "mul", "gru", "concat", "softmax", "set_value", "while"):
        assert wanted in types
    legacy = program.version == 2004002  # legacy_format=True writes Paddle 2.4.2's version
    with legacy_static(paddle):
        for block, theirs in zip(program.blocks, paddle_program.blocks):
            assert (block.idx, block.parent_idx) == (theirs.idx, theirs.parent_idx)
            assert [op.type for op in block.ops] == [op.type for op in theirs.ops]
            for op, their in zip(block.ops, theirs.ops):
                assert op.inputs == {s: tuple(their.input(s)) for s in their.input_names}
                assert op.outputs == {s: tuple(their.output(s)) for s in their.output_names}
                # Paddle lists the extra (runtime) attributes of clip_extra=False files apart,
                # and upgrades what legacy_format=True wrote in the 2.4 way.
                upgraded = {"values"} if (op.type, legacy) == ("set_value", True) else set()
                assert set(their.attr_names) - set(op.attrs) == upgraded
                for name, value in op.attrs.items():
                    if their.desc.has_attr(name):
                        assert _typed(value) == _typed(_paddle_value(their, name)), (op.type, name)
    gru = next(op for op in program.blocks[0].ops if op.type == "gru")
    assert gru.attrs["is_reverse"] is True and gru.attrs["activation"] == "tanh"
    assert gru.inputs["H0"] == ()
    while_op = next(op for op in program.blocks[0].ops if op.type == "while")
    assert while_op.attrs["sub_block"] == 1
    set_value = next(op for op in program.blocks[0].ops if op.type == "set_value")
    if legacy:
        assert set_value.attrs["fp64_values"] == [3.0] and "values" not in set_value.attrs
    else:
        assert set_value.attrs["values"] == [3.0]
        assert set_value.attrs["steps"] == [2]


@pytest.mark.paddle
def test_variables_match_paddle(saved_model):
    path, paddle_program, _ = saved_model
    program, _ = read_paddle_model(path)
    codes = {dtype: code for code, dtype in DTYPES.items()}
    for block, theirs in zip(program.blocks, paddle_program.blocks):
        assert set(block.vars) == set(theirs.vars)
        for name, var in block.vars.items():
            their = theirs.vars[name]
            assert (var.type, var.persistable) == (int(their.desc.type()), their.persistable)
            if var.type == 7:
                assert codes[var.dtype] == int(their.desc.dtype())
                assert var.shape == tuple(their.shape)
                assert var.lod_level == their.lod_level
            else:
                assert var.dtype is None
    variables = program.blocks[0].vars
    assert variables["ids"].lod_level == 1 and variables["ids"].shape == (-1, 1)
    assert variables["gbf"].dtype == np.dtype(ml_dtypes.bfloat16)
    assert variables["g0"].shape == ()


@pytest.mark.paddle
def test_truncated_paddle_program(tmp_path_factory):
    path, _, _ = saved_models(tmp_path_factory)["combined-no-clip"]
    data = Path(f"{path}.pdmodel").read_bytes()
    # Cuts between top-level fields leave a valid (shorter) program; every other cut must fail.
    boundaries, pos = {0, len(data)}, 0
    while pos < len(data):
        pos += 1  # each top-level field has a one-byte key and is length-delimited
        length, shift = 0, 0
        while data[pos] & 0x80:
            length, pos, shift = length | (data[pos] & 0x7F) << shift, pos + 1, shift + 7
        length, pos = length | data[pos] << shift, pos + 1
        pos += length
        boundaries.add(pos)
    for cut in range(1, len(data), 97):
        if cut not in boundaries:
            with pytest.raises(ModelFormatError, match="ProgramDesc"):
                parse_program_desc(data[:cut])


@pytest.mark.paddle
@given(st.data())
def test_mutated_paddle_program_raises_only_model_format_error(tmp_path_factory, data):
    path, _, _ = saved_models(tmp_path_factory)["combined"]
    program = bytearray(Path(f"{path}.pdmodel").read_bytes())
    for _ in range(data.draw(st.integers(1, 3))):
        program[data.draw(st.integers(0, len(program) - 1))] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ModelFormatError):
        parse_program_desc(bytes(program))
