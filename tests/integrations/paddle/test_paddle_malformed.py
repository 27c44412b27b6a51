"""Malformed Paddle models, one class at a time: each must fail with a fusebridge error that
names the model, the op (type and index), the variable or attribute, the value and what was
expected. The bundled sentiment model is edited (paddle_program_writer.py) or small programs
are written by hand (test_program_desc's encoder); Paddle is the oracle for what ids mean."""

from __future__ import annotations

import dataclasses
import json
import math
import re
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from helpers.paddle_oracle import legacy_static, paddle_or_skip
from helpers.paddle_program_writer import write_program
from helpers.protobuf_wire import f32, ld, vi
from helpers.python_under_test import run_python
from test_params import record
from test_program_desc import (
    attr,
    block_desc,
    gru_program,
    op_desc,
    program_desc,
    tensor_desc,
    var_desc,
)

import fusebridge as fb
from fusebridge.errors import ModelFormatError, UnsupportedOpError
from fusebridge.integrations.paddle.params import read_paddle_model
from fusebridge.integrations.paddle.program_desc import OpDesc, ProgramDesc, parse_program_desc
from fusebridge.models import assets

SENTIMENT = assets.path("sentiment")
# The sentiment model's ops: feed, lookup_table_v2, mul, elementwise_add, gru, sequence_pool,
# dropout, mul, elementwise_add, softmax, fetch.
OP_INDEX = {"feed": 0, "lookup_table_v2": 1, "mul": 2, "gru": 4, "dropout": 6, "softmax": 9}
FETCH = 10


def _where(op_type: str, index: int | None = None) -> str:
    """How an error names an op of the edited model (the model directory comes before it)."""
    index = OP_INDEX[op_type] if index is None else index
    return re.escape(f"Paddle {op_type} node #{index} of block 0: ")


def _sentiment(tmp_path: Path, edit: Callable[[ProgramDesc], ProgramDesc]) -> Path:
    """A copy of the sentiment model (its parameters linked) with an edited program."""
    directory = tmp_path / "sentiment"
    directory.mkdir(parents=True)
    for name in ("inference.pdiparams", "example_words.npy", "example_lengths.txt"):
        (directory / name).symlink_to(SENTIMENT / name)
    program, _ = read_paddle_model(SENTIMENT)
    (directory / "inference.pdmodel").write_bytes(write_program(edit(program)))
    return directory


def _ops(program: ProgramDesc, ops: list[OpDesc], **block_changes) -> ProgramDesc:
    block = dataclasses.replace(program.blocks[0], ops=tuple(ops), **block_changes)
    return dataclasses.replace(program, blocks=(block,))


def _edit_op(index: int, **changes) -> Callable[[ProgramDesc], ProgramDesc]:
    def edit(program: ProgramDesc) -> ProgramDesc:
        ops = list(program.blocks[0].ops)
        ops[index] = dataclasses.replace(ops[index], **changes)
        return _ops(program, ops)

    return edit


def _set_attr(op_type: str, name: str, kind: int, value: object) -> Callable:
    """An edit giving the sentiment model's op `op_type` attribute name = value of AttrType kind."""

    def edit(program: ProgramDesc) -> ProgramDesc:
        op = program.blocks[0].ops[OP_INDEX[op_type]]
        attrs, types = {**op.attrs, name: value}, {**op.attr_types, name: kind}
        return _edit_op(OP_INDEX[op_type], attrs=attrs, attr_types=types)(program)

    return edit


def _load_fails(tmp_path, edit, error: type, message: str) -> None:
    directory = _sentiment(tmp_path, edit)
    with pytest.raises(error, match=message) as caught:
        fb.load(directory)
    assert str(directory) in str(caught.value)  # the model is named


# ---- 1. ops, slots and variables ----


def test_a_fetch_without_x(tmp_path):
    edit = _edit_op(FETCH, inputs={})
    message = _where("fetch", FETCH) + r"input X must name one variable, got \[\]"
    _load_fails(tmp_path, edit, ModelFormatError, message)


def test_a_feed_with_an_empty_out(tmp_path):
    edit = _edit_op(0, outputs={"Out": ()})
    _load_fails(tmp_path, edit, ModelFormatError, _where("feed") + "output Out must name one")


