"""One program per op as Paddle 3.3 writes it with PIR on (`paddle.jit.save` of a paddle.nn.Layer
whose forward calls that op over its attribute variants and dtypes), and what Paddle's own
dygraph op gives on fixed feeds: the PIR form's per-op oracle (the legacy form's is
tests/integrations/paddle/test_op_converters.py).

Run in a child process of its own (PIR is chosen when paddle is first imported), all programs in
that one process:

    python tests/helpers/pir_op_programs.py OUT_DIR

writes OUT_DIR/<op>/model.json + .pdiparams, feeds.npz and expected.npz (outputs in order)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np

rng = np.random.default_rng(7)


def _rand(*shape: int, low: float = -1.0, high: float = 1.0) -> np.ndarray:
    return rng.uniform(low, high, size=shape).astype(np.float32)


def _small_ints(*shape: int, dtype=np.float32) -> np.ndarray:
    return rng.integers(-2, 3, size=shape).astype(dtype)


def programs() -> dict[str, tuple[Callable, dict[str, np.ndarray]]]:
    """op name -> (forward(paddle, *inputs) -> outputs, feeds by input name)."""
    comparisons = {
        name: (
            lambda pd, x, y, y3, ids, i1, name=name: (
                getattr(pd, name)(x, y),
                getattr(pd, name)(x, y3),
                getattr(pd, name)(ids, i1),
            ),
            {
                "x": _small_ints(2, 3, 4),
                "y": _small_ints(2, 3, 4),
                "y3": _small_ints(3, 1),
                "ids": _small_ints(3, 5, dtype=np.int64),
                "i1": _small_ints(1, dtype=np.int64),
            },
        )
        for name in (
            "less_than",
            "less_equal",
            "greater_than",
            "greater_equal",
            "equal",
            "not_equal",
        )
    }
    x234 = {"x": _rand(2, 3, 4, low=0.5, high=1.5) * rng.choice([-1, 1], (2, 3, 4))}
    reductions = {
        name: (
            lambda pd, x, name=name: (
                getattr(pd, name)(x, 1),
                getattr(pd, name)(x, [-1, 0]),
                getattr(pd, name)(x, 2, keepdim=True),
                getattr(pd, name)(x),
                getattr(pd, name)(x, keepdim=True),
            ),
            x234,
        )
        for name in ("sum", "mean", "max", "min", "prod")
    }
    image = {"x": _rand(2, 3, 7, 6)}
    weights = {"w": _rand(4, 3, 3, 3), "g": _rand(6, 1, 3, 3), "dw": _rand(3, 1, 3, 3)}

    def conv(pd, x):
        F = pd.nn.functional
        w, g, dw = (pd.to_tensor(weights[k]) for k in ("w", "g", "dw"))
        nhwc = x.transpose([0, 2, 3, 1])
        return (
            F.conv2d(x, w, padding=1),
            F.conv2d(x, w, stride=(2, 1), padding=[0, 1, 2, 0]),
            F.conv2d(x, w, dilation=2, padding=[2, 1]),
            F.conv2d(x, w, stride=2, padding="SAME"),
            F.conv2d(x, w, padding="VALID"),
            F.conv2d(x, g, groups=3),
            F.conv2d(x, dw, groups=3, padding=1),
            F.conv2d(nhwc, w, padding=1, data_format="NHWC"),
        )

    def pool(pd, x):
        F = pd.nn.functional
        return (
            F.max_pool2d(x, 2, 2),
            F.max_pool2d(x, 3, 2, padding=1),
            F.avg_pool2d(x, 3, 1, padding=1),
            F.avg_pool2d(x, 3, 1, padding=1, exclusive=False),
            F.max_pool2d(x, 3, 2, ceil_mode=True),
            F.avg_pool2d(x, 2, 2, padding="SAME"),
            F.adaptive_avg_pool2d(x, 1),
            F.adaptive_avg_pool2d(x, [7, 2]),
            F.max_pool2d(x.transpose([0, 2, 3, 1]), 2, 2, data_format="NHWC"),
        )

    stats = [_rand(3), _rand(3), _rand(3), _rand(3, low=0.2, high=2.0)]

    def batch_norm(pd, x, rows):
        F = pd.nn.functional
        scale, bias, mean, var = (pd.to_tensor(s) for s in stats)
        nhwc = x.transpose([0, 2, 3, 1])
        return (
            F.batch_norm(x, mean, var, scale, bias, training=False, epsilon=1e-3),
            F.batch_norm(nhwc, mean, var, scale, bias, False, epsilon=1e-3, data_format="NHWC"),
            F.batch_norm(rows, mean, var, scale, bias, training=False),
        )

    def shapes(pd, x, y):
        return (
            pd.squeeze(y, 1),
            pd.squeeze(y, [-1, 1]),
            pd.squeeze(y),
            pd.unsqueeze(x, 0),
            pd.unsqueeze(x, [-1, 0]),
            pd.unsqueeze(x, [2, 1]),
            pd.flatten(x.reshape([2, 3, 1, 2]), 1),
            pd.flatten(x.reshape([2, 3, 1, 2]), 1, 2),
        )

    def creation(pd, x, ids):
        n = pd.shape(ids)[0]
        return (
            pd.full_like(x, 2.5),
            pd.zeros_like(ids),
            pd.full_like(ids, 3, dtype="float32"),
            pd.arange(n, dtype="int64"),
            pd.arange(1, n * 2, 3),
            pd.arange(0.5, 3.0, 0.75),
        )

    def arithmetic(pd, a, b, x, y):
        F = pd.nn.functional
        return (
            pd.floor_divide(a, b),
            pd.maximum(x, y),
            pd.minimum(x, y.unsqueeze(0)),
            pd.pow(pd.abs(x) + 0.1, y),
            F.hardtanh(x * 30),
            F.hardtanh(x * 30, -1.0, 2.5),
            pd.argmax(x, -1),
            pd.argmax(x, 0, keepdim=True),
        )

    divisors = rng.choice(np.int64([-3, -2, -1, 1, 2, 3]), size=(3, 4))
    return {
        **comparisons,
        **reductions,
        "conv2d": (conv, image),
        "pool2d": (pool, image),
        "batch_norm": (batch_norm, {"x": _rand(2, 3, 4, 5) * 3, "rows": _rand(4, 3) * 3}),
        "squeeze_unsqueeze_flatten": (shapes, {"x": _rand(2, 3, 2), "y": _rand(2, 1, 3, 1)}),
        "full_like_arange": (creation, {"x": _rand(2, 3), "ids": np.arange(5, dtype=np.int64)}),
        "arithmetic": (
            arithmetic,
            {
                "a": rng.integers(-9, 10, size=(3, 4)).astype(np.int64),
                "b": divisors,
                "x": _rand(3, 4),
                "y": _rand(3, 4, low=-2, high=2),
            },
        ),
    }


def main(out_dir: Path) -> None:
    import paddle

    class Program(paddle.nn.Layer):
        def __init__(self, body: Callable) -> None:
            super().__init__()
            self.body = body

        def forward(self, inputs):  # one list: dy2static wants a fixed signature
            return self.body(paddle, *inputs)

    for name, (body, feeds) in programs().items():
        layer = Program(body)
        layer.eval()
        specs = [paddle.static.InputSpec(list(v.shape), str(v.dtype), k) for k, v in feeds.items()]
        paddle.jit.save(layer, str(out_dir / name / "model"), input_spec=[specs])
        expected = layer([paddle.to_tensor(v) for v in feeds.values()])
        np.savez(out_dir / name / "feeds.npz", **feeds)
        np.savez(out_dir / name / "expected.npz", *[o.numpy() for o in expected])


if __name__ == "__main__":
    main(Path(sys.argv[1]))
