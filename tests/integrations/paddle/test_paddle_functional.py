"""The dygraph face of our ops (fusebridge.integrations.paddle.dropout / softmax_dropout): bits
of fusebridge.kernels for the same explicit key, argument errors as fusebridge errors, and a
small attention block trained with them: its loss goes down, and its gradients are those of
Paddle's own ops (softmax, matmul, multiply) given the same keep masks."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
import pytest
from helpers.error_bounds import PADDLE, assert_within
from helpers.graph_bounds import GraphBounds
from helpers.paddle_oracle import paddle_or_skip
from onnx import helper

import fusebridge.integrations.paddle as fbp
from fusebridge import kernels, random
from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels import reference

pytestmark = pytest.mark.paddle


@pytest.fixture(scope="module", autouse=True)
def built(tmp_path_factory):
    """The op library's cache folder (this process's ops come from the first one built)."""
    paddle_or_skip()
    cache = tmp_path_factory.mktemp("paddle_ops")
    fbp.register(cache)
    return cache


def test_the_same_key_gives_the_kernels_bits():
    import paddle

    x = np.random.default_rng(0).standard_normal((8, 33)).astype(np.float32)
    k1, k2 = random.split(random.key(42))
    a = fbp.dropout(paddle.to_tensor(x), 0.3, key=k1)
    np.testing.assert_array_equal(a.numpy(), kernels.dropout(x, 0.3, seed=k1.seed, offset=0))
    np.testing.assert_array_equal(fbp.dropout(paddle.to_tensor(x), 0.3, key=k1).numpy(), a)
    assert not np.array_equal(fbp.dropout(paddle.to_tensor(x), 0.3, key=k2).numpy(), a)
    s = fbp.softmax_dropout(paddle.to_tensor(x), 0.3, key=random.Key(k1.seed, 7))
    want = kernels.softmax_dropout(x, 0.3, seed=k1.seed, offset=7)
    np.testing.assert_array_equal(s.numpy(), want)
    eval_mode = fbp.dropout(paddle.to_tensor(x), 0.3, key=k1, training=False)
    np.testing.assert_array_equal(eval_mode.numpy(), x)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda x: fbp.dropout(x, 0.5, key=7), ArgumentTypeError, "key must be a fusebridge"),
        (lambda x: fbp.dropout(x, 1.5, key=random.key(1)), ArgumentError, r"p must lie in"),
        (
            lambda x: fbp.softmax_dropout(x, 0.5, key=random.key(1), mode="x"),
            ArgumentError,
            r"mode must be one of",
        ),
    ],
)
def test_bad_arguments_are_fusebridge_errors(call, error, message):
    import paddle

    with pytest.raises(error, match=message):
        call(paddle.ones([2, 3]))


D, T = 16, 10  # model width, sequence length


def _block(paddle, seed: int):
    """An attention block's weights (q, k, v, out projections), the same for every run."""
    rng = np.random.default_rng(seed)
    return [
        paddle.to_tensor(
            (rng.standard_normal((D, D)) * 0.3).astype(np.float32), stop_gradient=False
        )
        for _ in range(4)
    ]


def _forward(paddle, x, ws, drop, softmax_drop):
    q, k, v = (paddle.matmul(x, w) for w in ws[:3])
    scores = paddle.matmul(q, k, transpose_y=True) / np.float32(np.sqrt(D))
    attn = softmax_drop(scores)
    return drop(paddle.matmul(paddle.matmul(attn, v), ws[3]))


def _masks(x_shape, scores_shape, key):
    """The keep masks (scaled) our two dropouts draw for this key, as Paddle tensors' data."""
    k_attn, k_out = random.split(key)
    _, m_attn = kernels.softmax_dropout(
        np.zeros(scores_shape, np.float32), 0.2, seed=k_attn.seed, return_mask=True
    )
    _, m_out = kernels.dropout(
        np.zeros(x_shape, np.float32), 0.1, seed=k_out.seed, return_mask=True
    )
    attn = reference.unpack_mask(m_attn, scores_shape).astype(np.float32) / np.float32(0.8)
    out = reference.unpack_mask(m_out, x_shape).astype(np.float32) / np.float32(0.9)
    return attn, out


