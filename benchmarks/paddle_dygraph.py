"""A dygraph training step (forward + backward) of an attention block inside Paddle, with
Paddle's own dropouts (F.softmax + F.dropout, matmul + F.dropout) and with ours as Paddle
custom operators (fusebridge.integrations.paddle.softmax_dropout / matmul_dropout, masks kept
or recomputed from the key): best step time, the cases taking turns, and what the forward's
resident memory grows by until the backward (its first forward, in a fresh process each: what
it holds for the backward plus what it allocated and freed, the same but for the dropouts).
Needs paddlepaddle."""

from __future__ import annotations

import subprocess
import sys

from benchmarks.common import markdown_table, missing_peer, timed_in_turns

SIZES = [(16, 128, 256), (64, 64, 128)]  # batch, steps, width
P_ATTN, P_OUT = 0.1, 0.1
VARIANTS = ("paddle", "fusebridge (masks kept)", "fusebridge (recompute from the key)")


def step_fn(variant: str, batch: int, steps: int, width: int, seed: int = 0):
    """(forward, backward) of the block with `variant`'s dropouts: forward() returns the loss,
    whose graph lives until backward(loss)."""
    import numpy as np
    import paddle
    import paddle.nn.functional as F

    import fusebridge.integrations.paddle as fbp
    from fusebridge import random

    rng = np.random.default_rng(seed)
    x = paddle.to_tensor(rng.standard_normal((batch, steps, width)).astype(np.float32))
    ws = [
        paddle.to_tensor((rng.standard_normal((width, width)) * 0.05).astype(np.float32),
                         stop_gradient=False)
        for _ in range(4)
    ]  # fmt: skip
    keys = iter(random.split(random.key(seed), 1 << 16))
    save_mask = variant != VARIANTS[2]

    def forward():
        q, k, v = (paddle.matmul(x, w) for w in ws[:3])
        scores = paddle.matmul(q, k, transpose_y=True)
        if variant == "paddle":
            attn = F.dropout(F.softmax(scores, -1), P_ATTN)
            y = F.dropout(paddle.matmul(paddle.matmul(attn, v), ws[3]), P_OUT)
        else:
            k1, k2 = random.split(next(keys))
            attn = fbp.softmax_dropout(scores, P_ATTN, key=k1, save_mask=save_mask)
            y = fbp.matmul_dropout(
                paddle.matmul(attn, v), ws[3], P_OUT, key=k2, save_mask=save_mask
            )
        return y.mean()

    def backward(loss):
        loss.backward()
        for w in ws:
            w.clear_grad()

    return forward, backward


_GROWTH = """
import sys
from benchmarks.paddle_dygraph import VARIANTS, step_fn
import fusebridge.integrations.paddle as fbp

fbp.register()
forward, backward = step_fn(VARIANTS[int(sys.argv[1])], *[int(a) for a in sys.argv[2:5]])
# No warm-up: Paddle's allocator would hand the second forward the first one's freed blocks.

def rss():
    return int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) // 1024

before = rss()
loss = forward()
print(rss() - before)
backward(loss)
"""


def _growth(variant: int, sizes: tuple[int, int, int]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", _GROWTH, str(variant), *map(str, sizes)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    return done.stdout.split()[-1] if done.returncode == 0 else "failed"


def run(quick: bool = False, threads: int = 2) -> str:
    title = f"Paddle dygraph attention training step, our dropouts vs Paddle's, {threads} threads"
    missing = missing_peer("paddle", title, "pip install -e '.[bench]'")
    if missing is not None:
        return missing
    import fusebridge.integrations.paddle as fbp

    fbp.register()
    rows = []
    for sizes in SIZES:
        steps = [step_fn(name, *sizes) for name in VARIANTS]
        cases = [(name, lambda f=f, b=b: b(f())) for name, (f, b) in zip(VARIANTS, steps)]
        best = dict(timed_in_turns(cases, 5 if quick else 20))
        for k, name in enumerate(VARIANTS):
            ratio = best["paddle"] / best[name]
            grown = _growth(k, sizes)
            rows.append([*map(str, sizes), name, f"{1e3 * best[name]:.2f}", f"{ratio:.2f}", grown])
    header = [
        "batch",
        "steps",
        "width",
        "dropouts",
        "best ms",
        "Paddle / this",
        "forward keeps MiB",
    ]
    return f"### {title}\n\n" + markdown_table(header, rows)


if __name__ == "__main__":
    print(run())
