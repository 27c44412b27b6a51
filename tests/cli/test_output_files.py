"""`fusebridge run -o DIR` names its files after the model's outputs: the names come from the
model file, so none may leave DIR, clobber another output's file, write through a link planted
in DIR, or put control characters on the terminal (fusebridge/cli/output_files.py)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fusebridge.cli import command as cli
from fusebridge.cli import output_files
from fusebridge.errors import ArgumentError


def _identity_model(path, names: list[str]) -> str:
    """X [2] -> one Identity output per name."""
    nodes = [helper.make_node("Identity", ["X"], [n]) for n in names]
    graph = helper.make_graph(
        nodes,
        "names",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in names],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(model, path)
    return str(path)


def _run(tmp_path, names: list[str], out_dir) -> int:
    x = tmp_path / "x.npy"
    np.save(x, np.array([1.5, -2.0], np.float32))
    model = _identity_model(tmp_path / "names.onnx", names)
    return cli.main(["run", model, "--input", f"X={x}", "-o", str(out_dir)])


@pytest.mark.parametrize(
    ("name", "stem"),
    [
        ("../../x", "%2E.%2F..%2Fx"),
        ("/abs/x", "%2Fabs%2Fx"),
        ("a/b", "a%2Fb"),
        ("a\\b", "a%5Cb"),
        ("..", "%2E."),
        (".", "%2E"),
        (".hidden", "%2Ehidden"),
        ("x\x00y", "x%00y"),
        ("a\nb\x1b[2J", "a%0Ab%1B%5B2J"),
        ("%2E", "%252E"),
        ("é", "%C3%A9"),
        ("CON", "%43ON"),
        ("nul.txt", "%6Eul.txt"),
        ("crf_decoding_0.tmp_0", "crf_decoding_0.tmp_0"),
    ],
)
def test_names_are_percent_encoded(name, stem):
    assert output_files.encode(name) == stem


def test_unsafe_output_names_stay_inside_the_directory(tmp_path, capsys):
    names = ["../../x", "/abs/x", "a/b", "..", ".", "x\x00y", "c\x1b[2Jd", "é", "Y"]
    out_dir = tmp_path / "deep" / "out"
    assert _run(tmp_path, names, out_dir) == 0
    written = sorted(p.name for p in out_dir.iterdir())
    assert written == sorted(output_files.encode(n) + ".npy" for n in names)
    for name in names:
        got = np.load(out_dir / (output_files.encode(name) + ".npy"))
        np.testing.assert_array_equal(got, [1.5, -2.0])
    # Nothing beside the directory, above it, or at the absolute path.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "names.onnx", "x.npy"]
    assert sorted(p.name for p in (tmp_path / "deep").iterdir()) == ["out"]
    assert not os.path.exists("/abs/x.npy")
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "'c\\x1b[2Jd': float32[2]" in printed
    assert f"(written as {out_dir / '%2E.%2F..%2Fx.npy'})" in printed
    assert "written as" not in printed.split("Y: float32[2]")[1]  # a safe name is itself


def test_names_differing_only_in_case_are_refused_before_writing(tmp_path, capsys):
    out_dir = tmp_path / "out"
    assert _run(tmp_path, ["out", "Y", "y"], out_dir) == 2
    err = capsys.readouterr().err
    assert "outputs 'Y' and 'y'" in err and "differ only in case" in err
    assert not out_dir.exists()


def test_empty_and_too_long_names_are_refused():
    with pytest.raises(ArgumentError, match="empty name"):
        output_files.stems([""], (".npy",), "run")
    with pytest.raises(ArgumentError, match=r"output '/+' would be written as a file name of 267"):
        output_files.stems(["/" * 85], (".npy", ".lengths.txt"), "run")  # 85 * 3 + 12 bytes
    assert output_files.stems(["a" * 243], (".npy", ".lengths.txt"), "run")


@pytest.mark.parametrize("link", ["symlink", "hardlink"])
def test_a_link_planted_in_the_directory_is_replaced_not_written_through(tmp_path, link):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    planted = out_dir / "y.npy"
    (os.symlink if link == "symlink" else os.link)(victim, planted)
    assert _run(tmp_path, ["y"], out_dir) == 0
    assert victim.read_text() == "keep me"
    assert not planted.is_symlink()
    np.testing.assert_array_equal(np.load(planted), [1.5, -2.0])
    assert sorted(p.name for p in out_dir.iterdir()) == ["y.npy"]  # no temporary left


def test_an_existing_file_is_replaced_and_a_directory_is_named(tmp_path, capsys):
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    (out_dir / "y.npy").write_text("old")
    assert _run(tmp_path, ["y"], out_dir) == 0
    np.testing.assert_array_equal(np.load(out_dir / "y.npy"), [1.5, -2.0])
    (out_dir / "z.npy").mkdir()
    assert _run(tmp_path, ["z"], out_dir) == 2
    assert "cannot write" in capsys.readouterr().err and "z.npy" in os.listdir(out_dir)
    assert sorted(os.listdir(out_dir)) == ["y.npy", "z.npy"]