@pytest.mark.parametrize(
    ("kind", "value", "declared"),
    [(2, "0", "STRING"), (1, 0.0, "FLOAT"), (3, [0], "INTS"), (6, False, "BOOLEAN")],
)
def test_a_feed_column_of_another_type(tmp_path, kind, value, declared):
    message = _where("feed") + re.escape(
        f"attribute 'col' = {value!r} is declared {declared}; expected INT or LONG"
    )
    _load_fails(tmp_path, _set_attr("feed", "col", kind, value), ModelFormatError, message)


def test_feed_columns_once_each_and_not_negative(tmp_path):
    def second_feed(program: ProgramDesc) -> ProgramDesc:
        ops = list(program.blocks[0].ops)
        return _ops(program, [ops[0], *ops])

    message = _where("feed", 1) + re.escape("attribute col = 0 is taken by op 0 already")
    _load_fails(tmp_path / "twice", second_feed, ModelFormatError, message)
    message = _where("feed") + re.escape("attribute col = -1 is negative")
    _load_fails(tmp_path, _set_attr("feed", "col", 0, -1), ModelFormatError, message)


def test_a_fetch_of_a_variable_nothing_writes(tmp_path):
    edit = _edit_op(FETCH, inputs={"X": ("ghost",)})
    message = _where("fetch", FETCH) + "reads variable 'ghost', which no earlier op writes"
    _load_fails(tmp_path, edit, ModelFormatError, message)


def test_an_op_reading_a_variable_no_op_writes(tmp_path):
    edit = _edit_op(OP_INDEX["dropout"], inputs={"X": ("fc_9.tmp_1",)})
    message = _where("dropout") + "reads variable 'fc_9.tmp_1', which no earlier op writes"
    _load_fails(tmp_path, edit, ModelFormatError, message)


def test_a_variable_without_var_desc(tmp_path):
    def without(program: ProgramDesc) -> ProgramDesc:
        variables = {k: v for k, v in program.blocks[0].vars.items() if k != "fc_0.tmp_0"}
        return _ops(program, list(program.blocks[0].ops), vars=variables)

    message = _where("elementwise_add", 3) + "variable 'fc_0.tmp_0' has no VarDesc"
    _load_fails(tmp_path, without, ModelFormatError, message)


def test_two_variables_in_a_one_variable_slot(tmp_path):
    edit = _edit_op(OP_INDEX["gru"], inputs={**_gru_inputs(), "Bias": ("gru_0.b_0", "fc_0.b_0")})
    message = _where("gru") + re.escape("input Bias must name at most one variable")
    _load_fails(tmp_path, edit, ModelFormatError, message)


def _gru_inputs() -> dict:
    program, _ = read_paddle_model(SENTIMENT)
    return dict(program.blocks[0].ops[OP_INDEX["gru"]].inputs)


# ---- 1. the program's structure (parse_program_desc) ----


def _block_attr(value: int, kind: int = 8) -> bytes:
    field = 12 if kind == 8 else 14
    return attr("sub_block", kind, vi(field, value))