def _ours(key):
    k_attn, k_out = random.split(key)
    return (
        lambda t: fbp.dropout(t, 0.1, key=k_out, save_mask=False),
        lambda t: fbp.softmax_dropout(t, 0.2, key=k_attn),
    )


def _gradients_graph(ws: list[np.ndarray], masks: tuple[np.ndarray, np.ndarray]) -> ir.Model:
    """_forward, mean(y * y) and its gradients by the four weights (wq, wk, wv, wo) as an ONNX
    graph, the backward written out (softmax's as ys * (g - sum(g * ys))), for graph_bounds."""
    h = helper
    consts = {
        "wq": ws[0], "wk": ws[1], "wv": ws[2], "wo": ws[3], "m_attn": masks[0], "m_out": masks[1],
        "scale": np.float32(1 / np.sqrt(D)), "two_over_n": np.float32(2 / (2 * T * D)),
        "axis0": np.array([0], np.int64), "last": np.array([-1], np.int64),
    }  # fmt: skip
    n = h.make_node
    swap = [0, 2, 1]
    nodes = [
        n("MatMul", ["x", "wq"], ["q"]), n("MatMul", ["x", "wk"], ["k"]),
        n("MatMul", ["x", "wv"], ["v"]), n("Transpose", ["k"], ["kT"], perm=swap),
        n("MatMul", ["q", "kT"], ["qk"]), n("Mul", ["qk", "scale"], ["s"]),
        n("Softmax", ["s"], ["ys"], axis=-1), n("Mul", ["ys", "m_attn"], ["p"]),
        n("MatMul", ["p", "v"], ["o"]), n("MatMul", ["o", "wo"], ["z"]),
        n("Mul", ["z", "m_out"], ["y"]),
        # the backward of mean(y * y)
        n("Mul", ["y", "two_over_n"], ["gy"]), n("Mul", ["gy", "m_out"], ["gz"]),
        n("Transpose", ["o"], ["oT"], perm=swap), n("MatMul", ["oT", "gz"], ["g_wo_b"]),
        n("Transpose", ["wo"], ["woT"], perm=[1, 0]), n("MatMul", ["gz", "woT"], ["go"]),
        n("Transpose", ["p"], ["pT"], perm=swap), n("MatMul", ["pT", "go"], ["gv"]),
        n("Transpose", ["v"], ["vT"], perm=swap), n("MatMul", ["go", "vT"], ["gp"]),
        n("Mul", ["gp", "m_attn"], ["gys"]), n("Mul", ["gys", "ys"], ["gys_ys"]),
        n("ReduceSum", ["gys_ys", "last"], ["dot"], keepdims=1),
        n("Sub", ["gys", "dot"], ["centered"]), n("Mul", ["ys", "centered"], ["gs_raw"]),
        n("Mul", ["gs_raw", "scale"], ["gs"]), n("MatMul", ["gs", "k"], ["gq"]),
        n("Transpose", ["gs"], ["gsT"], perm=swap), n("MatMul", ["gsT", "q"], ["gk"]),
        n("Transpose", ["x"], ["xT"], perm=swap),
    ]  # fmt: skip
    for w, g in (("q", "gq"), ("k", "gk"), ("v", "gv")):
        nodes += [n("MatMul", ["xT", g], [f"g_w{w}_b"])]
    nodes += [n("ReduceSum", [f"g_w{w}_b", "axis0"], [f"g_w{w}"], keepdims=0) for w in "qkvo"]
    graph = h.make_graph(
        nodes, "attention_gradients",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, T, D])],
        [h.make_tensor_value_info(f"g_w{w}", onnx.TensorProto.FLOAT, [D, D]) for w in "qkvo"],
        [onnx.numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()],
    )  # fmt: skip
    return ir.from_proto(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]))


