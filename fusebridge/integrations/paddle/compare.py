"""fusebridge vs Paddle's own runtimes on one Paddle model, side by side (`fusebridge bench`).

fusebridge runs in this process; each Paddle peer (the Executor on the unfused program, Paddle
Inference with its IR passes, and with oneDNN) runs in its own subprocess
(`python -m fusebridge.integrations.paddle.paddle_peer`), so that a Paddle crash is a row of
the table and not the end of the benchmark. Every peer's outputs are checked against ours."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

import fusebridge as fb
from fusebridge import kernels

PEERS = ("paddle_executor", "paddle_inference", "paddle_inference_onednn")


def _batch(vocab: int, n: int, seed: int) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed + n)
    lengths = rng.integers(5, 61, n).tolist()  # unequal sentences, 5..60 words
    ids = rng.integers(1, vocab, (sum(lengths), 1)).astype(np.int64)
    return ids, lengths


def _vocab(model) -> int:
    gather = next(n for n in model.graph if n.op_type == "Gather")
    return int(gather.inputs[0].const_value.shape[0])


def best_and_median_ms(fn, repeat: int) -> tuple[float, float]:
    """The best and the median of `repeat` timed calls after a warm one. The best is what the
    table compares: on a shared 2-core VM a run can be slowed 100x by the host for seconds."""
    fn()  # warm: primitives built, caches filled
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times), 1e3 * float(np.median(times))


def _same(ours: dict, theirs: dict) -> str:
    for name, value in ours.items():
        mine = value.data if isinstance(value, fb.LoDTensor) else value
        other = theirs.get(name)
        if other is None or other.shape != mine.shape:
            return f"no ({name}: shape {None if other is None else other.shape})"
        if mine.dtype.kind in "iu":
            if not np.array_equal(mine, other):
                return f"no ({name}: {int((mine != other).sum())} values differ)"
        elif not np.allclose(mine, other, rtol=1e-4, atol=1e-5):
            return f"no ({name}: max diff {np.abs(mine - other).max():.2e})"
    return "yes"


def compare_with_paddle(
    model_dir: str | os.PathLike,
    sentences: Sequence[int] = (1, 16, 64),
    *,
    repeat: int = 20,
    peers: Sequence[str] = PEERS,
    seed: int = 0,
) -> list[dict[str, object]]:
    """One row per (batch size, runtime): best and median ms per batch, ratio to fusebridge, and
    whether the outputs equal fusebridge's. fusebridge's row also gives its Session overhead
    (time outside kernels and ONNX Runtime calls) in ms."""
    model = fb.load(model_dir)
    optimized, _ = fb.optimize(model)
    session = fb.Session(optimized)
    (feed,) = session.input_names
    vocab = _vocab(model)
    threads = kernels.get_num_threads()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in sentences:
            ids, lengths = _batch(vocab, n, seed)
            feeds = {feed: fb.LoDTensor(ids, lengths=lengths)}
            ours = session.run(feeds)
            ms, median = best_and_median_ms(lambda: session.run(feeds), repeat)  # noqa: B023
            profile: dict[str, float] = {}
            start = time.perf_counter()
            for _ in range(repeat):
                session.run(feeds, profile=profile)
            overhead = (time.perf_counter() - start - sum(profile.values())) / repeat
            words = sum(lengths)
            rows.append(
                {
                    "sentences": n,
                    "words": words,
                    "runtime": "fusebridge",
                    "ms": ms,
                    "median_ms": median,
                    "vs_fusebridge": 1.0,
                    "same_output": "-",
                    "note": f"session overhead {1e3 * overhead:.3f} ms",
                }
            )
            np.savez(Path(tmp) / "feed.npz", ids=ids, lengths=np.asarray(lengths))
            for peer in peers:
                rows.append(
                    _peer_row(model_dir, peer, feed, tmp, n, words, repeat, threads, ms, ours)
                )
    return rows


def _peer_row(model_dir, peer, feed, tmp, n, words, repeat, threads, our_ms, ours) -> dict:
    row = {"sentences": n, "words": words, "runtime": peer}
    out = Path(tmp) / f"{peer}.npz"
    cmd = [
        sys.executable,
        "-m",
        "fusebridge.integrations.paddle.paddle_peer",
        os.fspath(model_dir),
        peer,
        feed,
        str(Path(tmp) / "feed.npz"),
        str(out),
        str(repeat),
        str(threads),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "GLOG_minloglevel": "3"}
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env)
    except subprocess.TimeoutExpired:
        return {
            **row,
            "ms": None,
            "median_ms": None,
            "vs_fusebridge": None,
            "same_output": "-",
            "note": "timed out",
        }
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1][:120]
        why = f"crashed (signal {-done.returncode})" if done.returncode < 0 else f"failed: {last}"
        return {
            **row,
            "ms": None,
            "median_ms": None,
            "vs_fusebridge": None,
            "same_output": "-",
            "note": why,
        }
    timing = json.loads(done.stdout.strip().splitlines()[-1])
    with np.load(out, allow_pickle=False) as theirs:
        same = _same(ours, dict(theirs))
    ms = timing["ms"]
    return {
        **row,
        "ms": ms,
        "median_ms": timing["median_ms"],
        "vs_fusebridge": ms / our_ms,
        "same_output": same,
        "note": "",
    }


def table(rows: Sequence[dict[str, object]]) -> str:
    lines = [
        "| sentences | words | runtime | best ms | median ms | x fusebridge (best) | same output "
        "| note |",
        "|---:|---:|---|---:|---:|---:|---|---|",
    ]
    for r in rows:
        ms = "-" if r["ms"] is None else f"{r['ms']:.2f}"
        median = "-" if r["median_ms"] is None else f"{r['median_ms']:.2f}"
        ratio = "-" if r["vs_fusebridge"] is None else f"{r['vs_fusebridge']:.2f}"
        lines.append(
            f"| {r['sentences']} | {r['words']} | {r['runtime']} | {ms} | {median} | {ratio} | "
            f"{r['same_output']} | {r['note']} |"
        )
    return "\n".join(lines)
