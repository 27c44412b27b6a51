"""Zero-size inputs (issue 31): a batch of 0, 0 steps, 0 sentences, empty sentences. Nothing
ends the process (ONNX Runtime 1.32 itself aborts on GRU and LSTM at batch 0 or 0 steps: the
Session runs such partitions in a session whose recurrent ops sit in an If, runtime/
empty_inputs.py); the outputs are ONNX Runtime's on the original file where ONNX Runtime
survives it, Paddle's on a Paddle model, and otherwise the shapes the model declares, with
each sentence's final state its initial one (docs/gru.md).

Runs that might end a process run in a child (python_under_test), each case in a fork of it,
so that a regression fails a test instead of killing pytest."""

from __future__ import annotations

import json
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pytest
from helpers.error_bounds import PADDLE, assert_within
from helpers.graph_bounds import SESSION, output_bounds
from helpers.python_under_test import run_python

import fusebridge as fb
from fusebridge.models import assets

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "onnx"
ONNX_FILES = sorted(FIXTURES.glob("*.onnx")) + sorted((FIXTURES / "shipped").glob("*.onnx"))

# The child: for each case of the pickle at argv[1], a fork runs it (mode argv[2]: "ours",
# fusebridge's optimized Session; "ort", ONNX Runtime on the file) and pickles its outputs or
# its error; a fork that dies is reported by its signal.
_RUN_CASES = """
import os, pickle, sys
import numpy as np
import onnxruntime as ort
import fusebridge as fb

cases, mode, out = pickle.load(open(sys.argv[1], "rb")), sys.argv[2], sys.argv[3]
report = []
for k, (path, feeds) in enumerate(cases):
    result = f"{out}/{k}.pickle"
    pid = os.fork()
    if pid == 0:
        try:
            if mode == "ort":
                session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
                names = [o.name for o in session.get_outputs()]
                got = dict(zip(names, session.run(None, feeds)))
            else:
                from fusebridge.fuse_passes import explicit_rng
                model = fb.optimize(fb.load(path))[0]
                key = fb.random.key(0) if explicit_rng(model).count else None
                got = fb.Session(model).run(feeds, rng=key)
            done = ("outputs", got)
        except fb.Error as exc:
            done = ("typed error", f"{type(exc).__name__}: {exc}")
        except Exception as exc:
            done = ("error", f"{type(exc).__name__}: {exc}")
        with open(result, "wb") as f:
            pickle.dump(done, f)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        report.append(("crash", f"signal {os.WTERMSIG(status)}"))
    else:
        report.append(pickle.load(open(result, "rb")))
pickle.dump(report, open(f"{out}/report.pickle", "wb"))
"""


