"""The MXNet GRU tagger (gluon: embedding 128, 2-layer bidirectional GRU of 128, dense to 57
tags), exported by MXNet and loaded by fusebridge without mxnet: fusebridge Session (optimized)
vs MXNet 1.9.1's hybridized SymbolBlock (oneDNN GRU) in a process of its own
(benchmarks/mxnet_peer.py), 1 / 16 / 64 sentences.

Runs in the MXNet venv (`pip install ".[mxnet]"`; mxnet needs numpy < 1.24):
`python -m benchmarks.run --only mxnet_models`. Two length patterns: equal (every sentence 40
words: both compute the same steps) and unequal (5..60 words padded to 60: MXNet's oneDNN GRU
computes the padding and ignores the lengths, so its short sentences are wrong; the table shows
by how much, against MXNet run one sentence at a time)."""

from __future__ import annotations

import os
import tempfile

import numpy as np

from benchmarks.common import best_time, markdown_table, missing_peer
from benchmarks.mxnet_peer import export, run_peer

SIZES = (5000, 128, 128, 57)


def _batch(n: int, equal: bool, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    lengths = np.full(n, 40) if equal else rng.integers(5, 61, n)
    ids = rng.integers(0, SIZES[0], (n, int(lengths.max()))).astype(np.float32)
    return ids, lengths.astype(np.float32)


def run(quick: bool = False, threads: int = 2) -> str:
    import fusebridge as fb

    install = "runs in the MXNet venv (pip install '.[mxnet]'; --only mxnet_models)"
    missing = missing_peer("mxnet", "MXNet GRU tagger", install)
    if missing:
        return missing

    fb.kernels.set_num_threads(threads)
    repeat = 5 if quick else 20
    rows, errors = [], []
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "tagger")
        kwargs = {"prefix": "bench_tagger_", "sizes": SIZES}
        export(prefix, "build_gru_tagger", kwargs, [(2, 5), (2,)])
        session = fb.Session(fb.optimize(fb.load(f"{prefix}-symbol.json"))[0])
        for equal in (True, False):
            for n in (1, 16, 64):
                ids, lengths = _batch(n, equal, n)
                theirs = run_peer(prefix, [ids, lengths], repeat, threads, tmp, alone=True)
                feeds = {"data0": ids, "data1": lengths}
                ours = session.run(feeds)[session.output_names[0]]
                real = np.arange(ids.shape[1])[None, :] < lengths[:, None]
                err_ours = np.abs(ours - theirs["alone"])[real].max()
                err_mx = np.abs(theirs["batched"] - theirs["alone"])[real].max()
                if not equal:
                    errors.append(f"{n}: fusebridge {err_ours:.1e}, MXNet {err_mx:.1e}")
                assert err_ours < 1e-4, err_ours
                t_fb = best_time(lambda feeds=feeds: session.run(feeds), repeat)
                t_mx = float(theirs["seconds"])
                rows.append(
                    [
                        "equal (40)" if equal else "5..60",
                        str(n),
                        str(int(lengths.sum())),
                        f"{1e3 * t_fb:.2f}",
                        f"{1e3 * t_mx:.2f}",
                        f"{t_mx / t_fb:.2f}x",
                    ]
                )
    header = ["lengths", "sentences", "words", "fusebridge ms", "MXNet ms", "MXNet / fusebridge"]
    return "\n".join(
        [
            "## MXNet GRU tagger",
            "",
            f"{threads} thread(s) (OMP_NUM_THREADS for MXNet, set_num_threads for fusebridge); "
            f"best of {repeat}; MXNet 1.9.1 hybridized with static_alloc, in its own process.",
            "",
            markdown_table(header, rows),
            "",
            "Largest difference from MXNet run one sentence at a time (unequal lengths, "
            "sentences: ...): " + "; ".join(errors) + ".",
        ]
    )
