"""Where the LAC tagger's time goes (issue 41, part 2), float32, 2 threads:

1. the optimized model's steps at 1, 16 and 64 real sentences (`Session.run(profile=...)`,
   median over blocks of calls), grouped: the GRUs (projections inside), the other GEMMs, the
   CRF, the reorders and the rest, with the Session's own overhead;
2. the GRU step against its roofline: one bidirectional GRU of hidden 128 (LAC's) over rows
   of 32 words, its recurrence alone per step (the fused GRU minus its projection, timed apart
   as the same GEMM), with the step's FLOPs, the recurrent weights it streams (2 x 196 KB, from
   L2) and what that is in GFLOP/s and GB/s;
3. the first call after the process sat idle (1 s) against a hot one.
`python -m benchmarks.run --only lac_breakdown`."""

from __future__ import annotations

import statistics
import time

import numpy as np

import fusebridge as fb
from benchmarks.common import markdown_table, medians_in_blocks, timings
from benchmarks.gru import make_weights
from fusebridge import kernels
from fusebridge.bench import lac
from fusebridge.kernels.gru import GRUKernel

SENTENCES = (1, 16, 64)
HIDDEN = 128
STEPS = 32
PEAK_GFLOPS_PER_CORE = 2.3 * 64  # 2 AVX-512 FMA ports x 16 lanes x 2 flops at 2.3 GHz


def _group(label: str) -> str:
    low = label.lower()
    for key, name in (
        ("quantizedfusiongru", "GRU (recurrence + its projection)"),
        ("fusiongru", "GRU (recurrence + its projection)"),
        ("crf", "CRF decoding"),
        ("lookup", "embedding lookup"),
        ("gather", "embedding lookup"),
        ("matmul", "GEMMs outside the GRU (the emission fc)"),
        ("gemm", "GEMMs outside the GRU (the emission fc)"),
        ("fc", "GEMMs outside the GRU (the emission fc)"),
    ):
        if key in low:
            return name
    return "other steps (reorders, adds, casts)"


def _model_steps(session: fb.Session, blocks: int, repeat: int) -> str:
    (name,), corpus = session.input_names, lac.corpus_sentences(64)
    table = []
    for n in SENTENCES:
        words = lac.feed(corpus[:n])
        per_group: dict[str, list[float]] = {}
        totals, steps_sum = [], []
        for _ in range(blocks):
            time.sleep(0.3)
            for _ in range(repeat):
                prof: dict[str, float] = {}
                t0 = time.perf_counter()
                session.run({name: words}, profile=prof)
                totals.append(time.perf_counter() - t0)
                steps_sum.append(sum(prof.values()))
                grouped: dict[str, float] = {}
                for label, secs in prof.items():
                    grouped[_group(label)] = grouped.get(_group(label), 0.0) + secs
                for g, secs in grouped.items():
                    per_group.setdefault(g, []).append(secs)
        total = statistics.median(totals)
        for g, vals in sorted(per_group.items(), key=lambda kv: -statistics.median(kv[1])):
            ms = statistics.median(vals) * 1e3
            table.append([str(n), g, f"{ms:.3f}", f"{ms / total / 1e3:.0%}"])
        overhead = total - statistics.median(steps_sum)
        table.append(
            [
                str(n),
                "Session.run around the steps",
                f"{overhead * 1e3:.3f}",
                f"{overhead / total:.0%}",
            ]
        )
        table.append([str(n), "**total (profiled call)**", f"{total * 1e3:.3f}", "100%"])
    return "### LAC tagger's steps, float32 (medians)\n\n" + markdown_table(
        ["sentences", "steps", "ms", "share"], table
    )


def _gru_roofline(blocks: int, repeat: int) -> str:
    w = make_weights(HIDDEN, HIDDEN, 0)
    gru = GRUKernel(kernels.pack_gru_weights(**w), direction="bidirectional", origin_mode=False)
    table = []
    threads = kernels.get_num_threads()
    for n in SENTENCES:
        offsets = np.arange(n + 1, dtype=np.int64) * STEPS
        x = np.random.default_rng(n).standard_normal((n * STEPS, HIDDEN)).astype(np.float32)
        proj_b = np.random.default_rng(1).standard_normal((HIDDEN, 6 * HIDDEN)).astype(np.float32)
        y = np.empty((n * STEPS, 6 * HIDDEN), np.float32)
        timed = medians_in_blocks(
            [
                ("gru", lambda x=x, offsets=offsets: gru(x, offsets=offsets)),
                ("projection", lambda x=x, b=proj_b, y=y: kernels.matmul(x, b, out=y)),
            ],
            blocks,
            repeat,
        )
        whole, proj = timed[0][1], timed[1][1]
        step = max(whole - proj, 0.0) / STEPS
        flops = 2 * n * 2 * 3 * HIDDEN * HIDDEN  # both directions' h @ Wh, one step
        wbytes = 2 * 3 * HIDDEN * HIDDEN * 4
        peak = PEAK_GFLOPS_PER_CORE * min(threads, 2)
        table.append(
            [
                str(n),
                f"{whole * 1e3:.3f}",
                f"{proj * 1e3:.3f}",
                f"{step * 1e6:.2f}",
                f"{flops / 1e6:.2f}",
                f"{flops / step / 1e9:.0f}" if step else "-",
                f"{flops / step / 1e9 / peak:.0%}" if step else "-",
                f"{wbytes / step / 1e9:.0f}" if step else "-",
                f"{flops / peak / 1e3:.2f}",
            ]
        )
    header = [
        "rows (sentences)",
        "GRU ms",
        "its projection ms (GEMM)",
        "recurrence us/step",
        "MFLOP/step",
        "GFLOP/s",
        f"of {PEAK_GFLOPS_PER_CORE * 2:.0f} GFLOP/s peak",
        "Wh GB/s (2 x 196 KB/step)",
        "us/step at peak",
    ]
    return (
        f"### GRU step against its roofline: bidirectional, hidden {HIDDEN}, {STEPS} steps, "
        f"{threads} threads\n\n" + markdown_table(header, table)
    )


def _first_call(session: fb.Session, repeat: int) -> str:
    (name,), corpus = session.input_names, lac.corpus_sentences(16)
    table = []
    for n in (1, 16):
        words = lac.feed(corpus[:n])
        hot = statistics.median(timings(lambda words=words: session.run({name: words}), repeat))
        cold = []
        for _ in range(5):
            time.sleep(1.0)
            t0 = time.perf_counter()
            session.run({name: words})
            cold.append(time.perf_counter() - t0)
        first = statistics.median(cold)
        table.append([str(n), f"{hot * 1e3:.3f}", f"{first * 1e3:.3f}", f"{first / hot:.2f}"])
    return "### First call after 1 s idle (median of 5) against hot calls\n\n" + markdown_table(
        ["sentences", "hot ms", "after idle ms", "ratio"], table
    )


def run(quick: bool = False, threads: int = 2) -> str:
    kernels.set_num_threads(threads)
    blocks, repeat = (3, 10) if quick else (7, 20)
    session = fb.Session(fb.optimize(fb.load(lac.find_lac().model_dir))[0])
    return "\n\n".join(
        [
            _model_steps(session, blocks, repeat),
            _gru_roofline(blocks, repeat),
            _first_call(session, repeat),
        ]
    )


if __name__ == "__main__":
    print(run(quick=True))
