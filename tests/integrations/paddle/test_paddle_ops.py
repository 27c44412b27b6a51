"""fusebridge's kernels as Paddle custom operators (integrations/paddle/op_library.py): built
once per test session into a temporary cache, run in dygraph and in a static program. The
dropout's bits equal fusebridge.kernels.dropout's and the NumPy reference's (Philox, docs/
dropout.md); its gradient is Paddle's autograd through the grad op; the GRU equals the NumPy
reference GRU written from the formula. Errors are Paddle errors naming the op and the input
or attribute."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from helpers.error_bounds import (
    FUSEBRIDGE,
    PADDLE,
    U,
    assert_within,
    gamma,
    padded_gru_bound,
    softmax_backward_bound,
)
from helpers.paddle_oracle import paddle_or_skip

from fusebridge import kernels
from fusebridge.kernels import reference

pytestmark = pytest.mark.paddle


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    paddle_or_skip()
    from fusebridge.integrations.paddle import op_library

    return op_library.register(tmp_path_factory.mktemp("paddle_ops"))


def _key(seed: int, offset: int):
    import paddle

    return paddle.to_tensor(np.array([seed, offset], np.int64))


def _packed(wx, wh, b, bh) -> list:
    """The GRU op's weight inputs: packed once by fusebridge.kernels.pack_gru_weights."""
    import paddle

    w = kernels.pack_gru_weights(wx, wh, b, bh)
    return [paddle.to_tensor(np.array(a)) for a in (w.wx, w.wh, w.bias_x, w.bias_hc)]


DROPOUTS = [
    # shape, p, axes, mode, seed, offset
    ((3, 4, 5), 0.3, [], "upscale_in_train", 7, 0),
    ((3, 4, 5), 0.5, [1], "upscale_in_train", 2**63 + 5, 1000),  # 64-bit seed
    ((2, 7, 9), 0.1, [0, -1], "downgrade_in_infer", 11, 3),
    ((1000,), 0.9, [], "upscale_in_train", 0, 2**40),
    ((4, 6), 0.0, [], "upscale_in_train", 1, 0),
    ((4, 6), 1.0, [], "upscale_in_train", 1, 0),
]


@pytest.mark.parametrize(("shape", "p", "axes", "mode", "seed", "offset"), DROPOUTS)
def test_dropout_bits_and_grad_are_the_kernels(ops, shape, p, axes, mode, seed, offset):
    import paddle

    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    xt = paddle.to_tensor(x, stop_gradient=False)
    key = _key(seed - 2**64 if seed >= 2**63 else seed, offset)  # int64 holds the bits
    y, mask = ops.fusebridge_dropout(xt, key, p, mode, False, axes, True)
    want, want_mask = kernels.dropout(
        x, p, seed=seed, offset=offset, axes=axes, mode=mode, return_mask=True
    )
    np.testing.assert_array_equal(y.numpy(), want)
    np.testing.assert_array_equal(mask.numpy(), want_mask)
    # The independent oracle: Philox in NumPy, written from the paper and docs/dropout.md.
    mask_shape = tuple(1 if k in {a % len(shape) for a in axes} else d for k, d in enumerate(shape))
    ref, _ = reference.dropout(x, p, seed, offset, mask_shape, mode)
    # x times the keep scale: the scale's rounding to float32 and the product's
    assert_within(y.numpy(), ref, 2 * U * np.abs(ref), "dropout")
    dy = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    (y * paddle.to_tensor(dy)).sum().backward()
    grad = kernels.dropout_backward(dy, p, mask=want_mask, axes=axes, mode=mode)
    np.testing.assert_array_equal(xt.grad.numpy(), grad)


def test_without_a_mask_the_grad_is_recomputed_from_the_key(ops):
    import paddle

    x = np.random.default_rng(2).standard_normal((5, 64)).astype(np.float32)
    xt = paddle.to_tensor(x, stop_gradient=False)
    y, mask = ops.fusebridge_dropout(xt, _key(9, 4), 0.4, "upscale_in_train", False, [], False)
    assert mask.shape == [0]
    y.sum().backward()
    want_mask = kernels.dropout(x, 0.4, seed=9, offset=4, return_mask=True)[1]
    grad = kernels.dropout_backward(np.ones_like(x), 0.4, mask=want_mask)
    np.testing.assert_array_equal(xt.grad.numpy(), grad)