@pytest.mark.parametrize(
    ("blocks", "message"),
    [
        (
            [block_desc(0, -1, [], [op_desc("while", attrs=[_block_attr(5)])])],
            r"block 0, op 0 \(while\): attribute 'sub_block' = 5: block index outside the "
            r"program's 1 blocks \[0, 1\)",
        ),
        (
            [block_desc(0, -1, [], [op_desc("while", attrs=[_block_attr(-1)])])],
            "'sub_block' = -1: block index outside",
        ),
        (
            [block_desc(0, -1, [], [op_desc("pylayer", attrs=[_block_attr(2, 10)])])],
            r"'sub_block' = \[2\]: block index outside the program's 1 blocks",
        ),
        ([block_desc(3, -1)], "block 0: idx 3, expected its position 0"),
        ([block_desc(0, 0)], "block 0: parent_idx 0, expected -1"),
        ([block_desc(0, -1), block_desc(1, 1)], r"block 1: parent_idx 1, expected a block in"),
        (
            [block_desc(0, -1, [], [op_desc("t", attrs=[attr("a", 0), attr("a", 0)])])],
            r"op 0 \(t\): attribute 'a': duplicate attribute",
        ),
        (
            [block_desc(0, -1, [], [op_desc("t", {"X": ["a"]}) + ld(1, ld(1, "X"))])],
            r"op 0 \(t\): inputs: duplicate slot 'X'",
        ),
        (
            [block_desc(0, -1, [var_desc("x", 5, [2**40, 2**40])])],
            r"var 0 \(x\): dense_tensor: dims \[1099511627776, 1099511627776\]: more than "
            r"2\*\*63 - 1 elements",
        ),
        ([block_desc(0, -1, [var_desc("x", 5, [-2, 3])])], r"dims \[-2, 3\]: a size below -1"),
        (
            [block_desc(0, -1, [var_desc("x", 5, [3], lod_level=-1)])],
            r"var 0 \(x\): dense_tensor: negative lod_level -1",
        ),
    ],
)
def test_malformed_program_structure(blocks, message):
    with pytest.raises(ModelFormatError, match=message):
        parse_program_desc(program_desc(*blocks))


def test_a_model_file_error_names_the_file(tmp_path):
    directory = tmp_path / "m"
    directory.mkdir()
    (directory / "__model__").write_bytes(program_desc(block_desc(0, -1, [var_desc("x", 99)])))
    with pytest.raises(ModelFormatError, match=re.escape(f"{directory / '__model__'}: Program")):
        fb.load(directory)


# ---- 2. attribute types and values ----


@pytest.mark.parametrize(
    ("op_type", "name", "kind", "value", "expected"),
    [
        ("gru", "origin_mode", 2, "False", "BOOLEAN"),  # bool('False') would be True
        ("gru", "is_reverse", 0, 1, "BOOLEAN"),
        ("gru", "activation", 3, [1], "STRING"),
        ("dropout", "is_test", 2, "True", "BOOLEAN"),
        ("dropout", "dropout_prob", 2, "0.5", "FLOAT or FLOAT64"),
        ("softmax", "axis", 3, [1, 2], "INT or LONG"),
        ("mul", "x_num_col_dims", 1, 1.0, "INT or LONG"),
        ("lookup_table_v2", "padding_idx", 6, True, "INT or LONG"),
    ],
)
def test_attributes_must_have_their_declared_type(tmp_path, op_type, name, kind, value, expected):
    declared = {0: "INT", 1: "FLOAT", 2: "STRING", 3: "INTS", 6: "BOOLEAN"}[kind]
    message = _where(op_type) + re.escape(
        f"attribute {name!r} = {value!r} is declared {declared}; expected {expected}"
    )
    _load_fails(tmp_path, _set_attr(op_type, name, kind, value), ModelFormatError, message)


@pytest.mark.parametrize("p", [1.5, -3.0, math.nan, math.inf, -math.inf])
def test_dropout_prob_outside_zero_one(tmp_path, p):
    message = _where("dropout") + re.escape(f"attribute dropout_prob must lie in [0, 1], got {p}")
    _load_fails(tmp_path, _set_attr("dropout", "dropout_prob", 1, p), ModelFormatError, message)


@pytest.mark.parametrize("p", [0.0, 1.0])
def test_dropout_prob_bounds_load(tmp_path, p):
    fb.load(_sentiment(tmp_path, _set_attr("dropout", "dropout_prob", 1, p)))


@pytest.mark.parametrize(
    ("op_type", "name", "value", "expected"),
    [
        ("dropout", "dropout_implementation", "upscale", "'downgrade_in_infer', 'upscale_in_tr"),
        # Paddle's Python API spelling: Paddle's own op checker refuses it in a program too.
        (
            "dropout",
            "dropout_implementation",
            "downscale_in_infer",
            "'downgrade_in_infer', 'upscale_in_tr",
        ),
        ("gru", "gate_activation", "gelu", "'sigmoid', 'tanh', 'relu', 'identity'"),
        ("gru", "activation", "", "'sigmoid', 'tanh', 'relu', 'identity'"),
    ],
)
def test_names_outside_the_choices(tmp_path, op_type, name, value, expected):
    message = _where(op_type) + re.escape(
        f"attribute {name} = {value!r} is not supported; expected one of [{expected}"
    )
    _load_fails(tmp_path, _set_attr(op_type, name, 2, value), UnsupportedOpError, message)


