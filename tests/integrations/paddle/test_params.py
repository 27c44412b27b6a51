"""Parameter records and model files: hand-made records (no paddle), then models saved by Paddle
in both parameter layouts, read bit for bit as Paddle reads them, and corrupted copies of them."""

from __future__ import annotations

import hashlib
import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from test_program_desc import (
    block_desc,
    program_desc,
    saved_model_fixture,  # noqa: F401  (fixture `saved_model`: one per layout)
    saved_models,
    tensor_desc,
    var_desc,
)

from fusebridge.errors import ModelFormatError
from fusebridge.integrations.paddle.params import (
    find_model_files,
    load_parameters,
    read_paddle_model,
    read_tensor_record,
)
from fusebridge.integrations.paddle.program_desc import DTYPES, parse_program_desc

CODES = {dtype: code for code, dtype in DTYPES.items()}


def record(array, lod=(), *, lod_version=0, tensor_version=0, desc=None) -> bytes:
    """One parameter record as Paddle's save op writes it."""
    array = np.asarray(array)
    desc = tensor_desc(CODES[array.dtype], array.shape) if desc is None else desc
    out = struct.pack("<IQ", lod_version, len(lod))
    for level in lod:
        out += struct.pack("<Q", 8 * len(level)) + np.asarray(level, "<u8").tobytes()
    return out + struct.pack("<Ii", tensor_version, len(desc)) + desc + array.tobytes()


# ---- records ----


@pytest.mark.parametrize("dtype", list(DTYPES.values()), ids=str)
@pytest.mark.parametrize("shape", [(2, 3), (), (0, 4), (1, 1, 5)], ids=str)
def test_record_round_trip(dtype, shape):
    rng = np.random.default_rng(0)
    array = rng.integers(0, 256, size=(*shape, dtype.itemsize), dtype=np.uint8).view(dtype)
    array = array.reshape(shape)
    data = b"junk" + record(array) + b"more"
    got, lod, end = read_tensor_record(data, 4, "w")
    assert (got.dtype, got.shape, lod, end) == (dtype, shape, [], len(data) - 4)
    assert got.tobytes() == array.tobytes()


def test_record_with_lod():
    array = np.arange(12, dtype=np.float32).reshape(6, 2)
    data = record(array, [[0, 2, 3], [0, 1, 4, 6]])
    got, lod, end = read_tensor_record(memoryview(data), 0, "x")
    assert lod == [[0, 2, 3], [0, 1, 4, 6]] and end == len(data)
    np.testing.assert_array_equal(got, array)


def test_unaligned_record_is_copied_aligned_and_read_only():
    array = np.arange(6, dtype=np.float64)
    got, _, _ = read_tensor_record(b"x" + record(array), 1, "x")
    assert got.flags.aligned and not got.flags.writeable
    np.testing.assert_array_equal(got, array)


GOOD = np.ones((2, 3), np.float32)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "w: truncated LoD tensor version at byte 0"),
        (record(GOOD, lod_version=1), "w: LoD tensor version 1 at byte 0"),
        (record(GOOD, tensor_version=2), "w: tensor version 2 at byte 12"),
        (struct.pack("<IQ", 0, 1) + struct.pack("<Q", 12), "LoD level 0 size 12 .* multiple of 8"),
        (struct.pack("<IQ", 0, 2**60), "truncated LoD level 0 size"),
        (struct.pack("<IQ", 0, 1) + struct.pack("<Q", 64), r"LoD level 0 .* \(64 bytes missing"),
        (struct.pack("<IQIi", 0, 0, 0, -1), "negative TensorDesc size -1"),
        (struct.pack("<IQIi", 0, 0, 0, 9) + b"\x08", "TensorDesc of 9 bytes .* runs past the end"),
        (record(GOOD, desc=tensor_desc(99, [2, 3])), "w: TensorDesc: unknown data type enum 99"),
        (record(GOOD, desc=tensor_desc(5, [2, -3])), r"negative dimension in shape \(2, -3\)"),
        (record(GOOD, desc=tensor_desc(5, [2, 4])), r"data of shape \(2, 4\) .*\(8 bytes missing"),
        (record(GOOD, desc=b"\x10\x02"), "w: TensorDesc: missing field 'data_type'"),
        (record(GOOD, desc=b"\x08"), "w: TensorDesc: truncated varint at byte 21"),
        (record(GOOD[:0], desc=tensor_desc(5, [0, 2**62])), "shape"),
        (record(GOOD[:0], desc=tensor_desc(5, [0] * 70)), "shape"),
    ],
)
def test_malformed_records(data, message):
    with pytest.raises(ModelFormatError, match=message):
        read_tensor_record(data, 0, "w")


