"""The `fusebridge` command, run as a user runs it."""

import argparse
import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from helpers.error_bounds import U
from helpers.session_models import training_step_model
from onnx import TensorProto, helper

import fusebridge
from fusebridge.cli import command as cli
from fusebridge.fuse_passes import PIPELINES, explicit_rng
from fusebridge.models import assets

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def run(*args):
    exe = shutil.which("fusebridge")
    cmd = [exe, *args] if exe else [sys.executable, "-m", "fusebridge.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def test_version():
    out = run("--version")
    assert out.returncode == 0 and out.stdout.strip() == fusebridge.__version__


def test_info_reports_the_core():
    out = run("info")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["engines"]["cpu"] == "available"
    assert info["isa"]["selected"] in info["isa"]["available"]
    assert info["blas"]["library"] == "scipy_openblas" and info["blas"]["threads"] >= 1
    assert {"hits", "misses", "capacity"} <= set(info["primitive_cache"])


def test_demo_loads_optimizes_and_runs_the_bundled_tagger():
    out = run("demo")
    assert out.returncode == 0, out.stderr
    assert "fc_gru                 fired 4" in out.stdout
    assert "bigru                  fired 2" in out.stdout
    assert "optimized: Add x1, CRFDecoding x1, FusionGRU x2" in out.stdout
    assert "optimized tags == unfused tags: True" in out.stdout
    assert f"time per batch over {cli.DEMO_RUNS} runs each after a warm-up run" in out.stdout
    ran = {
        "unfused": "ONNX Runtime, 3 call(s) (Add x5, Concat x2, Gather x1, Less x1, MatMul x5, "
        "Squeeze x1, Sub x1, Where x1) "
        "+ fusebridge kernels (CRFDecoding x1, GRU x4)",
        "optimized": "ONNX Runtime, 2 call(s) (Add x1, Gather x1, Less x1, MatMul x1, Squeeze x1, "
        "Sub x1, Where x1) "
        "+ fusebridge kernels (CRFDecoding x1, FusionGRU x2)",
    }
    for variant, what in ran.items():
        number = r"(\d+\.\d\d)"
        timing = re.search(
            rf"  {variant}: +median {number} ms \(IQR {number}-{number}, "
            rf"min-max {number}-{number}\)\n +ran on (.*)\n",
            out.stdout,
        )
        assert timing, out.stdout
        median, q1, q3, low, high = map(float, timing.groups()[:5])
        assert 0 < low <= q1 <= median <= q3 <= high
        assert timing[6] == what
    assert re.search(r"optimized is \d+\.\dx faster \(ratio of the medians\)", out.stdout)


def test_every_command_and_option_has_help():
    parser = cli.build_parser()
    (commands,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert {a.dest: bool(a.help) for a in commands._choices_actions} == dict.fromkeys(
        ["info", "demo", "dropout-demo", "optimize", "run", "bench", "batch", "serve"], True
    )
    for name, sub in commands.choices.items():
        assert sub.description, name
        for action in sub._actions:
            if not isinstance(action, argparse._HelpAction):
                assert action.help and action.help != argparse.SUPPRESS, (name, action.dest)


def test_pipeline_help_lists_the_choices():
    out = run("optimize", "--help")
    assert out.returncode == 0
    assert "--pipeline {inference,lowering,none,portable,training}" in out.stdout
    help_text = " ".join(out.stdout.split())  # argparse wraps the lines
    for name in PIPELINES:
        assert f"{name}: " in help_text, name
    refused = run("optimize", str(assets.path("tagger")), "-o", "x.onnx", "--pipeline", "fast")
    assert refused.returncode == 2 and "invalid choice: 'fast'" in refused.stderr


def training_dropout_model() -> ir.Model:
    """x -> training Dropout (p 0.5, no seed input): a model that draws random numbers."""
    node = helper.make_node("Dropout", ["x"], ["y"], domain="fusebridge", p=0.5)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 33])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 33])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("fusebridge", 1)]
    graph = helper.make_graph([node], "g", [x], [y])
    return ir.from_proto(helper.make_model(graph, opset_imports=opsets, ir_version=10))