def test_is_test_keeps_everything(ops):
    import paddle

    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    for mode, scale in (("upscale_in_train", 1.0), ("downgrade_in_infer", 0.75)):
        y, _ = ops.fusebridge_dropout(paddle.to_tensor(x), _key(1, 0), 0.25, mode, True, [], True)
        np.testing.assert_array_equal(y.numpy(), x * np.float32(scale))


def test_dropout_in_a_static_program(ops):
    import paddle

    x = np.random.default_rng(3).standard_normal((6, 10)).astype(np.float32)
    paddle.enable_static()
    try:
        main = paddle.static.Program()
        with paddle.static.program_guard(main, paddle.static.Program()):
            xv = paddle.static.data("x", [-1, 10], "float32")
            kv = paddle.static.data("key", [2], "int64")
            y, mask = ops.fusebridge_dropout(xv, kv, 0.5, "upscale_in_train", False, [0], True)
        exe = paddle.static.Executor(paddle.CPUPlace())
        got, got_mask = exe.run(
            main, feed={"x": x, "key": np.array([5, 6], np.int64)}, fetch_list=[y, mask]
        )
    finally:
        paddle.disable_static()
    want, want_mask = kernels.dropout(x, 0.5, seed=5, offset=6, axes=[0], return_mask=True)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_mask, want_mask)


GRUS = [
    # direction, layout, linear_before_reset, origin_mode, activation, gate, h0
    ("forward", "tnc", False, True, "tanh", "sigmoid", False),
    ("reverse", "ntc", True, False, "relu", "sigmoid", True),
    ("bidirectional", "tnc", True, True, "tanh", "sigmoid", True),
    ("bidirectional", "ntc", False, False, "identity", "tanh", False),
]


@pytest.mark.parametrize(("direction", "layout", "lbr", "origin", "act", "gate", "h0"), GRUS)
def test_fusion_gru_matches_the_reference(ops, direction, layout, lbr, origin, act, gate, h0):
    import paddle

    rng = np.random.default_rng(4)
    t, n, ic, oc = 7, 4, 5, 6
    d = 2 if direction == "bidirectional" else 1
    lens = np.array([7, 0, 3, 5], np.int64)
    x = rng.standard_normal((t, n, ic) if layout == "tnc" else (n, t, ic)).astype(np.float32)
    wx = (rng.standard_normal((d, ic, 3 * oc)) * 0.4).astype(np.float32)
    wh = (rng.standard_normal((d, oc, 3 * oc)) * 0.4).astype(np.float32)
    b, bh = (rng.standard_normal((2, d, 3 * oc)) * 0.2).astype(np.float32)
    h = rng.standard_normal((d, n, oc)).astype(np.float32) if h0 else None
    attrs = dict(direction=direction, layout=layout, linear_before_reset=lbr, origin_mode=origin)
    attrs |= dict(activation=act, gate_activation=gate)  # the op's attribute order
    args = [paddle.to_tensor(x), paddle.to_tensor(lens), *_packed(wx, wh, b, bh)]
    h0_arg = None if h is None else paddle.to_tensor(h)
    y = ops.fusebridge_fusion_gru(*args, h0_arg, *attrs.values())
    want, _ = reference.gru(x, wx, wh, b, bias_h=bh, h0=h, seq_lens=lens, **attrs)
    tnc = x if layout == "tnc" else x.transpose(1, 0, 2)
    kw = {k: v for k, v in attrs.items() if k != "layout"}
    bound, _ = padded_gru_bound(tnc, wx, wh, b, bias_h=bh, h0=h, seq_lens=lens, **kw)
    assert_within(y.numpy(), want, bound if layout == "tnc" else bound.transpose(1, 0, 2))
    ours = kernels.fusion_gru(x, wx, wh, b, bias_h=bh, h0=h, seq_lens=lens, **attrs)
    np.testing.assert_array_equal(y.numpy(), ours)  # the same kernel, bit for bit


