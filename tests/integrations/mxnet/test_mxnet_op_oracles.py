"""MXNet itself as the oracle of each converted image, normalization, reduction, clip and
recurrent op: small symbols made with mx.sym over attribute variants and dtypes, run by MXNet's
executor and by fusebridge.Session, equal within both's error bounds
(tests/helpers/graph_bounds.py) and in dtype. All in this one test process (the MXNet venv);
the main venv skips them."""

from __future__ import annotations

import numpy as np
import pytest
from helpers.error_bounds import MXNET, assert_within
from helpers.graph_bounds import SESSION, output_bounds

import fusebridge as fb

mx = pytest.importorskip("mxnet")

from helpers.mxnet_oracle import run_symbol, save_symbol, symbol_values  # noqa: E402

pytestmark = pytest.mark.mxnet

F32, F64, I32 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int32)
IMAGE = (2, 4, 7, 6)  # N, C, H, W


def _feed(shape: tuple[int, ...], dtype: np.dtype, rng: np.random.Generator) -> np.ndarray:
    if dtype.kind == "i":
        return rng.integers(-9, 10, shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def check_symbol(tmp_path, sym, feeds: dict[str, np.ndarray], seed: int = 0):
    """sym with random parameters, run by MXNet and by fusebridge: every output equal within
    the bounds, and of MXNet's dtype and shape."""
    values = {**feeds, **symbol_values(sym, feeds, np.random.default_rng(seed))}
    theirs = run_symbol(sym, values)
    params = {k: v for k, v in values.items() if k not in feeds}
    model = fb.load(save_symbol(sym, params, tmp_path / "op"))
    session = fb.Session(model)
    ours = session.run(feeds)
    bounds = output_bounds(model, feeds, (SESSION, MXNET))
    assert len(session.output_names) == len(theirs)
    for name, want in zip(session.output_names, theirs):
        got = ours[name]
        assert (got.dtype, got.shape) == (want.dtype, want.shape), name
        assert_within(got, want, bounds[name], name)
    return model


def _case(text: str, shape: tuple[int, ...] = IMAGE, dtype: np.dtype = F32):
    """A case: the mx.sym expression over x (evaluated, so that its id is its source)."""
    return pytest.param(text, shape, dtype, id=f"{text} {dtype}")


CASES = [
    # Convolution: NCHW, 2-D; weight [num_filter, C / num_group, ky, kx]
    _case("mx.sym.Convolution(x, kernel=(3, 3), num_filter=5, name='c')"),
    _case(
        "mx.sym.Convolution(x, kernel=(2, 3), stride=(2, 1), pad=(1, 2), dilate=(2, 1), "
        "num_filter=3, no_bias=True, name='c')"
    ),
    _case("mx.sym.Convolution(x, kernel=(1, 1), num_filter=6, num_group=2, name='c')"),
    _case("mx.sym.Convolution(x, kernel=(3, 3), num_filter=4, num_group=4, pad=(1, 1), name='c')"),
    # BatchNorm at inference: the moving statistics; fix_gamma (default True) ignores gamma
    _case("mx.sym.BatchNorm(x, name='bn')"),
    _case("mx.sym.BatchNorm(x, fix_gamma=False, eps=1e-5, use_global_stats=True, name='bn')"),
    _case("mx.sym.BatchNorm(x, fix_gamma=False, name='bn')", dtype=F64),
    _case("mx.sym.BatchNorm(x, fix_gamma=False, axis=-1, name='bn')", (2, 3, 5)),
    _case("mx.sym.BatchNorm(x, fix_gamma=False, axis=2, name='bn')"),
    _case("mx.sym.BatchNorm(x, fix_gamma=False, axis=0, name='bn')", (3, 5)),
    # Pooling: max and avg, valid and full, padding counted or not, global
    _case("mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2))"),
    _case("mx.sym.Pooling(x, kernel=(2, 2), stride=(2, 2))", dtype=F64),
    _case("mx.sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pooling_convention='full')"),
    _case("mx.sym.Pooling(x, kernel=(3, 2), stride=(2, 1), pad=(1, 1), pool_type='max')"),
    _case("mx.sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='avg')"),
    _case(
        "mx.sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='avg', "
        "count_include_pad=False)"
    ),
    _case(
        "mx.sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='avg', "
        "pooling_convention='full')"
    ),
    _case(
        "mx.sym.Pooling(x, kernel=(3, 3), stride=(2, 2), pad=(1, 1), pool_type='avg', "
        "pooling_convention='full', count_include_pad=False)"
    ),
    _case("mx.sym.Pooling(x, kernel=(2, 2), pool_type='max', global_pool=True)"),
    _case("mx.sym.Pooling(x, kernel=(1, 1), pool_type='avg', global_pool=True)"),
    # clip (hardtanh)
    _case("mx.sym.clip(x, 0, 20) * 10", (3, 4)),
    _case("mx.sym.clip(x, -0.5, 0.25)", (3, 4), F64),
    _case("mx.sym.clip(x, -3.7, 4.2)", (3, 4), I32),
    # argmax: the input's dtype; no axis: the flattened input's index, shape (1,)
    _case("mx.sym.argmax(x, axis=1)", (3, 5, 2)),
    _case("mx.sym.argmax(x, axis=-1, keepdims=True)", (3, 5, 2), F64),
    _case("mx.sym.argmax(x)", (3, 5)),
    _case("mx.sym.argmax(x, keepdims=True)", (3, 5, 2)),
]
# The reductions: one table, the same axis / keepdims / exclude variants for each.
_AXES = [
    "",
    ", axis=1",
    ", axis=(0, 2), keepdims=True",
    ", axis=-1",
    ", axis=(), keepdims=True",
    ", axis=1, exclude=True",
    ", axis=(0, 2), exclude=True",
    ", axis=-1, exclude=True, keepdims=True",
    ", axis=(-3, -1), exclude=True",
    ", axis=(0, 1, 2), exclude=True",
]
for _op in ("sum", "mean", "max", "min", "prod"):
    CASES += [_case(f"mx.sym.{_op}(x{axes})", (2, 3, 4)) for axes in _AXES]
    CASES += [_case(f"mx.sym.{_op}(x, axis=1)", (2, 3, 4), dtype) for dtype in (F64, I32)]


@pytest.mark.parametrize(("text", "shape", "dtype"), CASES)
def test_op_matches_mxnet(tmp_path, text, shape, dtype):
    x = mx.sym.var("x", dtype=dtype)  # __dtype__: the input's type in the symbol
    sym = eval(text, {"mx": mx, "x": x})
    rng = np.random.default_rng(1)
    feed = _feed(shape, dtype, rng)
    if "prod" in text and dtype.kind == "f":  # factors away from 0 and 1: no under/overflow
        feed = (np.sign(feed) * rng.uniform(0.5, 1.5, shape)).astype(dtype)
    check_symbol(tmp_path, sym, {"x": feed})


def test_float64_convolution_is_refused_by_onnx_runtime_naming_the_node(tmp_path):
    """MXNet convolves float64; ONNX Runtime's CPU Conv takes float32 only, and says so."""
    x = mx.sym.var("x", dtype=F64)
    sym = mx.sym.Convolution(x, kernel=(3, 3), num_filter=5, name="c")
    feeds = {"x": _feed(IMAGE, F64, np.random.default_rng(0))}
    params = symbol_values(sym, feeds, np.random.default_rng(1))
    model = fb.load(save_symbol(sym, params, tmp_path / "op"))
    with pytest.raises(fb.ExecutionError, match=r"ONNX Runtime refused .*'c/Conv'"):
        fb.Session(model).run(feeds)


# -- RNN in every mode ---------------------------------------------------------------------------
T, N, IN, H = 6, 3, 4, 5
LENGTHS = np.array([6, 2, 4], np.float32)


def _rnn_symbol(mode: str, layers: int, bidirectional: bool, lengths: bool):
    states = [mx.sym.var("h0")] + ([mx.sym.var("c0")] if mode == "lstm" else [])
    extra = {"sequence_length": mx.sym.var("len")} if lengths else {}
    return mx.sym.RNN(
        mx.sym.var("x"),
        mx.sym.var("params"),
        *states,
        state_size=H,
        num_layers=layers,
        mode=mode,
        bidirectional=bidirectional,
        state_outputs=True,
        use_sequence_length=lengths,
        name="rnn",
        **extra,
    )


def _rnn_feeds(mode: str, layers: int, d: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((T, N, IN)).astype(np.float32)}
    for s in ["h0"] + (["c0"] if mode == "lstm" else []):
        feeds[s] = (0.5 * rng.standard_normal((layers * d, N, H))).astype(np.float32)
    return feeds


@pytest.mark.parametrize("lengths", [False, True], ids=["no lengths", "lengths"])
@pytest.mark.parametrize("bidirectional", [False, True], ids=["forward", "bidirectional"])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("mode", ["lstm", "rnn_tanh", "rnn_relu", "gru"])
def test_rnn_matches_mxnet(tmp_path, mode, layers, bidirectional, lengths):
    """Output and final states (state_outputs). MXNet's CPU RNN ignores use_sequence_length in
    every mode (test_cpu_rnn_ignores_sequence_length), so with lengths each sentence is
    compared with MXNet running it alone at its length, its own initial states."""
    d = 2 if bidirectional else 1
    feeds = _rnn_feeds(mode, layers, d)
    plain = _rnn_symbol(mode, layers, bidirectional, lengths=False)
    if not lengths:
        model = check_symbol(tmp_path, plain, feeds)
        types = {n.op_type for n in model.graph}
        assert {"lstm": "LSTM", "gru": "FusionGRU"}.get(mode, "RNN") in types
        return
    sym = _rnn_symbol(mode, layers, bidirectional, lengths=True)
    feeds["len"] = LENGTHS
    values = {**feeds, **symbol_values(sym, feeds, np.random.default_rng(0))}
    params = {"params": values["params"]}
    model = fb.load(save_symbol(sym, params, tmp_path / "rnn"))
    ours = list(fb.Session(model).run(feeds).values())
    bounds = list(output_bounds(model, feeds, (SESSION, MXNET)).values())
    for i, n in enumerate(LENGTHS.astype(int)):
        states = {k: v[:, i : i + 1] for k, v in feeds.items() if k in ("h0", "c0")}
        alone = {"x": feeds["x"][:n, i : i + 1], **states}
        theirs = run_symbol(plain, {**alone, **params})
        where = f"sentence {i} (length {n})"
        assert_within(ours[0][:n, i], theirs[0][:, 0], bounds[0][:n, i], f"{where} output")
        assert not ours[0][n:, i].any(), f"{where}: the padded steps are zeros"
        for k in range(1, len(theirs)):
            assert_within(ours[k][:, i], theirs[k][:, 0], bounds[k][:, i], f"{where} state {k}")


@pytest.mark.parametrize("zero", ["h0", "c0"])
def test_lstm_with_one_zero_begin_state(tmp_path, zero):
    """gluon's begin state is _zeros of shape (L*D, 0, H), the batch known only when it runs;
    one beside a given state becomes zeros of that state's shape."""
    states = {k: mx.sym.zeros((2, 0, H)) if k == zero else mx.sym.var(k) for k in ("h0", "c0")}
    sym = mx.sym.RNN(
        mx.sym.var("x"), mx.sym.var("params"), states["h0"], states["c0"], state_size=H,
        num_layers=1, mode="lstm", bidirectional=True, state_outputs=True, name="rnn",
    )  # fmt: skip
    feeds = _rnn_feeds("lstm", 1, 2)
    del feeds[zero]
    check_symbol(tmp_path, sym, feeds)


def test_cpu_rnn_ignores_sequence_length(tmp_path):
    """What the per-sentence comparison above rests on: with lengths, MXNet 1.9.1's CPU RNN
    gives the same numbers as without, in every mode (gru: test_mxnet_oracle.py)."""
    for mode in ("lstm", "rnn_tanh", "rnn_relu"):
        feeds = _rnn_feeds(mode, 1, 2)
        plain = _rnn_symbol(mode, 1, True, lengths=False)
        values = {**feeds, **symbol_values(plain, feeds, np.random.default_rng(0))}
        with_lengths = _rnn_symbol(mode, 1, True, lengths=True)
        got = run_symbol(with_lengths, {**values, "len": LENGTHS})
        for a, b in zip(got, run_symbol(plain, values)):
            np.testing.assert_array_equal(a, b, err_msg=mode)
