"""`fusebridge batch`, run as a user runs it: on the local Ray it starts, and with --address on
a two-node cluster on this machine (ray.cluster_utils.Cluster), started and stopped here."""

import shutil
import subprocess
import sys

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from helpers.batch_rows import TAGGER, alone, sentences, words_table  # noqa: E402

from fusebridge.cli import command as cli  # noqa: E402

TAGS = "crf_decoding_0.tmp_0"
ROWS = sentences(120, seed=21)


def batch(*args: str, cwd) -> subprocess.CompletedProcess:
    """Runs from cwd: Ray puts the driver's current folder on its workers' sys.path, and the
    folder pytest runs in may be a source tree without a compiled core (CI's copy)."""
    exe = shutil.which("fusebridge")
    cmd = [exe] if exe else [sys.executable, "-m", "fusebridge.cli"]
    return subprocess.run(
        [*cmd, "batch", *args], capture_output=True, text=True, timeout=240, cwd=cwd
    )


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "in.parquet"
    pq.write_table(words_table(ROWS).rename_columns(["id", "note", "tokens"]), path)
    return path


def check_written(out) -> None:
    table = pq.read_table(out).sort_by("id")
    assert table.column_names == ["id", "note", "tokens", TAGS]
    assert table.column("note").to_pylist() == [f"row {i}" for i in range(len(ROWS))]
    for i, words in enumerate(ROWS):
        assert table.column(TAGS)[i].as_py() == alone(TAGGER, words)[TAGS].tolist(), i


def test_on_a_local_ray(corpus, tmp_path):
    out = tmp_path / "out"
    done = batch(
        str(TAGGER),
        "--input",
        str(corpus),
        "--output",
        str(out),
        "--column",
        "tokens",
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"wrote {len(ROWS)} rows to {out}" in done.stdout
    check_written(out)


def test_on_a_two_node_cluster(corpus, tmp_path):
    from ray.cluster_utils import Cluster

    cluster = Cluster(
        initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False}
    )
    try:
        cluster.add_node(num_cpus=2)
        cluster.wait_for_nodes()
        out = tmp_path / "out"
        args = ["--column", "words=tokens", "--address", cluster.address, "--actors", "2"]
        done = batch(str(TAGGER), "--input", str(corpus), "--output", str(out), *args, cwd=tmp_path)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"cluster {cluster.address}" in done.stdout
        check_written(out)
    finally:
        cluster.shutdown()


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            [],
            "no column 'words' for model input 'words' (BatchModel(columns={'words': COLUMN}) "
            "or --column words=COLUMN maps it)",
        ),
        (["--column", "nope=tokens"], "renames ['nope'], but the model's inputs are ['words']"),
        (["--column", "=tokens"], "expected NAME=COLUMN or COLUMN"),
        (["--column", "tokens", "--actors", "0"], "--actors must be >= 1, got 0"),
        (["--column", "note"], "column 'note' is string, expected a list column"),
    ],
)
def test_refused_before_ray_starts(corpus, tmp_path, capsys, extra, message):
    out = tmp_path / "out"
    assert (
        cli.main(["batch", str(TAGGER), "--input", str(corpus), "--output", str(out), *extra]) == 2
    )
    assert message in capsys.readouterr().err
    assert not out.exists() and not ray.is_initialized()


def test_input_and_output_paths_are_checked(corpus, tmp_path, capsys):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x.parquet").write_bytes(b"")
    args = ["batch", str(TAGGER), "--column", "tokens"]
    assert cli.main([*args, "--input", str(corpus), "--output", str(taken)]) == 2
    assert "exists and is not an empty folder" in capsys.readouterr().err
    assert (
        cli.main([*args, "--input", str(tmp_path / "none"), "--output", str(tmp_path / "o")]) == 2
    )
    assert "no such file or folder" in capsys.readouterr().err
    assert (
        cli.main([*args, "--input", str(taken / "x.parquet"), "--output", str(tmp_path / "o")]) == 2
    )
    assert "not Parquet" in capsys.readouterr().err