def _gru_inputs(**changes):
    import paddle

    # Packed weights for IC 4, OC 5 (OCp 16).
    shapes = dict(x=(3, 2, 4), lens=(2,), wx=(1, 1, 4, 3, 16), wh=(1, 1, 5, 3, 16))
    shapes |= dict(bias_x=(1, 3, 16), bias_hc=(1, 16))
    shapes |= changes
    arrays = [np.zeros(s, np.int64 if k == "lens" else np.float32) for k, s in shapes.items()]
    return [paddle.to_tensor(a) for a in arrays]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda ops, x, k: ops.fusebridge_dropout(x, k, 0.5, "bogus", False, [], True),
            r"fusebridge_dropout: attr 'mode' is 'bogus', expected one of 'upscale_in_train', "
            r"'downgrade_in_infer'",
        ),
        (
            lambda ops, x, k: ops.fusebridge_dropout(
                x, k, 1.5, "upscale_in_train", False, [], True
            ),
            r"fusebridge_dropout: attr 'p' is 1.5\d*, expected a value in \[0, 1\]",
        ),
        (
            lambda ops, x, k: ops.fusebridge_dropout(
                x, k, 0.5, "upscale_in_train", False, [2], True
            ),
            r"fusebridge_dropout: attr 'axes' \[2\]: axis 2 is out of range for x of rank 2",
        ),
        (
            lambda ops, x, k: ops.fusebridge_dropout(
                x, k[:1], 0.5, "upscale_in_train", False, [], True
            ),
            r"fusebridge_dropout: input 'Key' must be int64 \[2\] \(seed, offset\)",
        ),
        (
            lambda ops, x, k: ops.fusebridge_fusion_gru(
                *_gru_inputs(wh=(1, 5, 15)), None, "forward", "tnc", False, True, "tanh", "sigmoid"
            ),
            r"fusebridge_fusion_gru: input 'wh' must be packed \[D, ceil\(OC/16\), OC, 3, 16\]",
        ),
        (
            lambda ops, x, k: ops.fusebridge_fusion_gru(
                *_gru_inputs(bias_x=(1, 15)), None, "forward", "tnc", False, True, "tanh", "sigmoid"
            ),
            r"fusebridge_fusion_gru: input 'bias_x' must have shape \[1, 3, 16\]",
        ),
        (
            lambda ops, x, k: ops.fusebridge_fusion_gru(
                *_gru_inputs(), None, "sideways", "tnc", False, True, "tanh", "sigmoid"
            ),
            r"fusebridge_fusion_gru: attr 'direction' is 'sideways'",
        ),
    ],
)
def test_bad_inputs_are_paddle_errors_naming_the_op(ops, call, message):
    import paddle

    x, key = paddle.ones([3, 4]), _key(1, 0)
    with pytest.raises(OSError, match=message):
        call(ops, x, key)


def test_a_length_beyond_the_padding_is_named(ops):
    import paddle

    args = _gru_inputs()
    args[1] = paddle.to_tensor(np.array([3, 4], np.int64))  # T = 3
    with pytest.raises(OSError, match=r"input 'seq_lens' must hold whole numbers in \[0, 3\]"):
        ops.fusebridge_fusion_gru(*args, None, "forward", "tnc", False, True, "tanh", "sigmoid")