# ---- finding the files ----


def _touch(directory: Path, *names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_bytes(b"")
    return directory


def test_find_model_files(tmp_path):
    d = _touch(tmp_path / "legacy", "__model__", "fc_0.w_0")
    assert find_model_files(d) == (d / "__model__", None)
    d = _touch(tmp_path / "legacy-combined", "__model__", "__params__")
    assert find_model_files(str(d)) == (d / "__model__", d / "__params__")
    d = _touch(tmp_path / "model-params", "__model__", "params")
    assert find_model_files(d) == (d / "__model__", d / "params")
    d = _touch(tmp_path / "v2", "inference.v2.pdmodel", "inference.v2.pdiparams", "x.txt")
    expected = (d / "inference.v2.pdmodel", d / "inference.v2.pdiparams")
    assert find_model_files(d) == expected
    assert find_model_files(d / "inference.v2") == expected  # save_inference_model's prefix
    assert find_model_files(d / "inference.v2.pdmodel") == expected
    d = _touch(tmp_path / "no-params", "m.pdmodel")
    assert find_model_files(d / "m") == (d / "m.pdmodel", None)


@pytest.mark.parametrize(
    ("names", "message"),
    [
        ((), "expected one model file .* found nothing"),
        (("a.pdmodel", "b.pdmodel"), "found a.pdmodel, b.pdmodel"),
        (("__model__", "a.pdmodel"), "found a.pdmodel, __model__"),
        (("a.pdmodel", "a.pdiparams", "__params__"), "several .*: a.pdiparams, __params__"),
    ],
)
def test_find_model_files_ambiguous(tmp_path, names, message):
    with pytest.raises(ModelFormatError, match=message):
        find_model_files(_touch(tmp_path / "m", *names))


def test_find_model_files_nothing_there(tmp_path):
    with pytest.raises(ModelFormatError, match="no such model"):
        find_model_files(tmp_path / "missing")


# ---- loading against a hand-made program ----


def _program(*variables: bytes, sub_block=()):
    blocks = [block_desc(0, -1, variables)]
    if sub_block:
        blocks.append(block_desc(1, 0, sub_block))
    return parse_program_desc(program_desc(*blocks))


PROGRAM = _program(
    var_desc("feed", var_type=9, persistable=True),
    var_desc("fetch", var_type=10, persistable=True),
    var_desc("raw", var_type=17, persistable=True),
    var_desc("x", 5, [-1, 2], lod_level=1),
    var_desc("w", 5, [2, 3], persistable=True),
    var_desc("b", 3, [-1], persistable=True),
    sub_block=[var_desc("a", 6, [], persistable=True)],  # Paddle saves every block's
)
ARRAYS = {
    "w": np.arange(6, dtype=np.float32).reshape(2, 3),
    "b": np.array([5, -6, 7], np.int64),
    "a": np.array(0.5),
}


def test_combined_parameters_are_in_sorted_name_order(tmp_path):
    path = tmp_path / "model.pdiparams"
    path.write_bytes(b"".join(record(ARRAYS[name]) for name in sorted(ARRAYS)))
    params = load_parameters(PROGRAM, tmp_path, path)
    assert sorted(params) == sorted(ARRAYS)
    for name, array in ARRAYS.items():
        np.testing.assert_array_equal(params[name], array, strict=True)


def test_separate_parameters(tmp_path):
    for name, array in ARRAYS.items():
        (tmp_path / name).write_bytes(record(array))
    params = load_parameters(PROGRAM, tmp_path, None)
    for name, array in ARRAYS.items():
        np.testing.assert_array_equal(params[name], array, strict=True)


@pytest.mark.parametrize(
    ("replace", "message"),
    [
        ({"w": ARRAYS["w"].astype(np.float64)}, "'w'{}: the file holds float64 (2, 3), "),
        (
            {"w": ARRAYS["w"].T},
            "'w'{}: the file holds float32 (3, 2), the program declares float32 (2, 3)",
        ),
        (
            {"b": ARRAYS["b"][None]},
            "'b'{}: the file holds int64 (1, 3), the program declares int64 (-1,)",
        ),
    ],
)
def test_parameters_must_match_their_var_desc(tmp_path, replace, message):
    arrays = ARRAYS | replace
    for name, array in arrays.items():
        (tmp_path / name).write_bytes(record(array))
    name = message[1]
    separate = "parameter " + message.format(f" ({tmp_path / name})")
    with pytest.raises(ModelFormatError, match=re.escape(separate)):
        load_parameters(PROGRAM, tmp_path, None)
    combined = tmp_path / "__params__"
    combined.write_bytes(b"".join(record(arrays[name]) for name in sorted(arrays)))
    with pytest.raises(
        ModelFormatError, match=re.escape("__params__: parameter " + message.format(""))
    ):
        load_parameters(PROGRAM, tmp_path, combined)


def test_separate_parameter_problems(tmp_path):
    for name, array in ARRAYS.items():
        (tmp_path / name).write_bytes(record(array))
    (tmp_path / "w").write_bytes(record(ARRAYS["w"]) + b"\0")
    with pytest.raises(ModelFormatError, match=r"parameter 'w' \(.*\): 1 bytes left at byte"):
        load_parameters(PROGRAM, tmp_path, None)
    (tmp_path / "w").unlink()
    with pytest.raises(ModelFormatError, match="parameter 'w': no file"):
        load_parameters(PROGRAM, tmp_path, None)
    escaping = _program(var_desc("../w", 5, [2, 3], persistable=True))
    with pytest.raises(ModelFormatError, match=r"parameter '\.\./w': file name .* contains '\.\.'"):
        load_parameters(escaping, tmp_path / "sub", None)
    absolute = _program(var_desc(str(tmp_path / "w"), 5, [2, 3], persistable=True))
    with pytest.raises(ModelFormatError, match="is absolute"):
        load_parameters(absolute, tmp_path / "sub", None)


def test_a_parameter_file_linked_out_of_the_model_directory_is_refused(tmp_path):
    """As for ONNX external data: the model names a file inside its directory, and a symlink
    there must not lead fusebridge to read one outside."""
    (tmp_path / "model").mkdir()
    (tmp_path / "outside").mkdir()
    for name, array in ARRAYS.items():
        (tmp_path / "outside" / name).write_bytes(record(array))
        (tmp_path / "model" / name).symlink_to(tmp_path / "outside" / name)
    with pytest.raises(ModelFormatError, match=r"resolves \(through a symlink\) to .*outside"):
        load_parameters(PROGRAM, tmp_path / "model", None)
    for name in ARRAYS:  # links that stay inside the directory are fine
        (tmp_path / "model" / name).unlink()
        (tmp_path / "model" / f"{name}.data").write_bytes(record(ARRAYS[name]))
        (tmp_path / "model" / name).symlink_to(tmp_path / "model" / f"{name}.data")
    assert set(load_parameters(PROGRAM, tmp_path / "model", None)) == set(ARRAYS)


def test_combined_file_must_end_after_the_last_record(tmp_path):
    path = tmp_path / "m.pdiparams"
    data = b"".join(record(ARRAYS[name]) for name in sorted(ARRAYS))
    path.write_bytes(data + b"\0" * 5)
    with pytest.raises(ModelFormatError, match=f"m.pdiparams: 5 bytes left at byte {len(data)}"):
        load_parameters(PROGRAM, tmp_path, path)
    path.write_bytes(data[:-3])
    with pytest.raises(ModelFormatError, match=r"m.pdiparams: parameter 'w': .*3 bytes missing"):
        load_parameters(PROGRAM, tmp_path, path)


def test_non_dense_variables(tmp_path):
    rows = var_desc("rows", var_type=8, persistable=True)  # SelectedRows: a record of its own
    program = _program(var_desc("w", 5, [2, 3], persistable=True), rows)
    (tmp_path / "w").write_bytes(record(ARRAYS["w"]))
    assert list(load_parameters(program, tmp_path, None)) == ["w"]
    with pytest.raises(ModelFormatError, match="'rows' of type 8 in a combined"):
        load_parameters(program, tmp_path, tmp_path / "w")


# ---- models saved by Paddle ----


@pytest.mark.paddle
def test_parameters_match_paddle(saved_model):
    path, _, theirs = saved_model
    program, params = read_paddle_model(path)
    assert sorted(params) == sorted(theirs)
    assert {"embedding_0.w_0", "fc_0.w_0", "fc_0.b_0", "gru_weight", "gru_bias"} <= set(params)
    variables = program.blocks[0].vars
    for name, array in params.items():
        expected = theirs[name]
        assert array.shape == expected.shape == variables[name].shape
        assert array.dtype == variables[name].dtype
        assert array.tobytes() == np.ascontiguousarray(expected).tobytes(), name
    assert params["gbf"].dtype == np.dtype(ml_dtypes.bfloat16)
    assert (params["gbf"] == -2.5).all() and params["g0"].shape == () and params["g0"] == 7


@pytest.mark.paddle
def test_reader_does_not_import_paddle(tmp_path_factory):
    models = saved_models(tmp_path_factory)
    script = """if True:
        import hashlib, sys
        sys.modules["paddle"] = None  # any import of paddle now fails
        from fusebridge.integrations.paddle.params import read_paddle_model
        program, params = read_paddle_model(sys.argv[1])
        print(repr(program))
        for name, a in sorted(params.items()):
            print(name, a.dtype, a.shape, hashlib.sha256(a.tobytes()).hexdigest())
        print(sorted(m for m in sys.modules if m.startswith("paddle")))
    """
    for layout in ("combined", "separate"):
        path = models[layout][0]
        run = subprocess.run(
            [sys.executable, "-c", script, str(path)],
            capture_output=True,
            text=True,
            cwd=tmp_path_factory.mktemp("elsewhere"),  # the installed fusebridge, not the tree
            check=False,
        )
        assert run.returncode == 0, run.stderr
        program, params = read_paddle_model(path)
        expected = [repr(program)] + [
            f"{name} {a.dtype} {a.shape} {hashlib.sha256(a.tobytes()).hexdigest()}"
            for name, a in sorted(params.items())
        ]
        expected.append("['paddle']")  # only the blocked placeholder
        assert run.stdout.splitlines() == expected


@pytest.fixture
def model_copy(tmp_path_factory, tmp_path):
    """A writable copy of a saved model: layout -> the path to give read_paddle_model."""

    def copy(layout: str) -> Path:
        path = saved_models(tmp_path_factory)[layout][0]
        source = path if path.is_dir() else path.parent
        shutil.copytree(source, tmp_path / layout)
        return tmp_path / layout / path.relative_to(source)

    return copy


def _record_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos < len(data):
        starts.append(pos)
        pos = read_tensor_record(data, pos, "record")[2]
    return starts


@pytest.mark.paddle
def test_truncated_files(model_copy):
    prefix = model_copy("combined")
    model, params = Path(f"{prefix}.pdmodel"), Path(f"{prefix}.pdiparams")
    model_bytes, params_bytes = model.read_bytes(), params.read_bytes()
    for cut in (0, 1, 2, 10, len(model_bytes) // 3, len(model_bytes) // 2):
        model.write_bytes(model_bytes[:cut])
        with pytest.raises(ModelFormatError, match="ProgramDesc"):
            read_paddle_model(prefix)
    model.write_bytes(model_bytes)
    starts = _record_starts(params_bytes)
    cuts = [0, 1, 5, 13, 20, 27, len(params_bytes) - 1] + starts[1:] + [s + 30 for s in starts]
    for cut in cuts:
        params.write_bytes(params_bytes[:cut])
        missing = r"model\.pdiparams: parameter '.*'.* bytes missing\)$"
        with pytest.raises(ModelFormatError, match=missing):
            read_paddle_model(prefix)


@pytest.mark.paddle
def test_flipped_and_appended_bytes(model_copy):
    prefix = model_copy("combined")
    model, params = Path(f"{prefix}.pdmodel"), Path(f"{prefix}.pdiparams")
    model_bytes, params_bytes = model.read_bytes(), params.read_bytes()
    names = sorted(read_paddle_model(prefix)[1])
    for damage, message in [
        (lambda b: b"\x0b" + b[1:], "ProgramDesc: unsupported wire type 3"),  # 0x0a: blocks
        (lambda b: b"\x0a\xff\xff\xff\xff\x0f" + b[1:], "ProgramDesc: field 1: length .* past"),
    ]:
        model.write_bytes(damage(model_bytes))
        with pytest.raises(ModelFormatError, match=message):
            read_paddle_model(prefix)
    model.write_bytes(model_bytes)
    starts = _record_starts(params_bytes)
    for i, start in enumerate(starts):
        for offset, value, message in [
            (0, 1, "LoD tensor version 1"),
            (12, 7, "tensor version 7"),  # parameters have no LoD: the tensor follows at 12
            (19, 0xFF, "negative TensorDesc size"),  # the high byte of the int32
            (21, 0x7A, "TensorDesc: unknown data type enum 122"),  # after the 0x08 key
        ]:
            damaged = bytearray(params_bytes)
            damaged[start + offset] = value
            params.write_bytes(bytes(damaged))
            with pytest.raises(ModelFormatError, match=f"pdiparams: parameter {names[i]!r}"):
                read_paddle_model(prefix)
            with pytest.raises(ModelFormatError, match=message):
                read_paddle_model(prefix)
    for extra in (b"\0", b"\0" * 100):
        params.write_bytes(params_bytes + extra)
        with pytest.raises(ModelFormatError, match=f"pdiparams: {len(extra)} bytes left"):
            read_paddle_model(prefix)


@pytest.mark.paddle
def test_separate_files_damaged(model_copy):
    directory = model_copy("separate")
    _, params = read_paddle_model(directory)
    name = "fc_0.w_0"
    good = (directory / name).read_bytes()
    for array, message in [
        (params[name].astype(np.float64), "holds float64 (6, 12)"),
        (params[name].T, "holds float32 (12, 6), the program declares float32 (6, 12)"),
        (params[name][:1], "holds float32 (1, 12)"),
    ]:
        (directory / name).write_bytes(record(array))
        where = re.escape(f"parameter '{name}' ({directory / name})")
        with pytest.raises(ModelFormatError, match=where):
            read_paddle_model(directory)
        with pytest.raises(ModelFormatError, match=re.escape(message)):
            read_paddle_model(directory)
    (directory / name).write_bytes(good[:-1])
    with pytest.raises(ModelFormatError, match=f"parameter '{name}'.*1 bytes missing"):
        read_paddle_model(directory)
    (directory / name).unlink()
    with pytest.raises(ModelFormatError, match=f"parameter '{name}': no file"):
        read_paddle_model(directory)