@pytest.mark.parametrize(
    ("op_type", "name", "value", "message"),
    [
        ("softmax", "axis", 2, "attribute axis = 2 is outside [-2, 2) for an input of rank 2"),
        ("softmax", "axis", -3, "attribute axis = -3 is outside [-2, 2)"),
        ("mul", "x_num_col_dims", 3, "attribute x_num_col_dims = 3 must lie in [1, 3) for 'emb"),
        ("mul", "y_num_col_dims", 0, "attribute y_num_col_dims = 0 must lie in [1, 2) for 'fc_0"),
    ],
)
def test_axes_out_of_range(tmp_path, op_type, name, value, message):
    edit = _set_attr(op_type, name, 0, value)
    _load_fails(tmp_path, edit, ModelFormatError, _where(op_type) + re.escape(message))


def _one_op(tmp_path: Path, op_type: str, attrs: list[bytes], x_dtype: int = 5) -> Path:
    """A model of feed x [-1, 6] -> op_type(X=x) -> fetch y, without parameters."""
    variables = [
        var_desc("feed", var_type=9, persistable=True),
        var_desc("fetch", var_type=10, persistable=True),
        var_desc("x", x_dtype, [-1, 6]),
        var_desc("y", 5, [-1]),
    ]
    col = [attr("col", 0, vi(3, 0))]
    ops = [
        op_desc("feed", {"X": ["feed"]}, {"Out": ["x"]}, col),
        op_desc(op_type, {"X": ["x"]}, {"Out": ["y"]}, attrs),
        op_desc("fetch", {"X": ["y"]}, {"Out": ["fetch"]}, col),
    ]
    directory = tmp_path / op_type
    directory.mkdir()
    (directory / "__model__").write_bytes(program_desc(block_desc(0, -1, variables, ops)))
    return directory


def _ints(name: str, values: list[int], kind: int = 3) -> bytes:
    return attr(name, kind, *(vi(6 if kind == 3 else 15, v) for v in values))


@pytest.mark.parametrize(
    ("op_type", "attrs", "error", "message"),
    [
        (
            "transpose2",
            [_ints("axis", [0, 0])],
            ModelFormatError,
            "attribute axis = [0, 0] is not a permutation of the 2 axes of 'x'",
        ),
        (
            "reshape2",
            [_ints("shape", [-1, -1])],
            ModelFormatError,
            "attribute shape = [-1, -1]: entries must be sizes, 0 or a single -1",
        ),
        (
            "reshape2",
            [_ints("shape", [-3, 2])],
            ModelFormatError,
            "attribute shape = [-3, 2]: entries",
        ),
        (
            "arg_max",
            [attr("axis", 9, vi(13, 5))],
            ModelFormatError,
            "attribute axis = 5 is outside [-2, 2)",
        ),
        (
            "concat",
            [attr("axis", 0, vi(3, -3))],
            ModelFormatError,
            "attribute axis = -3 is outside",
        ),
        (
            "lod_reset",
            [_ints("target_lod", [1, 3])],
            ModelFormatError,
            "attribute target_lod = [1, 3] must be offsets: 0 first, never decreasing",
        ),
        (
            "lod_reset",
            [_ints("target_lod", [0, 5, 2])],
            ModelFormatError,
            "attribute target_lod = [0, 5, 2] must be",
        ),
        (
            "cast",
            [attr("out_dtype", 0, vi(3, 99))],
            UnsupportedOpError,
            "attribute out_dtype = 99 is not supported; expected one of [0, 1,",
        ),
        (
            "scale",
            [attr("bias_after_scale", 2, ld(5, "False"))],
            ModelFormatError,
            "attribute 'bias_after_scale' = 'False' is declared STRING; expected BOOLEAN",
        ),
        (
            "fill_constant",
            [attr("dtype", 0, vi(3, 3)), attr("value", 1, f32(4, math.nan))],
            ModelFormatError,
            "value nan does not fit the integer dtype int64",
        ),
        (
            "fill_constant",
            [attr("dtype", 0, vi(3, 5)), attr("str_value", 2, ld(5, "1,5"))],
            ModelFormatError,
            "attribute str_value = '1,5' is not a number",
        ),
        (
            "fill_constant",
            [attr("dtype", 0, vi(3, 5)), _ints("shape", [2**40, 2**40], 11)],
            ModelFormatError,
            "shape [1099511627776, 1099511627776] has more than 2**63 - 1 elements",
        ),
    ],
)
def test_attribute_values_of_hand_made_programs(tmp_path, op_type, attrs, error, message):
    directory = _one_op(tmp_path, op_type, attrs)
    where = f"paddle model {directory}: Paddle {op_type} node #1 of block 0: {message}"
    with pytest.raises(error, match=re.escape(where)):
        fb.load(directory)


