"""Our GRU as a Paddle custom op (integrations/paddle/op_library.py) beside Paddle's own
threaded ops: Paddle's OpenMP (libiomp5) and the kernels' pool in one process. Times the
bidirectional GRU op alone and right after a Paddle matmul, interleaved, and counts the
process's threads (one kernels pool for _C and the op library: docs/design.md). What the
op's per-call packing cost before its weights were packed once:
`python -m benchmarks.op_library_builds --framework paddle --base <older build's python>`.
Run it twice to see whether Intel's pool spins into our time:

    python -m benchmarks.paddle_ops_threads
    KMP_BLOCKTIME=0 python -m benchmarks.paddle_ops_threads
"""

from __future__ import annotations

import os
import time

import numpy as np

T, N, IC, OC, MATMUL, THREADS = 50, 16, 128, 128, 1024, 2


def main(rounds: int = 40) -> str:
    import paddle

    from fusebridge import kernels
    from fusebridge.integrations.paddle import op_library

    ops = op_library.register()
    # Paddle sets OMP_NUM_THREADS=1 when imported, and fusebridge starts with that count, as
    # every OpenMP library would: the op follows fusebridge.kernels' count, set here.
    kernels.set_num_threads(THREADS)
    rng = np.random.default_rng(0)
    x = rng.standard_normal((T, N, IC)).astype(np.float32)
    wx = (rng.standard_normal((2, IC, 3 * OC)) * 0.1).astype(np.float32)
    wh = (rng.standard_normal((2, OC, 3 * OC)) * 0.1).astype(np.float32)
    b = np.zeros((2, 3 * OC), np.float32)
    lens = rng.integers(5, T + 1, N).astype(np.int64)
    # The op takes its weights packed once (as fb.save_paddle writes them): no call packs.
    w = kernels.pack_gru_weights(wx, wh, b, b)
    packed = [np.array(a) for a in (w.wx, w.wh, w.bias_x, w.bias_hc)]
    args = [paddle.to_tensor(a) for a in (x, lens, *packed)]
    attrs = ("bidirectional", "tnc", True, True, "tanh", "sigmoid")
    a = paddle.to_tensor(rng.standard_normal((MATMUL, MATMUL)).astype(np.float32))

    def gru():
        return ops.fusebridge_fusion_gru(*args, None, *attrs)

    want = kernels.fusion_gru(
        x, wx, wh, b, bias_h=b, seq_lens=lens, layout="tnc", direction="bidirectional",
        linear_before_reset=True,
    )  # fmt: skip
    same = np.array_equal(gru().numpy(), want)
    alone, after, matmul = [], [], []
    for _ in range(rounds):  # interleaved: alone, then matmul + GRU
        t0 = time.perf_counter()
        gru()
        alone.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        paddle.matmul(a, a)
        t1 = time.perf_counter()
        gru()
        after.append(time.perf_counter() - t1)
        matmul.append(t1 - t0)
    threads = open("/proc/self/status").read().split("Threads:")[1].split()[0]
    ms = [1e3 * float(np.median(v)) for v in (alone, after, matmul)]
    return "\n".join(
        [
            f"KMP_BLOCKTIME={os.environ.get('KMP_BLOCKTIME', 'unset')}, median of {rounds}:",
            f"GRU op (T {T}, N {N}, {IC}/{OC}, bidirectional, {THREADS} threads) alone "
            f"{ms[0]:.2f} ms, right "
            f"after a {MATMUL}^3 Paddle matmul ({ms[2]:.1f} ms) {ms[1]:.2f} ms",
            f"threads in the process: {threads}; same bits as fusebridge.kernels: {same}",
        ]
    )


if __name__ == "__main__":
    print(main())