def test_run_seed_is_session_run_with_that_key(tmp_path):
    x = np.random.default_rng(0).uniform(0.5, 1.5, (4, 33)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    explicit = training_dropout_model()
    explicit_rng(explicit)  # what `optimize --pipeline training` does first
    fusebridge.save_onnx(explicit, tmp_path / "explicit.onnx")
    fusebridge.save_onnx(training_dropout_model(), tmp_path / "raw.onnx")
    want = fusebridge.Session(explicit).run({"x": x}, rng=fusebridge.random.key(7))
    assert 0 < np.count_nonzero(want["y"]) < x.size  # it did drop some, and keep some
    for model in ("explicit.onnx", "raw.onnx"):
        out_dir = tmp_path / f"out-{model}"
        args = [str(tmp_path / model), "--input", f"x={tmp_path / 'x.npy'}", "-o", str(out_dir)]
        out = run("run", *args, "--seed", "7")
        assert out.returncode == 0, out.stderr
        np.testing.assert_array_equal(np.load(out_dir / "y.npy"), want["y"])
        assert np.load(out_dir / "rng_offset_out.npy") == want["rng_offset_out"] == 1
        assert run("run", *args, "--seed", "8").returncode == 0
        assert not np.array_equal(np.load(out_dir / "y.npy"), want["y"])
        refused = run("run", *args)
        assert refused.returncode == 2
        assert refused.stderr == (
            "fusebridge: error: run: the model has training dropout, which needs --seed N\n"
        )
    tagger = assets.path("tagger")
    ids = f"words={tagger / 'example_words.npy'}"
    out = run("run", str(tagger), "--input", ids, "--seed", "1")
    assert out.returncode == 2 and "--seed given, but the model draws no random numbers" in (
        out.stderr
    )


def test_dropout_demo_runs_and_checks_itself():
    out = run("dropout-demo")
    assert out.returncode == 0, out.stderr
    assert "backward from the mask == backward recomputed from the seed: True" in out.stdout
    assert "the tensor run as two shards == the whole: True" in out.stdout


@pytest.mark.parametrize("p", ["1.5", "nan"])
def test_demo_bad_p_is_a_clean_error(p):
    out = run("dropout-demo", "--p", p)
    assert out.returncode == 2 and "p must lie in [0, 1]" in out.stderr


def test_optimize_portable_runs_in_plain_onnxruntime(tmp_path):
    import onnxruntime as ort

    tagger = assets.path("tagger")
    path = tmp_path / "tagger.onnx"
    out = run("optimize", str(tagger), "-o", str(path), "--portable", "--explain")
    assert out.returncode == 0, out.stderr
    assert re.search(r"to_padded_recurrences +fired 2\n +cancel_reorders +fired 1", out.stdout)
    assert "(standard ONNX ops only)" in out.stdout
    # --portable is --pipeline portable: the same passes, the same file.
    again = tmp_path / "again.onnx"
    assert run("optimize", str(tagger), "-o", str(again), "--pipeline", "portable").returncode == 0
    assert again.read_bytes() == path.read_bytes()
    ids = np.load(tagger / "example_words.npy")
    lengths = [int(n) for n in (tagger / "example_lengths.txt").read_text().split()]
    offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    (tags, _) = ort.InferenceSession(str(path)).run(None, {"words": ids, "words.offsets": offsets})
    want = fusebridge.Session(fusebridge.load(tagger)).run(
        {"words": fusebridge.LoDTensor(ids, lengths=lengths)}
    )
    np.testing.assert_array_equal(tags, want["crf_decoding_0.tmp_0"].data)
    refused = run("optimize", str(tagger), "-o", str(path), "--portable", "--pipeline", "none")
    assert refused.returncode == 2
    assert "--portable is --pipeline portable, but --pipeline none was given" in refused.stderr


def test_optimize_explain_then_run_with_lod(tmp_path):
    tagger = assets.path("tagger")
    model = tmp_path / "tagger.fb.onnx"
    out = run("optimize", str(tagger), "-o", str(model), "--explain")
    assert out.returncode == 0, out.stderr
    assert "canonical_update_gate  fired 4" in out.stdout and model.is_file()
    out = run(
        "run",
        str(model),
        "--input",
        f"words={tagger / 'example_words.npy'}",
        "--lod",
        f"words={tagger / 'example_lengths.txt'}",
        "-o",
        str(tmp_path / "out"),
    )
    assert out.returncode == 0, out.stderr
    tags = np.load(tmp_path / "out" / "crf_decoding_0.tmp_0.npy")
    lengths = (tagger / "example_lengths.txt").read_text().split()
    assert (tmp_path / "out" / "crf_decoding_0.tmp_0.lengths.txt").read_text().split() == lengths
    ids = np.load(tagger / "example_words.npy")
    session = fusebridge.Session(fusebridge.load(tagger), backend="reference")
    want = session.run({"words": fusebridge.LoDTensor(ids, lengths=[int(n) for n in lengths])})
    np.testing.assert_array_equal(tags, want["crf_decoding_0.tmp_0"].data)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "missing.onnx"], "no such ONNX file"),
        (["run", "{tagger}", "--input", "words"], "expected NAME=FILE"),
        (["run", "{tagger}", "--lod", "x=y.txt"], "no --input of that name"),
        (["optimize", "{tmp}", "-o", "x.onnx"], "expected one model file"),
    ],
)
def test_cli_errors_are_one_line(tmp_path, args, message):
    args = [a.format(tagger=assets.path("tagger"), tmp=tmp_path) for a in args]
    out = run(*args)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