def test_a_scale_that_an_integer_input_cannot_hold(tmp_path):
    attrs = [attr("bias", 1, f32(4, math.inf))]
    directory = _one_op(tmp_path, "scale", attrs, x_dtype=3)  # int64 X
    message = "Paddle scale node #1 of block 0: bias inf does not fit the integer dtype int64"
    with pytest.raises(ModelFormatError, match=re.escape(message)):
        fb.load(directory)


def test_a_large_fill_constant_is_made_at_run_time_not_at_load(tmp_path):
    # 2**30 float32 (4 GiB) declared in a few bytes: load keeps a shape, not the data.
    attrs = [attr("dtype", 0, vi(3, 5)), _ints("shape", [2**15, 2**15], 11)]
    model = fb.load(_one_op(tmp_path, "fill_constant", attrs))
    assert all(math.prod(v.shape) <= 2 for v in model.graph.initializers.values())
    assert "ConstantOfShape" in [n.op_type for n in model.graph]


# ---- 3. ids outside the table ----


def _sentiment_feeds(ids: np.ndarray) -> dict:
    return {"words": fb.LoDTensor(ids, lengths=[len(ids)])}


@pytest.mark.parametrize("bad", [-1, -1000, 1000, 2**40])
def test_ids_outside_the_table_fail_at_run_time(bad):
    ids = np.arange(6, dtype=np.int64).reshape(6, 1)
    model = fb.load(SENTIMENT)
    optimized, _ = fb.optimize(model)
    for graph in (model, optimized):
        session = fb.Session(graph)
        session.run(_sentiment_feeds(ids))
        ids[3] = bad
        with pytest.raises(fb.ExecutionError) as caught:
            session.run(_sentiment_feeds(ids))
        ids[3] = 3
        message = str(caught.value)
        assert "lookup_table_v2: every id in 'words' must lie in [0, 1000)" in message
        shown = bad - 1000 if bad < 0 else bad  # ONNX Runtime reports the index it was given
        assert f"idx={shown} must be within" in message


def test_ids_outside_the_table_fail_in_the_portable_export(tmp_path):
    path = tmp_path / "sentiment.onnx"
    fb.save_onnx(fb.load(SENTIMENT), path, portable=True)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    plain = ort.InferenceSession(path, options)
    ids = np.arange(5, dtype=np.int64).reshape(5, 1)
    offsets = np.array([0, 5])
    good = plain.run(None, {"words": ids, "words.offsets": offsets})[0]
    np.testing.assert_allclose(
        good, fb.Session(fb.load(SENTIMENT)).run(_sentiment_feeds(ids))["softmax_0.tmp_0"]
    )
    for bad in (-1, 1000):
        ids[2] = bad
        with pytest.raises(Exception, match=r"every id in 'words' must lie in \[0, 1000\)"):
            plain.run(None, {"words": ids, "words.offsets": offsets})


def test_the_padding_row_reads_zeros_and_the_others_do_not(tmp_path):
    # sentiment's padding_idx is 0: id 0 gives a zero row, the table's row 0 is not zero.
    model = fb.load(SENTIMENT)
    _, params = read_paddle_model(SENTIMENT)
    assert np.abs(params["word_emb"][0]).sum() > 0
    gather = next(n for n in model.graph if n.op_type == "Gather")
    table = gather.inputs[0].const_value.numpy()
    assert not table[0].any()
    np.testing.assert_array_equal(table[1:], params["word_emb"][1:])