def test_register_is_once_per_process(ops, tmp_path):
    from fusebridge.integrations.paddle import op_library

    assert op_library.register(tmp_path / "elsewhere") is ops
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize(
    ("shape", "axis", "save_mask"), [((4, 9), -1, True), ((3, 5, 6), 1, False)]
)
def test_softmax_dropout_is_the_kernels_and_paddles_gradient(ops, shape, axis, save_mask):
    import paddle
    import paddle.nn.functional as F

    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    dy = np.random.default_rng(6).standard_normal(shape).astype(np.float32)
    xt = paddle.to_tensor(x, stop_gradient=False)
    y, mask = ops.fusebridge_softmax_dropout(
        xt, _key(3, 8), 0.4, "upscale_in_train", False, axis, save_mask
    )
    want, want_mask = kernels.softmax_dropout(x, 0.4, seed=3, offset=8, axis=axis, return_mask=True)
    np.testing.assert_array_equal(y.numpy(), want)
    assert mask.shape == ([want_mask.size] if save_mask else [0])
    (y * paddle.to_tensor(dy)).sum().backward()
    grad = kernels.softmax_dropout_backward(dy, 0.4, x=x, mask=want_mask, axis=axis)
    np.testing.assert_array_equal(xt.grad.numpy(), grad)
    # Paddle's own softmax and a multiply by the same keep mask: the same gradient.
    keep = reference.unpack_mask(want_mask, shape)
    xp = paddle.to_tensor(x, stop_gradient=False)
    out = F.softmax(xp, axis=axis) * paddle.to_tensor(keep.astype(np.float32) / 0.6)
    (out * paddle.to_tensor(dy)).sum().backward()
    g = dy * keep / 0.6  # the gradient at softmax's output
    bound = softmax_backward_bound(want, g, axis, FUSEBRIDGE)
    bound += softmax_backward_bound(want, g, axis, PADDLE)
    assert_within(xt.grad.numpy(), xp.grad.numpy(), bound, "softmax's gradient")


def test_paddles_openmp_and_our_pool_in_one_process_give_the_kernels_bits(ops):
    """Paddle brings Intel's OpenMP (libiomp5, for MKL and oneDNN), our kernels their own pool
    (csrc/parallel.hpp): both are loaded, each with its own threads. Paddle's threaded ops and
    ours, interleaved, give the results each gives alone."""
    import paddle

    maps = open("/proc/self/maps").read()
    assert "libiomp5" in maps
    rng = np.random.default_rng(7)
    a = rng.standard_normal((256, 256)).astype(np.float32)
    x = rng.standard_normal((64, 300)).astype(np.float32)
    want = kernels.dropout(x, 0.5, seed=1, offset=2)
    want_mm = np.asarray(paddle.matmul(paddle.to_tensor(a), paddle.to_tensor(a)))
    for _ in range(20):
        mm = paddle.matmul(paddle.to_tensor(a), paddle.to_tensor(a))
        y, _ = ops.fusebridge_dropout(
            paddle.to_tensor(x), _key(1, 2), 0.5, "upscale_in_train", False, [], True
        )
        np.testing.assert_array_equal(y.numpy(), want)
        np.testing.assert_array_equal(mm.numpy(), want_mm)


def test_a_saved_program_with_our_ops_runs_in_paddle_inference(ops, tmp_path):
    """A static program holding our dropout and GRU, saved by save_inference_model, runs in
    Paddle Inference in a process that registered the ops: the bits of fusebridge.kernels.
    Saving an inference model sets every op's is_test, ours too, as for Paddle's dropout: the
    saved dropout is the inference one (downgrade_in_infer: x * (1 - p))."""
    import paddle

    rng = np.random.default_rng(8)
    t, n, ic, oc = 6, 3, 4, 5
    x = rng.standard_normal((t, n, ic)).astype(np.float32)
    lens = np.array([6, 2, 4], np.int64)
    wx = (rng.standard_normal((2, ic, 3 * oc)) * 0.4).astype(np.float32)
    wh = (rng.standard_normal((2, oc, 3 * oc)) * 0.4).astype(np.float32)
    b = (rng.standard_normal((2, 3 * oc)) * 0.2).astype(np.float32)
    key = np.array([12, 34], np.int64)
    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            xv = paddle.static.data("x", [-1, -1, ic], "float32")
            lv = paddle.static.data("lens", [-1], "int64")
            kv = paddle.static.data("key", [2], "int64")
            packed = kernels.pack_gru_weights(wx, wh, b, b)
            weights = [paddle.assign(np.array(a)) for a in (packed.wx, packed.wh)]
            weights += [paddle.assign(np.array(a)) for a in (packed.bias_x, packed.bias_hc)]
            y = ops.fusebridge_fusion_gru(
                xv, lv, *weights, None, "bidirectional", "tnc", True, True, "tanh", "sigmoid"
            )
            out, _ = ops.fusebridge_dropout(y, kv, 0.25, "downgrade_in_infer", False, [1], True)
        exe = paddle.static.Executor(paddle.CPUPlace())
        exe.run(startup)
        prefix = str(tmp_path / "model")
        paddle.static.save_inference_model(prefix, [xv, lv, kv], [out], exe, program=main)
    finally:
        paddle.disable_static()
    from helpers.paddle_oracle import run_inference

    (got,) = run_inference(tmp_path, {"x": x, "lens": lens, "key": key})
    gru = kernels.fusion_gru(
        x, wx, wh, b, bias_h=b, seq_lens=lens, layout="tnc", direction="bidirectional",
        linear_before_reset=True,
    )  # fmt: skip
    want = kernels.dropout(gru, 0.25, seed=12, mode="downgrade_in_infer", training=False)
    np.testing.assert_array_equal(got, want)