@pytest.mark.paddle
@pytest.mark.parametrize(
    "model",
    [
        assets.path("tagger"),  # a legacy program with one LoD input
        FIXTURES / "paddle3" / "gru_tagger_lengths" / "jit",  # PIR: padded ids and lengths
    ],
)
def test_bench_compares_with_paddle_side_by_side(model):
    pytest.importorskip("paddle")
    out = run("bench", str(model), "--sentences", "3", "--repeat", "2")
    assert out.returncode == 0, out.stderr
    rows = [line for line in out.stdout.splitlines() if line.startswith("| 3 |")]
    assert [r.split("|")[3].strip() for r in rows] == [
        "fusebridge",
        "paddle_executor",
        "paddle_inference",
        "paddle_inference_onednn",
    ]
    assert "session overhead" in rows[0]
    for row in rows[1:]:
        assert "| yes |" in row, out.stdout


def paddle_installed(monkeypatch, installed: bool) -> None:
    """Whether compare_with_paddle finds paddle, whatever this environment holds."""
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: (
            (real("json") if installed else None) if name == "paddle" else real(name, *a)
        ),
    )


def test_bench_reports_a_failing_peer_in_full_and_exits_nonzero(tmp_path, monkeypatch, capsys):
    from fusebridge.bench import paddle_comparison

    message = "the peer broke: " + "x" * 300
    (tmp_path / "broken_peer.py").write_text(f"raise RuntimeError({message!r} + '\\nline two')\n")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setattr(paddle_comparison, "PEER_MODULE", "broken_peer")
    paddle_installed(monkeypatch, True)
    code = cli.main(["bench", str(assets.path("tagger")), "--sentences", "2", "--repeat", "1"])
    out = capsys.readouterr()
    assert code == 1 and "3 of 4 rows failed" in out.err
    rows = [line for line in out.out.splitlines() if line.startswith("| 2 |")]
    assert [r.split("|")[-2].strip() for r in rows[1:]] == ["failed (exit status 1) [1]"] * 3
    assert out.out.endswith(f"\n[1] RuntimeError: {message}\nline two\n")


def test_bench_without_paddle_says_so_in_each_peer_row(monkeypatch, capsys):
    paddle_installed(monkeypatch, False)
    code = cli.main(["bench", str(assets.path("tagger")), "--sentences", "2", "--repeat", "1"])
    out = capsys.readouterr()
    rows = [line for line in out.out.splitlines() if line.startswith("| 2 |")]
    assert code == 1 and len(rows) == 4 and "session overhead" in rows[0]
    assert all(r.endswith("| not installed [1] |") for r in rows[1:])
    assert "[1] paddlepaddle is not installed (pip install 'fusebridge[paddle]')" in out.out