@pytest.mark.paddle
@pytest.mark.parametrize(
    ("op_type", "bad", "paddle_raises"),
    [
        ("lookup_table", -1, True),
        ("lookup_table", 7, True),
        ("lookup_table_v2", 7, True),
        # Paddle 3.3.1's CPU kernel skips its check for the id -1 when padding_idx is -1 and
        # reads the row before the table; its message for the other ids says what it means.
        ("lookup_table_v2", -1, False),
    ],
)
def test_ids_outside_the_table_as_paddle(tmp_path, op_type, bad, paddle_raises):
    paddle = paddle_or_skip()
    prefix = tmp_path / "model"
    shape = [4, 1] if op_type == "lookup_table" else [4]
    ids = np.array([0, 3, 6, 2], np.int64).reshape(shape)
    with legacy_static(paddle):
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("ids", shape, "int64")
            w = paddle.static.create_parameter([7, 3], "float32", name="w")
            out = main.global_block().create_var(name="out", dtype="float32")
            main.global_block().append_op(
                type=op_type,
                inputs={"Ids": [x], "W": [w]},
                outputs={"Out": [out]},
                attrs={"padding_idx": -1},
            )
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        paddle.static.save_inference_model(str(prefix), [x], [out], exe, program=main)
        (expected,) = exe.run(main, feed={"ids": ids}, fetch_list=[out])
        bad_ids = ids.copy()
        bad_ids[1] = bad
        if paddle_raises:
            with pytest.raises(Exception, match=f"expected >= 0 and < 7, but got {bad}"):
                exe.run(main, feed={"ids": bad_ids}, fetch_list=[out])
    session = fb.Session(fb.load(prefix))
    np.testing.assert_array_equal(session.run({"ids": ids})["out"], expected)
    with pytest.raises(fb.ExecutionError, match=re.escape("every id in 'ids' must lie in [0, 7)")):
        session.run({"ids": bad_ids})


# ---- 4. file sizes: nothing read or allocated beyond what a header declares ----