MATMULS = [
    # a shape, b shape, transpose_a, transpose_b, save_mask
    ((5, 7), (7, 3), False, False, True),
    ((2, 4, 6), (6, 5), False, False, False),  # b shared by the batches
    ((3, 1, 4, 6), (1, 2, 5, 6), False, True, True),  # both broadcast
    ((3, 1, 4, 6), (2, 5, 6), False, True, True),  # and b of a lower rank
    ((2, 6, 4), (2, 6, 5), True, False, True),
]


@pytest.mark.parametrize(("a_shape", "b_shape", "ta", "tb", "save_mask"), MATMULS)
def test_matmul_dropout_is_the_kernels_and_its_grads_paddles(
    ops, a_shape, b_shape, ta, tb, save_mask
):
    import paddle

    rng = np.random.default_rng(9)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    at, bt = (paddle.to_tensor(v, stop_gradient=False) for v in (a, b))
    y, mask = ops.fusebridge_matmul_dropout(
        at, bt, _key(21, 5), 0.3, "upscale_in_train", False, ta, tb, save_mask
    )
    want, want_mask = kernels.matmul_dropout(
        a, b, 0.3, seed=21, offset=5, transpose_a=ta, transpose_b=tb, return_mask=True
    )
    np.testing.assert_array_equal(y.numpy(), want)
    assert mask.shape == ([want_mask.size] if save_mask else [0])
    dy = rng.standard_normal(want.shape).astype(np.float32)
    (y * paddle.to_tensor(dy)).sum().backward()
    da, db = kernels.matmul_dropout_backward(
        dy, a, b, 0.3, mask=want_mask, transpose_a=ta, transpose_b=tb
    )
    # Sums of products of |dz| and |b| (|a|): the same backward on absolute values gives
    # their magnitudes; no sum has more terms than dy has elements.
    abs_da, abs_db = kernels.matmul_dropout_backward(
        np.abs(dy), np.abs(a), np.abs(b), 0.3, mask=want_mask, transpose_a=ta, transpose_b=tb
    )
    bounds = [2 * gamma(dy.size + 2) * m for m in (abs_da, abs_db)]
    assert_within(at.grad.numpy(), da, bounds[0], "da")
    assert_within(bt.grad.numpy(), db, bounds[1], "db")
    if len(b_shape) not in (2, len(a_shape)):
        return  # Paddle 3.3's own matmul grad fails there ("Input dimension size should be 2")
    # Paddle's own matmul times the same keep mask: the same gradients.
    keep = reference.unpack_mask(want_mask, want.shape).astype(np.float32) / np.float32(0.7)
    ap, bp = (paddle.to_tensor(v, stop_gradient=False) for v in (a, b))
    out = paddle.matmul(ap, bp, transpose_x=ta, transpose_y=tb) * paddle.to_tensor(keep)
    (out * paddle.to_tensor(dy)).sum().backward()
    assert_within(at.grad.numpy(), ap.grad.numpy(), bounds[0], "Paddle's da")
    assert_within(bt.grad.numpy(), bp.grad.numpy(), bounds[1], "Paddle's db")