def test_progress_without_tqdm_is_one_line_per_step(monkeypatch, capsys):
    from fusebridge.bench.progress import Progress

    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now fails
    with Progress(2, "bench") as progress:
        progress.step("1 sentences: fusebridge")
        progress.write("| a result |")
        progress.step("1 sentences: paddle_executor")
    out = capsys.readouterr()
    assert out.out == "| a result |\n"
    assert out.err.splitlines() == [
        "bench [1/2] 1 sentences: fusebridge",
        "bench [2/2] 1 sentences: paddle_executor",
    ]


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_explain_names_every_pass_in_order(tmp_path, name):
    """--explain reports each pass of the pipeline (not only the rules), in the order run."""
    tagger, path = str(assets.path("tagger")), str(tmp_path / "x.onnx")
    out = run("optimize", tagger, "-o", path, "--pipeline", name, "--explain")
    assert out.returncode == 0, out.stderr
    reported = re.findall(r"^  (\w+) +(?:fired \d+|changed|unchanged)$", out.stdout, re.M)
    assert reported == [p.name for p in PIPELINES[name].passes]
    assert f"pipeline {name}:" in out.stdout


def _structure(model: ir.Model) -> list:
    graph = model.graph
    return [
        [v.name for v in graph.inputs],
        [v.name for v in graph.outputs],
        [
            (n.op_type, n.domain, [v.name if v else None for v in n.inputs], len(n.outputs))
            for n in graph
        ],
    ]


def test_optimize_training_is_the_cli_training_pipeline(tmp_path):
    """fb.optimize(model, "training") and `fusebridge optimize --pipeline training` run the
    same passes: the same graph, and the same numbers under the same key."""
    source = tmp_path / "train.onnx"
    fusebridge.save_onnx(training_step_model(), source)
    api, report = fusebridge.optimize(fusebridge.load(source), "training")
    assert [report.fired(p) for p in ("explicit_rng", "matmul_dropout")] == [1, 1]
    assert report.fired("recompute_dropout_mask") == 1
    out = tmp_path / "cli.onnx"
    done = run("optimize", str(source), "-o", str(out), "--pipeline", "training")
    assert done.returncode == 0, done.stderr
    cli_model = fusebridge.load(out)
    assert _structure(cli_model) == _structure(api)
    # The Add is explicit_rng's rng_offset_out = rng_offset + 1.
    assert [n.op_type for n in api.graph] == ["MatMulDropout", "DropoutGrad", "Add"]
    assert api.graph.node(1).inputs[1] is None  # no mask: the backward redraws the bits
    rng = np.random.default_rng(5)
    feeds = {
        "x": rng.standard_normal((5, 8)).astype(np.float32),
        "dy": rng.standard_normal((5, 6)).astype(np.float32),
    }
    key = fusebridge.random.key(11)
    want = fusebridge.Session(api).run(feeds, rng=key)
    got = fusebridge.Session(cli_model).run(feeds, rng=key)
    assert set(got) == set(want) == {"y", "dx", "rng_offset_out"}
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    # The backward redrew the forward's bits: dx is dy * 1/(1-p) exactly where y was kept.
    kept = want["y"] != 0
    assert 0 < kept.sum() < kept.size
    # dy * 1/(1 - p) from p's float32 rounds 3 times (p, the quotient, the product), dy / 0.6
    # twice (0.6, the quotient): within 5 u of each other.
    want_dx = np.where(kept, feeds["dy"] / np.float32(0.6), 0)
    np.testing.assert_allclose(want["dx"], want_dx, rtol=5 * U, atol=0)


def test_explain_shows_the_onnx_import(tmp_path):
    """An ONNX file's --explain starts with its import pipeline: what was folded, imported
    and refused (with the node and the reason)."""
    gru = helper.make_node("GRU", ["X", "W", "R"], ["Y"], name="clipped", hidden_size=2, clip=1.0)
    weights = [
        helper.make_tensor(n, TensorProto.FLOAT, [1, 6, d], np.ones(6 * d).tolist())
        for n, d in (("W", 3), ("R", 2))
    ]
    graph = helper.make_graph(
        [gru],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", "N", 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["T", 1, "N", 2])],
        weights,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    src, out = tmp_path / "clipped.onnx", tmp_path / "out.onnx"
    onnx.save(model, src)
    result = run("optimize", str(src), "-o", str(out), "--explain")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert text.index("pipeline onnx_import:") < text.index("pipeline inference:")
    assert re.search(r"^  import_gru +fired 0$", text, re.M)
    assert "refused at 'clipped': clip is not supported by the fused GRU" in text