_BOUNDED = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))
    from fusebridge.errors import ModelFormatError
    from fusebridge.integrations.paddle.params import read_paddle_model

    def rchar():
        with open("/proc/self/io") as f:
            return int(next(line for line in f if line.startswith("rchar")).split()[1])

    results = {}
    for path in sys.argv[1:]:
        before = rchar()
        try:
            read_paddle_model(path)
            results[path] = ["loaded", rchar() - before]
        except ModelFormatError as e:
            results[path] = [str(e), rchar() - before]
    print(json.dumps(results))
    """
)


def _sparse(path: Path, data: bytes, size: int) -> None:
    """data, then zeros up to size bytes that take no disk (a sparse file)."""
    with path.open("wb") as f:
        f.write(data)
        f.truncate(size)


@pytest.mark.skipif(not Path("/proc/self/io").exists(), reason="counts bytes read in /proc")
def test_huge_files_are_not_read_whole(tmp_path):
    six_gib = 6 << 30
    combined = tmp_path / "combined"
    combined.mkdir()
    (combined / "inference.pdmodel").symlink_to(SENTIMENT / "inference.pdmodel")
    params = (SENTIMENT / "inference.pdiparams").read_bytes()
    _sparse(combined / "inference.pdiparams", params, six_gib)

    separate = tmp_path / "separate"  # one file per parameter: w [3, 6]
    separate.mkdir()
    (separate / "__model__").write_bytes(gru_program())
    w = record(np.ones((3, 6), np.float32))
    _sparse(separate / "w", w, six_gib)

    declared = tmp_path / "declared"  # a small file whose record declares 2**40 floats
    declared.mkdir()
    unknown = var_desc("w", 5, [-1], persistable=True)  # any size is the declared one
    (declared / "__model__").write_bytes(program_desc(block_desc(0, -1, [unknown])))
    (declared / "w").write_bytes(record(np.ones(0, np.float32), desc=tensor_desc(5, [2**40])))

    big_model = tmp_path / "big_model"
    big_model.mkdir()
    _sparse(big_model / "__model__", gru_program(), 3 << 30)

    big_pir = tmp_path / "big_pir"
    big_pir.mkdir()
    _sparse(big_pir / "model.json", b'{"base_code": {"magic": "pir", "version": 4}', 2 << 30)

    dirs = [combined, separate, declared, big_model, big_pir]
    run = run_python(_BOUNDED, *map(str, dirs))
    assert run.returncode == 0, run.stderr
    results = json.loads(run.stdout)
    expected = {
        combined: f"inference.pdiparams: {six_gib - len(params)} bytes left at byte {len(params)}",
        separate: f"{separate / 'w'}): {six_gib - len(w)} bytes left at byte {len(w)}",
        declared: "data of shape (1099511627776,) float32 of 4398046511104 bytes at byte",
        big_model: f"{3 << 30} bytes; a ProgramDesc is read up to {(1 << 31) - 1}",
        big_pir: f"{2 << 30} bytes; a PIR program is read up to {1 << 30}",
    }
    for directory, message in expected.items():
        error, read = results[str(directory)]
        assert message in error, error
        assert read < 16 << 20, (directory, read)  # the parameters, not the gigabytes after


def test_what_is_not_a_regular_file_is_no_model_file(tmp_path):
    (tmp_path / "inference.pdmodel").mkdir()  # read, it would raise IsADirectoryError
    with pytest.raises(ModelFormatError, match=r"expected one model file .* found nothing"):
        fb.load(tmp_path)
    (tmp_path / "__model__").write_bytes(gru_program())
    (tmp_path / "w").mkdir()  # the parameter's file
    with pytest.raises(ModelFormatError, match=re.escape(f"parameter 'w': no file {tmp_path}")):
        fb.load(tmp_path)


# ---- nothing grows faster than the file ----


def test_many_fetches_load_in_linear_time(tmp_path):
    # 20000 fetch ops of one variable (a 0.9 MB file): each fetch is an output of its own. A
    # search of the graph per fetch, or of a free name per fetch, took minutes.
    variables = [
        var_desc("feed", var_type=9, persistable=True),
        var_desc("fetch", var_type=10, persistable=True),
        var_desc("x", 5, [-1, 6]),
        var_desc("y", 5, [-1, 6]),
    ]
    feed = op_desc("feed", {"X": ["feed"]}, {"Out": ["x"]}, [attr("col", 0, vi(3, 0))])
    fetches = [
        op_desc("fetch", {"X": ["y"]}, {"Out": ["fetch"]}, [attr("col", 0, vi(3, k))])
        for k in range(20000)
    ]
    ops = [feed, op_desc("relu", {"X": ["x"]}, {"Out": ["y"]}), *fetches]
    (tmp_path / "__model__").write_bytes(program_desc(block_desc(0, -1, variables, ops)))
    start = time.perf_counter()
    model = fb.load(tmp_path)
    assert time.perf_counter() - start < 30  # about 1 s; quadratic, over a minute
    names = [v.name for v in model.graph.outputs]
    assert names[:3] == ["y", "y@1", "y@2"] and len(set(names)) == 20000


def test_unique_names_with_counters_are_the_smallest_free_ones():
    from fusebridge.conventions import unique_name

    taken, counted, last = {"a@2"}, {"a@2"}, {}
    plain = [unique_name(h, taken) for h in ["a", "a", "a", "b", "a", "a@1", "a"]]
    fast = [unique_name(h, counted, last) for h in ["a", "a", "a", "b", "a", "a@1", "a"]]
    assert fast == plain == ["a", "a@1", "a@3", "b", "a@4", "a@1@1", "a@5"]


def test_bench_names_a_model_it_cannot_feed(tmp_path):
    from fusebridge.bench.paddle_comparison import compare_with_paddle

    directory = _one_op(tmp_path, "relu", [])  # one input, no LoD, no embedding
    message = f"bench {directory}: the benchmark feeds random sentences of word ids"
    with pytest.raises(UnsupportedOpError, match=re.escape(message)) as caught:
        compare_with_paddle(directory, peers=())
    assert "has inputs ['x'] and no embedding lookup" in str(caught.value)