def test_gradients_are_paddles_own_for_the_same_masks():
    """Within both implementations' error bounds of the block's gradients
    (tests/helpers/graph_bounds.py on _gradients_graph): Paddle's ops everywhere but our two
    dropouts on one side."""
    import paddle
    import paddle.nn.functional as F

    x_data = np.random.default_rng(1).standard_normal((2, T, D)).astype(np.float32)
    x = paddle.to_tensor(x_data)
    key = random.key(9)
    attn_mask, out_mask = _masks([2, T, D], [2, T, T], key)
    grads = []
    for which in ("ours", "paddle"):
        ws = _block(paddle, 3)
        if which == "ours":
            drop, softmax_drop = _ours(key)
        else:
            drop = lambda t, m=out_mask: t * paddle.to_tensor(m)  # noqa: E731
            softmax_drop = lambda t, m=attn_mask: F.softmax(t, -1) * paddle.to_tensor(m)  # noqa: E731
        y = _forward(paddle, x, ws, drop, softmax_drop)
        (y * y).mean().backward()
        grads.append([w.grad.numpy() for w in ws])
    weights = [w.numpy() for w in _block(paddle, 3)]
    exact = GraphBounds(_gradients_graph(weights, (attn_mask, out_mask)), PADDLE)
    exact = exact.bounds({"x": x_data})  # the float64 gradients and one side's bounds
    for k, (ours, theirs) in enumerate(zip(*grads)):
        value, bound = exact[f"g_w{'qkvo'[k]}"]
        assert_within(theirs, value, bound, f"Paddle's g_w{'qkvo'[k]}, against the graph")
        assert_within(ours, theirs, 2 * bound, f"g_w{'qkvo'[k]}")


def test_a_small_training_loop_learns():
    import paddle

    rng = np.random.default_rng(2)
    x = paddle.to_tensor(rng.standard_normal((8, T, D)).astype(np.float32))
    target = paddle.to_tensor(rng.standard_normal((8, T, D)).astype(np.float32) * 0.5)
    ws = _block(paddle, 4)
    opt = paddle.optimizer.Adam(learning_rate=0.02, parameters=ws)
    keys = random.split(random.key(0), 60)
    losses = []
    for step_key in keys:
        drop, softmax_drop = _ours(step_key)
        loss = ((_forward(paddle, x, ws, drop, softmax_drop) - target) ** 2).mean()
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(float(loss))
    assert np.mean(losses[-10:]) < 0.8 * np.mean(losses[:10]), losses


_FORWARD_RSS = """
import sys
import numpy as np, paddle
import paddle.nn.functional as F
import fusebridge.integrations.paddle as fbp
from fusebridge import random

fbp.register(sys.argv[2])
which = sys.argv[1]
x = paddle.to_tensor(np.ones(1 << 22, np.float32), stop_gradient=False)  # 16 MiB
drops = {
    "paddle": lambda h, i: F.dropout(h, 0.1),
    "mask": lambda h, i: fbp.dropout(h, 0.1, key=random.Key(1, i << 40)),
    "recompute": lambda h, i: fbp.dropout(h, 0.1, key=random.Key(1, i << 40), save_mask=False),
}

def rss():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024

before = rss()
h = x
for i in range(8):  # what each dropout keeps for its backward lives until backward()
    h = drops[which](h * 1.0001, i)
loss = h.sum()
print(rss() - before)
loss.backward()
"""


def test_our_masks_take_less_memory_than_paddles(built):
    """The forward of 8 dropouts of 4 Mi elements, in a fresh process each: what its resident
    memory grows by until the backward (MiB). Paddle keeps a byte a element for each backward
    (32 MiB), ours a bit (4 MiB) or, recomputing from the key, nothing; the rest (the
    outputs, Paddle's allocator) is the same in each."""
    from helpers.python_under_test import run_python

    grown = {}
    for which in ("paddle", "mask", "recompute"):
        done = run_python(_FORWARD_RSS, which, str(built), timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        grown[which] = int(done.stdout.split()[-1])
    assert grown["mask"] <= grown["paddle"] - 16, grown
    assert grown["recompute"] <= grown["mask"] + 2, grown