def _run_cases(cases: list, mode: str, tmp: Path) -> list[tuple[str, object]]:
    (tmp / mode).mkdir()
    (tmp / "cases.pickle").write_bytes(pickle.dumps(cases))
    done = run_python(_RUN_CASES, str(tmp / "cases.pickle"), mode, str(tmp / mode), timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return pickle.loads((tmp / mode / "report.pickle").read_bytes())


def _zero_feeds(path: Path) -> list[tuple[str, dict]]:
    """Per named dimension of the file's inputs: its feeds with that dimension 0 (every other
    named one 3; integer inputs, ids and lengths, zeros); first, as `None`, every one at 3."""
    model = fb.load(path)
    inputs = [v for v in model.graph.inputs if not v.is_initializer()]
    symbols = dict.fromkeys(str(d) for v in inputs for d in v.shape if not isinstance(d, int))
    cases = []
    for symbol in [None, *symbols]:
        feeds = {}
        for v in inputs:
            dims = [d if isinstance(d, int) else (0 if str(d) == symbol else 3) for d in v.shape]
            dtype = np.dtype(v.dtype.numpy())
            rng = np.random.default_rng(0)
            feeds[v.name] = (
                rng.standard_normal(dims).astype(dtype)
                if dtype.kind == "f"
                else np.zeros(dims, dtype)
            )
        cases.append((symbol, feeds))
    return cases


def _declared_shapes(path: Path, feeds: dict) -> dict[str, list]:
    """Each graph output's declared shape with the sizes of this run's named dimensions
    (None where the file leaves a dimension unknown or names one no input declares)."""
    model = fb.load(path)
    sizes = {
        str(d): feeds[v.name].shape[a]
        for v in model.graph.inputs
        if v.name in feeds
        for a, d in enumerate(v.shape)
        if not isinstance(d, int)
    }
    return {
        v.name: None
        if v.shape is None
        else [d if isinstance(d, int) else sizes.get(str(d)) for d in v.shape]
        for v in model.graph.outputs
    }


@pytest.fixture(scope="module")
def onnx_runs(tmp_path_factory):
    """(file, symbol, feeds, ours, ONNX Runtime's) for every file and named dimension."""
    tmp = tmp_path_factory.mktemp("empty")
    cases = [(p, s, f) for p in ONNX_FILES for s, f in _zero_feeds(p)]
    plain = [(str(p), f) for p, _, f in cases]
    ours, theirs = _run_cases(plain, "ours", tmp), _run_cases(plain, "ort", tmp)
    # A file that does not run at 3 in every named dimension declares a dimension free that
    # it is not (torch.export fixed torch_dynamo_gru's time at 20 in a Reshape): its
    # declaration is no oracle.
    free = {p for (p, s, _), o in zip(cases, ours) if s is None and o[0] == "outputs"}
    return [
        (p, s, f, o, t, p in free) for (p, s, f), o, t in zip(cases, ours, theirs) if s is not None
    ]


def test_the_issue_example_runs():
    """The report's example: `x` of 0 steps and of 0 sentences ended the process."""
    code = """
        import numpy as np, fusebridge as fb
        s = fb.Session(fb.optimize(fb.load(__import__("sys").argv[1]))[0])
        h0 = np.random.default_rng(0).standard_normal((1, 2, 16)).astype(np.float32)
        out = s.run({"x": np.zeros((0, 2, 12), np.float32), "h0": h0})
        assert out["y"].shape == (0, 2, 16), out["y"].shape
        assert np.array_equal(out["hn"], h0)  # no step: each sentence keeps its h0
        out = s.run({"x": np.zeros((5, 0, 12), np.float32), "h0": h0[:, :0]})
        assert out["y"].shape == (5, 0, 16) and out["hn"].shape == (1, 0, 16)
        print("ran")
    """
    done = run_python(code, str(FIXTURES / "torch_gru.onnx"))
    assert done.returncode == 0 and done.stdout.strip() == "ran", done.stderr[-2000:]


def test_no_zero_size_input_ends_the_process(onnx_runs):
    """Every file at 0 along every named dimension: outputs or a typed error, never a crash;
    ONNX Runtime crashes on most of these files (that is why they are here)."""
    crashed = [f"{p.name} {s}=0: {o}" for p, s, _, o, *_ in onnx_runs if o[0] == "crash"]
    untyped = [f"{p.name} {s}=0: {o[1]}" for p, s, _, o, *_ in onnx_runs if o[0] == "error"]
    assert not crashed and not untyped, crashed + untyped
    assert sum(t[0] == "crash" for *_, t, _ in onnx_runs) >= 10  # the oracle does crash


def test_empty_outputs_equal_onnxruntime_where_it_survives(onnx_runs):
    compared = 0
    for path, symbol, _, (kind, ours), (ort_kind, theirs), _ in onnx_runs:
        where = f"{path.name} with {symbol}=0"
        if ort_kind != "outputs":
            continue
        assert kind == "outputs", f"{where}: ONNX Runtime runs it, we gave {ours}"
        for name, want in theirs.items():
            got = ours[name]
            assert got.shape == want.shape and got.dtype == want.dtype, (where, name)
            np.testing.assert_array_equal(got, want, err_msg=f"{where}: {name}")
        compared += 1
    assert compared >= 8


def test_empty_outputs_have_the_declared_shapes_where_onnxruntime_crashes(onnx_runs):
    """Where ONNX Runtime ends the process, the oracle is the file's own declaration: each
    output's declared dims at this run's sizes, and a last state that is each sentence's first
    (the h0 fed, or zeros where the model starts from zeros)."""
    checked = 0
    for path, symbol, feeds, (kind, ours), (ort_kind, _), free in onnx_runs:
        if ort_kind != "crash" or kind != "outputs" or not free:
            continue
        where = f"{path.name} with {symbol}=0"
        for name, shape in _declared_shapes(path, feeds).items():
            got = ours[name]
            assert shape is None or len(shape) == got.ndim, (where, name, got.shape)
            for want, size in zip(shape or (), got.shape):
                assert want is None or want == size, (where, name, shape, got.shape)
            if got.size:  # a final state after no step
                h0 = feeds.get("h0")
                start = h0 if h0 is not None and h0.shape == got.shape else np.zeros_like(got)
                np.testing.assert_array_equal(got, start, err_msg=f"{where}: {name}")
        checked += 1
    assert checked >= 15


def test_placement_puts_an_empty_gru_on_the_kernel():
    session = fb.Session(fb.optimize(fb.load(FIXTURES / "torch_gru.onnx"))[0])
    h0 = np.zeros((1, 2, 16), np.float32)
    (decision,) = session.explain({"x": np.zeros((0, 2, 12), np.float32), "h0": h0})
    assert decision.on_kernel and "no step or no sequence" in decision.reason
    # ... and a small batch goes to ONNX Runtime as before (the cost decides)
    (decision,) = session.explain({"x": np.zeros((2, 2, 12), np.float32), "h0": h0})
    assert not decision.on_kernel


def test_an_empty_feed_never_takes_the_quick_path():
    """A model run by ONNX Runtime alone takes repeated feeds of one signature straight to its
    session; an empty feed must keep going through the guarded partition."""
    path = str(FIXTURES / "shipped" / "recurrent_lstm_rnn_torch.onnx")
    code = """
        import sys, numpy as np, fusebridge as fb
        s = fb.Session(fb.load(sys.argv[1]))
        x = np.zeros((0, 3, 12), np.float32)
        for _ in range(3):
            out = s.run({"x": x})
        assert not s._quick, s._quick
        print(sorted((k, v.shape) for k, v in out.items()))
    """
    done = run_python(code, path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "(0, 3, 16)" in done.stdout


# -- Paddle models: LoD batches with no word, or some empty sentences ---------------------------
LOD_CASES = {
    "empties among others": ([0, 5, 0, 3, 0], 8),
    "every sentence empty": ([0, 0, 0], 0),
    "0 sentences": ([], 0),
}


def _lod_feeds(lengths: list[int], words: int) -> dict:
    ids = np.random.default_rng(2).integers(1, 50, (words, 1)).astype(np.int64)
    return {"words": fb.LoDTensor(ids, lengths)}


@pytest.mark.paddle
@pytest.mark.parametrize("model", ["tagger", "sentiment"])
def test_paddle_models_with_empty_sentences_equal_paddle(model):
    """Paddle runs empty sentences among others (it dies of SIGFPE on a batch of only empty
    ones, and refuses 0 sentences): ours equal its outputs there, and a batch of only empty
    sentences gives each one what Paddle gives an empty sentence among others."""
    from helpers.paddle_oracle import run_executor

    folder = assets.path(model)
    session = fb.Session(fb.optimize(fb.load(folder))[0])
    lengths, words = LOD_CASES["empties among others"]
    feeds = _lod_feeds(lengths, words)
    (want,) = run_executor(folder, {"words": (feeds["words"].data, lengths)}).values()
    (got,) = session.run(feeds).values()
    data = got.data if isinstance(got, fb.LoDTensor) else got
    if data.dtype.kind == "f":  # within ours and Paddle's error bounds (helpers/graph_bounds.py)
        (bound,) = output_bounds(fb.load(folder), feeds, (SESSION, PADDLE)).values()
        assert_within(data, want, bound)
    else:  # tags
        np.testing.assert_array_equal(data, want)
    for label in ("every sentence empty", "0 sentences"):
        lengths, words = LOD_CASES[label]
        (alone,) = session.run(_lod_feeds(lengths, words)).values()
        if isinstance(alone, fb.LoDTensor):  # tags: no word, no tag
            assert alone.data.shape == (0, 1) and list(alone.lengths) == lengths
        else:  # one row per sentence: an empty sentence's, as Paddle gives it among others
            assert alone.shape == (len(lengths), want.shape[1])
            np.testing.assert_array_equal(alone, np.repeat(data[:1], len(lengths), 0))


# -- Paddle 3 models (tests/fixtures/paddle3): padded ids [N, T], lengths [N] -----------------
PADDLE3 = sorted((Path(__file__).resolve().parents[1] / "fixtures" / "paddle3").glob("*/*"))


def _padded_feeds(model, n: int, t: int) -> dict:
    """ids [n, t] and, where the model takes them, lengths of t."""
    ids = np.random.default_rng(n * 10 + t).integers(0, 5, (n, t)).astype(np.int64)
    feeds = {"ids": ids, "lens": np.full(n, t, np.int64)}
    return {v.name: feeds[v.name] for v in model.graph.inputs}


@pytest.mark.parametrize("folder", PADDLE3, ids=[f"{p.parent.name}/{p.name}" for p in PADDLE3])
def test_paddle3_models_take_0_sentences_and_0_steps(folder):
    """Each output has the shape its dims follow (found from runs at N 3, T 4 and N 5, T 7)
    at N 0 and at T 0, and a final state after no step is the initial one (zeros). Paddle
    Inference 3.3 itself refuses both (a RuntimeError, test below)."""
    model = fb.load(folder)
    session = fb.Session(fb.optimize(model)[0])
    small, large = (session.run(_padded_feeds(model, n, t)) for n, t in ((3, 4), (5, 7)))
    for n, t in ((0, 4), (3, 0)):
        got = session.run(_padded_feeds(model, n, t))
        assert got.keys() == small.keys()
        for name, out in got.items():
            sizes = {3: n, 4: t}  # a dim that moved with N or T takes this run's size
            want = [sizes[a] if a != b else a for a, b in zip(small[name].shape, large[name].shape)]
            assert list(out.shape) == want, (folder, n, t, name, out.shape)
            if out.size:  # a final state after no step
                assert t == 0 and not out.any(), (folder, name)


@pytest.mark.paddle
def test_paddle_inference_refuses_what_we_run():
    """The oracle's side of the test above: Paddle Inference, in a child (it could end the
    process), on each PIR model at N 0 and at T 0. Where it gives outputs, ours must equal
    them; where it does not, it refuses with a RuntimeError (Paddle 3.3 refuses every one, as
    docs/onnx.md says), not by dying or another error."""
    code = """
        import sys, pickle, numpy as np
        from helpers.paddle_oracle import run_inference
        results = []
        for folder, feeds in pickle.load(open(sys.argv[1], "rb")):
            try:
                results.append(("outputs", run_inference(folder, feeds)))
            except Exception as exc:
                results.append(("error", type(exc).__name__))
        pickle.dump(results, open(sys.argv[1], "wb"))
    """
    cases = [
        (str(folder), _padded_feeds(fb.load(folder), n, t))
        for folder in PADDLE3
        if folder.name == "pir"
        for n, t in ((0, 4), (3, 0))
    ]
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cases.pickle"
        path.write_bytes(pickle.dumps(cases))
        done = run_python(code, str(path))  # the tests' folder is on its path
        assert done.returncode == 0, done.stderr[-2000:]
        results = pickle.loads(path.read_bytes())
    for (folder, feeds), (kind, theirs) in zip(cases, results, strict=True):
        if kind == "error":
            assert theirs == "RuntimeError", (folder, theirs)
            continue
        ours = fb.Session(fb.optimize(fb.load(folder))[0]).run(feeds)
        for got, want in zip(ours.values(), theirs, strict=True):
            np.testing.assert_array_equal(got, want, err_msg=folder)


def test_every_file_is_covered(onnx_runs):
    """The cases cover every file (a file the loop skipped would test nothing)."""
    names = {p.name for p, *_ in onnx_runs}
    assert names == {p.name for p in ONNX_FILES}, json.dumps(sorted(names))