def test_matmul_shapes_that_do_not_chain_are_named(ops):
    import paddle

    a, b = paddle.ones([3, 4]), paddle.ones([5, 2])
    with pytest.raises(OSError, match=r"fusebridge_matmul_dropout: op\(A\) \[\.\.\., M, K\]"):
        ops.fusebridge_matmul_dropout(
            a, b, _key(1, 0), 0.5, "upscale_in_train", False, False, False, True
        )


# ---------------------------------------------------------------- one kernels runtime


def _gru_case(seed: int) -> tuple[list[np.ndarray], dict[str, object]]:
    """Inputs (x, lens, wx, wh, b, bh) of a bidirectional GRU big enough to use several
    threads, and the op's attributes."""
    rng = np.random.default_rng(seed)
    t, n, ic, oc = 40, 12, 64, 48
    arrays = [rng.standard_normal((t, n, ic)).astype(np.float32), rng.integers(1, t + 1, n)]
    arrays += [(rng.standard_normal((2, k, 3 * oc)) * 0.2).astype(np.float32) for k in (ic, oc)]
    arrays += list((rng.standard_normal((2, 2, 3 * oc)) * 0.1).astype(np.float32))
    attrs = dict(direction="bidirectional", layout="tnc", linear_before_reset=True)
    attrs |= dict(origin_mode=True, activation="tanh", gate_activation="sigmoid")
    return arrays, attrs


def _run_gru_op(ops, arrays, attrs, packed=None):
    import paddle

    x, lens, wx, wh, b, bh = arrays
    weights = packed if packed is not None else _packed(wx, wh, b, bh)
    args = [paddle.to_tensor(x), paddle.to_tensor(lens), *weights]
    return ops.fusebridge_fusion_gru(*args, None, *attrs.values()).numpy()


def _kernels_gru(arrays, attrs):
    x, lens, wx, wh, b, bh = arrays
    return kernels.fusion_gru(x, wx, wh, b, bias_h=bh, seq_lens=lens, **attrs)


def test_the_op_library_loads_the_kernels_core_loaded(ops):
    """One libfusebridge_kernels.so in the process, the one beside _C; the op library holds
    no kernel code of its own (it defines none of the symbols that library exports: it
    calls them there) and needs it."""
    import subprocess

    from fusebridge.integrations.kernels_library import installed_kernels

    def symbols(path: str, which: str) -> set[str]:
        out = subprocess.run(["nm", "-D", which, path], capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}

    maps = Path("/proc/self/maps").read_text().splitlines()
    mapped = {line.split()[-1] for line in maps if line.endswith(".so") and "/" in line}
    core_lib = str(installed_kernels().library.resolve())
    assert {p for p in mapped if p.endswith("/libfusebridge_kernels.so")} == {core_lib}
    (glue,) = [p for p in mapped if p.endswith("/fusebridge_paddle_ops.so")]
    exported = symbols(core_lib, "--defined-only")
    assert exported and not exported & symbols(glue, "--defined-only")
    assert exported & symbols(glue, "--undefined-only")


def test_set_isa_and_the_primitive_cache_reach_the_op_library(ops):
    """The op asks the process's one primitive cache (its misses and hits are the ones
    kernels.cache_stats counts) for a primitive of the ISA kernels.set_isa chose: each ISA is
    one more miss, then hits, and the op's bits are fusebridge.kernels' on that ISA."""
    from fusebridge.kernels.primitive_cache import clear_cache

    arrays, attrs = _gru_case(1)
    before_isa, capacity = kernels.isa(), kernels.cache_stats()["capacity"]
    kernels.set_cache_capacity(64)
    clear_cache()
    try:
        for k, isa in enumerate(kernels.available_isas(), start=1):
            kernels.set_isa(isa)
            got = _run_gru_op(ops, arrays, attrs)
            assert kernels.cache_stats()["misses"] == k, isa
            again = _run_gru_op(ops, arrays, attrs)
            assert kernels.cache_stats()["misses"] == k, "the op built its primitive again"
            np.testing.assert_array_equal(again, got)
            np.testing.assert_array_equal(got, _kernels_gru(arrays, attrs))  # a hit, same ISA
    finally:
        kernels.set_isa(before_isa)
        kernels.set_cache_capacity(capacity)


