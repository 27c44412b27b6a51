"""The cuda engine's benchmarks (docs/cuda.md), run by `python -m fusebridge.cuda.check` on a
GPU: each row times our op and its peers side by side, interleaved in blocks, with CUDA
events around many calls; the median per call is reported, ratios against the peers. TF32 is
off everywhere (torch's flags cleared, CuPy's matmul without CUPY_TF32)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable

import numpy as np

from fusebridge import cuda

BLOCKS = 5


def _time(fn: Callable[[], object], calls: int) -> float:
    """Milliseconds per call over `calls` back-to-back calls, by CUDA events."""
    import cupy

    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / calls


def compare(peers: dict[str, Callable[[], object]], calls: int) -> dict[str, dict]:
    """Median ms per call of each peer, interleaved: block b times every peer once, in a
    rotated order, after a short settle pause. Also the spread (min, max) of the blocks."""
    import cupy

    for fn in peers.values():  # warm-up: module load, compilation, allocator, cuBLAS handles
        fn()
    cupy.cuda.Device().synchronize()
    samples: dict[str, list[float]] = {name: [] for name in peers}
    names = list(peers)
    for block in range(BLOCKS):
        time.sleep(0.05)
        for name in names[block % len(names) :] + names[: block % len(names)]:
            samples[name].append(_time(peers[name], calls))
    return {
        name: {
            "ms": statistics.median(s),
            "min": min(s),
            "max": max(s),
            # the same calls again, all of one peer in a row, after the interleaved blocks
            "back_to_back_ms": _time(peers[name], calls * BLOCKS),
        }
        for name, s in samples.items()
    }


def _row(name: str, times: dict, ours: str, bytes_moved: dict[str, float] | None = None) -> dict:
    row = {"benchmark": name, "times": times}
    row["ratios"] = {
        peer: times[peer]["ms"] / times[ours]["ms"] for peer in times if peer != ours
    }  # > 1: ours is faster
    if bytes_moved:
        row["GB/s"] = {k: v / times[k]["ms"] / 1e6 for k, v in bytes_moved.items()}
    return row


def dropout_rows() -> list[dict]:
    import cupy
    import torch

    n = 256 << 20
    x = cupy.random.standard_normal(n, dtype=np.float32)
    y = cupy.empty_like(x)
    xt = torch.as_tensor(x, device="cuda")
    dy = cupy.random.standard_normal(n, dtype=np.float32)
    _, mask = cuda.dropout(x, 0.1, seed=1, return_mask=True)
    data = 2 * n * 4  # read x, write y
    fwd = compare(
        {
            "ours (y + 1-bit mask)": lambda: cuda.dropout(x, 0.1, seed=1, return_mask=True, out=y),
            "device copy": lambda: y.data.copy_from_device_async(x.data, n * 4),
            "torch F.dropout": lambda: torch.nn.functional.dropout(xt, 0.1, training=True),
        },
        calls=10,
    )
    moved = {
        "ours (y + 1-bit mask)": data + n / 8,
        "device copy": data,
        "torch F.dropout": data + n,
    }
    rows = [_row("dropout forward 256 Mi f32, p=0.1", fwd, "ours (y + 1-bit mask)", moved)]
    mask_t = torch.rand(n, device="cuda") > 0.1
    dyt = torch.as_tensor(dy, device="cuda")
    bwd = compare(
        {
            "ours from mask": lambda: cuda.dropout_backward(dy, 0.1, mask=mask, out=y),
            "ours recomputed": lambda: cuda.dropout_backward(dy, 0.1, seed=1, out=y),
            "torch native_dropout_backward": lambda: torch.ops.aten.native_dropout_backward(
                dyt, mask_t, 1 / 0.9
            ),
        },
        calls=10,
    )
    rows.append(_row("dropout backward 256 Mi f32", bwd, "ours from mask"))
    return rows


def softmax_rows() -> list[dict]:
    import cupy
    import torch

    shape = (16, 16, 512, 512)
    x = cupy.random.standard_normal(shape, dtype=np.float32)
    y = cupy.empty_like(x)
    xt = torch.as_tensor(x, device="cuda")
    fwd = compare(
        {
            "ours softmax_dropout": lambda: cuda.softmax_dropout(x, 0.1, seed=1, out=y),
            "torch softmax + dropout": lambda: torch.nn.functional.dropout(
                torch.softmax(xt, -1), 0.1, training=True
            ),
        },
        calls=10,
    )
    rows = [_row("softmax_dropout forward [16,16,512,512]", fwd, "ours softmax_dropout")]
    _, mask = cuda.softmax_dropout(x, 0.1, seed=1, return_mask=True)
    probs = cuda.softmax(x)
    dy = cupy.random.standard_normal(shape, dtype=np.float32)
    dx = cupy.empty_like(x)
    pt, dyt = torch.as_tensor(probs, device="cuda"), torch.as_tensor(dy, device="cuda")
    mask_t = torch.rand(shape, device="cuda") > 0.1

    def torch_backward():
        g = torch.ops.aten.native_dropout_backward(dyt, mask_t, 1 / 0.9)
        return torch.ops.aten._softmax_backward_data(g, pt, -1, torch.float32)

    bwd = compare(
        {
            "ours from probs + mask": lambda: cuda.softmax_dropout_backward(
                dy, 0.1, probs=probs, mask=mask, out=dx
            ),
            "ours from x, recomputed": lambda: cuda.softmax_dropout_backward(
                dy, 0.1, x=x, seed=1, out=dx
            ),
            "torch dropout + softmax backward": torch_backward,
        },
        calls=10,
    )
    rows.append(_row("softmax_dropout backward [16,16,512,512]", bwd, "ours from probs + mask"))
    return rows


def matmul_rows() -> list[dict]:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return [
        _matmul_row(4096, 4096, 4096, calls=5),
        _matmul_row(64, 512, 2048, calls=200),
    ]


def _matmul_row(m: int, k: int, n: int, calls: int) -> dict:
    import cupy

    a = cupy.random.standard_normal((m, k), dtype=np.float32)
    b = cupy.random.standard_normal((k, n), dtype=np.float32)
    y, g = cupy.empty((m, n), np.float32), cupy.empty((m, n), np.float32)
    times = compare(
        {
            "ours matmul_dropout": lambda: cuda.matmul_dropout(a, b, 0.1, seed=1, out=y),
            "bare cuBLAS GEMM": lambda: cupy.matmul(a, b, out=g),
        },
        calls=calls,
    )
    return _row(f"matmul_dropout [{m},{k}]x[{k},{n}]", times, "ours matmul_dropout")


GRU_SENTENCES = (1, 16, 64, 256)
GRU_HIDDEN = (128, 512)


def gru_rows() -> list[dict]:
    """fusion_gru against torch.nn.GRU (cuDNN) over sentences of 5..60 words, input size =
    hidden; torch gets them as a packed sequence (pack_padded_sequence of the padded batch,
    lengths on the host, inside the timed call, as a user calls it), ours as LoD rows."""
    import torch

    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    rng = np.random.default_rng(0)
    rows = []
    for hidden in GRU_HIDDEN:
        for bidirectional in (False, True):
            gru = torch.nn.GRU(hidden, hidden, bidirectional=bidirectional).cuda().eval()
            kernel = cuda.GRUKernel(
                cuda.pack_gru_weights(*_canonical_weights(gru)),
                direction="bidirectional" if bidirectional else "forward",
                linear_before_reset=True,
            )
            for n in GRU_SENTENCES:
                rows.append(_gru_row(kernel, gru, rng.integers(5, 61, n)))
    return rows


def _canonical_weights(gru) -> list[np.ndarray]:
    """torch.nn.GRU's layer 0 as canonical wx, wh, bias, bias_h: gates (r, z, n) reordered to
    (u, r, c), matrices transposed to act from the right."""
    h, d = gru.hidden_size, 2 if gru.bidirectional else 1

    def stacked(name: str) -> np.ndarray:
        per_dir = [getattr(gru, name + ("_reverse" if k else "")).detach().cpu().numpy()
                   for k in range(d)]  # fmt: skip
        return np.stack([np.concatenate([w[h : 2 * h], w[:h], w[2 * h :]]) for w in per_dir])

    return [
        stacked("weight_ih_l0").transpose(0, 2, 1),
        stacked("weight_hh_l0").transpose(0, 2, 1),
        stacked("bias_ih_l0"),
        stacked("bias_hh_l0"),
    ]


def _gru_row(kernel, gru, lens: np.ndarray) -> dict:
    import cupy
    import torch

    n, hidden, d = len(lens), gru.hidden_size, 2 if gru.bidirectional else 1
    offsets = np.concatenate([[0], np.cumsum(lens)])
    words = int(offsets[-1])
    x = cupy.random.standard_normal((words, hidden), dtype=np.float32)
    xt = torch.as_tensor(x, device="cuda")
    padded = torch.zeros(int(lens.max()), n, hidden, device="cuda")
    for i in range(n):
        padded[: lens[i], i] = xt[offsets[i] : offsets[i + 1]]
    lengths = torch.as_tensor(lens)
    out = cupy.empty((words, d * hidden), np.float32)

    def torch_call():
        with torch.no_grad():
            packed = torch.nn.utils.rnn.pack_padded_sequence(padded, lengths, enforce_sorted=False)
            return gru(packed)

    times = compare(
        {
            "ours fusion_gru": lambda: kernel(x, offsets=offsets, out=out),
            "torch nn.GRU (cuDNN), packed": torch_call,
        },
        calls=5,
    )
    kind = "bidirectional" if d == 2 else "forward"
    row = _row(
        f"gru {kind} hidden {hidden}, {n} sentences ({words} words)", times, "ours fusion_gru"
    )
    # The same outputs, cuDNN's as LoD rows: a cross-check of the engines on a real GPU
    # (float32 both, different summation orders: about 1e-6 of the values' size).
    theirs, _ = torch.nn.utils.rnn.pad_packed_sequence(torch_call()[0])
    rows = [theirs[: lens[i], i] for i in range(n)]
    ours = torch.as_tensor(kernel(x, offsets=offsets), device="cuda")
    row["max abs diff vs torch"] = float((ours - torch.cat(rows)).abs().max())
    return row


def run_all() -> list[dict]:
    rows = []
    for part in (dropout_rows, softmax_rows, matmul_rows, gru_rows, tune):
        try:
            rows.extend(part())
        except Exception as exc:
            rows.append({"benchmark": part.__name__, "error": repr(exc)})
    return rows


# What a row checks beside its timing (gru_rows; fusebridge.bench.cuda_tagger's rows).
CHECKS = ("max abs diff vs torch", "tags equal")


def table(rows: list[dict]) -> str:
    lines = [
        "| benchmark | peer | ms (median) | min-max | back to back | peer ms / ours ms | GB/s "
        "| check |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for row in rows:
        if "error" in row:
            lines.append(f"| {row['benchmark']} | error: {row['error']} | | | | | | |")
            continue
        check = "; ".join(f"{k} {row[k]:.3g}" for k in CHECKS if k in row)  # a bool: 1 or 0
        for peer, t in row["times"].items():
            ratio = row["ratios"].get(peer)
            gbs = row.get("GB/s", {}).get(peer)
            cells = [
                row["benchmark"],
                peer,
                f"{t['ms']:.4f}",
                f"{t['min']:.4f}-{t['max']:.4f}",
                f"{t['back_to_back_ms']:.4f}",
                "" if ratio is None else f"{ratio:.3f}",
                "" if gbs is None else f"{gbs:.0f}",
                check,
            ]
            lines.append("| " + " | ".join(cells) + " |")
            check = ""  # once a row
    return "\n".join(lines) + "\n"


# Variants of the kernels' compile-time constants (csrc/*.cu: FB_UNROLL, FB_MIN_BLOCKS,
# FB_CACHED) and of the grid, timed side by side on the benchmark shapes: the data behind the
# defaults (docs/cuda.md).
TUNE_DROPOUT = [  # the default first
    (("FB_UNROLL=2", "FB_MIN_BLOCKS=4"), 32),
    (("FB_UNROLL=1", "FB_MIN_BLOCKS=4"), 32),
    (("FB_UNROLL=4", "FB_MIN_BLOCKS=3"), 32),
    (("FB_UNROLL=2", "FB_MIN_BLOCKS=4"), 8),
]
TUNE_SOFTMAX = [
    (("FB_CACHED=4", "FB_MIN_BLOCKS=3", "FB_MIN_BLOCKS_BACKWARD=2"), 32),
    (("FB_CACHED=8", "FB_MIN_BLOCKS=2", "FB_MIN_BLOCKS_BACKWARD=2"), 32),
    # 4 blocks forward and 3 backward cap them at 64 and 80 registers: both spill (kept to
    # show what the spill costs; tests/cuda/test_cuda_build.py compiles every variant).
    (("FB_CACHED=4", "FB_MIN_BLOCKS=4", "FB_MIN_BLOCKS_BACKWARD=3"), 32),
    (("FB_CACHED=4", "FB_MIN_BLOCKS=3", "FB_MIN_BLOCKS_BACKWARD=2"), 8),
]


def _variant(defines: tuple[str, ...], blocks_per_sm: int, call: Callable[[], object]):
    from fusebridge.cuda.device import CupyDevice, use_launcher

    launcher = CupyDevice(0, defines, blocks_per_sm)

    def run() -> object:
        with use_launcher(launcher):
            return call()

    return run


def tune() -> list[dict]:
    import cupy

    n = 256 << 20
    x = cupy.random.standard_normal(n, dtype=np.float32)
    y = cupy.empty_like(x)
    _, mask = cuda.dropout(x, 0.1, seed=1, return_mask=True)
    name = lambda d, b: " ".join(d) + f" grid={b}/SM"  # noqa: E731
    rows = []
    for title, call in (
        (
            "tune dropout forward 256 Mi",
            lambda: cuda.dropout(x, 0.1, seed=1, return_mask=True, out=y),
        ),
        (
            "tune dropout backward from mask 256 Mi",
            lambda: cuda.dropout_backward(x, 0.1, mask=mask, out=y),
        ),
    ):
        peers = {name(d, b): _variant(d, b, call) for d, b in TUNE_DROPOUT}
        rows.append(_row(title, compare(peers, calls=10), next(iter(peers))))
    shape = (16, 16, 512, 512)
    s = cupy.random.standard_normal(shape, dtype=np.float32)
    out = cupy.empty_like(s)
    _, smask = cuda.softmax_dropout(s, 0.1, seed=1, return_mask=True)
    probs = cuda.softmax(s)
    for title, call in (
        ("tune softmax_dropout forward", lambda: cuda.softmax_dropout(s, 0.1, seed=1, out=out)),
        (
            "tune softmax_dropout backward (probs, mask)",
            lambda: cuda.softmax_dropout_backward(s, 0.1, probs=probs, mask=smask, out=out),
        ),
        (
            "tune softmax_dropout backward (x, recomputed)",
            lambda: cuda.softmax_dropout_backward(s, 0.1, x=s, seed=1, out=out),
        ),
    ):
        peers = {name(d, b): _variant(d, b, call) for d, b in TUNE_SOFTMAX}
        rows.append(_row(title, compare(peers, calls=10), next(iter(peers))))
    return rows