def test_one_pool_whose_thread_count_set_num_threads_sets(ops, tmp_path):
    """In a fresh process: the kernels' pool workers (threads named fusebridge-pool) are those
    of one pool, whether _C or the op library ran, and the op library runs on as many threads
    as kernels.set_num_threads says (Paddle's import sets OMP_NUM_THREADS=1)."""
    from helpers.python_under_test import run_python

    library_dir = Path(ops.__file__).resolve().parents[1]
    code = f"""
        from pathlib import Path
        import numpy as np, paddle
        from fusebridge import kernels
        from fusebridge.kernels import core
        from fusebridge.integrations.paddle import op_library

        def pool_threads():
            names = []
            for task in Path("/proc/self/task").iterdir():
                try:
                    names.append((task / "comm").read_text().strip())
                except OSError:
                    pass  # a thread that ended meanwhile
            return names.count("fusebridge-pool")

        ops = op_library.register({str(library_dir)!r})
        rng = np.random.default_rng(0)
        x = rng.standard_normal((40, 12, 64)).astype(np.float32)
        lens = rng.integers(1, 41, 12)
        w = kernels.pack_gru_weights(rng.standard_normal((2, 64, 144)).astype(np.float32),
                                     rng.standard_normal((2, 48, 144)).astype(np.float32))
        args = [paddle.to_tensor(np.array(a)) for a in (x, lens, w.wx, w.wh, w.bias_x, w.bias_hc)]
        attrs = ("bidirectional", "tnc", True, True, "tanh", "sigmoid")
        seen = []
        for n in (1, 2, 3):
            kernels.set_num_threads(n)
            ops.fusebridge_fusion_gru(*args, None, *attrs)
            seen.append((pool_threads(), core._C.pool_workers()))
            kernels.fusion_gru(x, w, seq_lens=lens, layout="tnc", direction="bidirectional",
                               linear_before_reset=True)
            seen.append((pool_threads(), core._C.pool_workers()))
        print(seen)
    """
    done = run_python(code, timeout=300)
    assert done.returncode == 0, done.stderr
    seen = eval(done.stdout.strip().splitlines()[-1])
    # One pool: after the op library's call with n threads and _C's, n - 1 workers in all.
    assert seen == [(0, 0), (0, 0), (1, 1), (1, 1), (2, 2), (2, 2)]


def test_weights_at_an_address_freed_and_taken_again_give_the_new_results(ops):
    """Nothing keyed by a weight's address survives a call: Paddle tensors of the weights
    freed, and new tensors of other values made at the very same addresses, give the new
    weights' results. The memory is ours (numpy arrays the tensors view through DLPack), so
    the addresses are the same by construction, not by the allocator's choice."""
    import paddle

    first, attrs = _gru_case(2)
    second, _ = _gru_case(3)
    old, new = (kernels.pack_gru_weights(*case[2:]) for case in (first, second))
    names = ("wx", "wh", "bias_x", "bias_hc")
    memory = [np.array(getattr(old, name)) for name in names]

    def viewed() -> list:
        return [paddle.utils.dlpack.from_dlpack(m) for m in memory]

    tensors = viewed()
    addresses = [t.data_ptr() for t in tensors]
    np.testing.assert_array_equal(
        _run_gru_op(ops, first, attrs, tensors), _kernels_gru(first, attrs)
    )
    del tensors
    for m, name in zip(memory, names):
        m[...] = getattr(new, name)
    tensors = viewed()
    assert [t.data_ptr() for t in tensors] == addresses
    got = _run_gru_op(ops, second, attrs, tensors)
    np.testing.assert_array_equal(got, _kernels_gru(second, attrs))
    assert not np.array_equal(got, _kernels_gru(first, attrs))
