"""The quantized GRU against our float32 one, side by side in one run: `fusion_gru` with
float32, int8 and bf16 weights (kernels.quantize_gru_weights + pack_qgru_weights), bidirectional,
IC = OC = 128 and 512, 16 and 64 sentences of 5..60 words (benchmarks/gru.py's lengths and
weights), LoD input, Paddle's formula (linear_before_reset=0, the LAC tagger's).

Each precision runs on the AVX-512 path and on the AVX2 path (set_isa, as on an AVX2-only CPU),
with its extension (VPDPBUSD: AVX512_VNNI / AVX-VNNI; VDPBF16PS: AVX512_BF16) and with the
extension emulated (set_extensions(())): the emulation gives the same bits, this says at what
speed. Timing: every variant of a case takes turns in rounds (benchmarks.common.timed_in_turns,
after a settle pause), best call in ms; the ratio is float32's time over the variant's on the same
ISA path. Also writes benchmarks/results/quantized_gru/quantized_gru{,-quick}.{md,svg}."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from benchmarks.common import machine, markdown_table, timed_in_turns
from benchmarks.gru import make_weights, sentence_lengths
from benchmarks.paddle_families import chart
from fusebridge import kernels
from fusebridge.kernels.gru import GRUKernel

OUT = Path(__file__).parent / "results" / "quantized_gru"
SIZES = (128, 512)
SENTENCES = (16, 64)
TARGETS = {  # issue's targets: int8 / bf16 over float32, by ISA path (those this CPU has)
    ("avx512", "int8"): 1.6,
    ("avx2", "int8"): 1.3,
    ("avx512", "bf16"): 1.5,
}


def variants(isa: str) -> list[tuple[str, str, tuple[str, ...]]]:
    """(label, precision, extensions) for one ISA path; the extensions this CPU has."""
    kernels.set_isa(isa)
    have = kernels.available_extensions()
    rows = [("float32", "float32", have)]
    for precision, ext in (("int8", "vnni"), ("bf16", "bf16")):
        if ext in have:
            rows.append((f"{precision} ({ext})", precision, have))
        rows.append((f"{precision} emulated", precision, ()))
    return rows


def _kernel(weights: dict[str, np.ndarray], precision: str) -> GRUKernel:
    if precision == "float32":
        packed = kernels.pack_gru_weights(**weights)
    else:
        packed = kernels.pack_qgru_weights(
            kernels.quantize_gru_weights(**weights, precision=precision)
        )
    return GRUKernel(packed, direction="bidirectional", origin_mode=False)


def run(quick: bool = False, threads: int = 2) -> str:
    kernels.set_num_threads(threads)
    isa_before, ext_before = kernels.isa(), kernels.extensions()
    isas = [i for i in ("avx512", "avx2") if i in kernels.available_isas()]
    rows, ratios = [], {}
    try:
        for oc in SIZES:
            weights = make_weights(oc, oc, 0)
            for n in SENTENCES:
                lengths = sentence_lengths(n)
                offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
                x = np.random.default_rng([n, oc]).standard_normal((int(offsets[-1]), oc))
                x = x.astype(np.float32)
                for isa in isas:
                    cases = []
                    for label, precision, ext in variants(isa):
                        kernel = _kernel(weights, precision)

                        def call(kernel=kernel, ext=ext, isa=isa, x=x, offsets=offsets):
                            kernels.set_isa(isa)
                            kernels.set_extensions(ext)
                            kernel(x, offsets=offsets)

                        cases.append((f"fusebridge {label}", call))
                    repeat = (5 if quick else 20) if oc == 128 else (3 if quick else 10)
                    best = dict(timed_in_turns(cases, repeat))
                    base = best["fusebridge float32"]
                    for name, seconds in best.items():
                        label = name.removeprefix("fusebridge ")
                        precision = label.split()[0]
                        target = TARGETS.get((isa, precision))
                        rows.append([
                            str(oc), str(n), isa, label, f"{seconds * 1e3:.2f}",
                            f"{base / seconds:.2f}x",
                            f">= {target}x" if target and "emulated" not in label else "",
                        ])  # fmt: skip
                        if label != "float32":
                            ratios.setdefault(f"{label}, {isa}, OC {oc}", {})[n] = base / seconds
    finally:
        kernels.set_isa(isa_before)
        kernels.set_extensions(ext_before)
    title = "Quantized GRU: float32 time / the variant's (same ISA path)"
    header = ["OC", "sentences", "ISA", "precision", "best ms", "float32 / this", "target"]
    text = (
        f"### quantized_gru\n\n{machine()}, {threads} threads; "
        f"extensions: {', '.join(kernels.available_extensions()) or 'none'}\n\n"
        + markdown_table(header, rows)
    )
    OUT.mkdir(parents=True, exist_ok=True)
    stem = "quantized_gru-quick" if quick else "quantized_gru"
    (OUT / f"{stem}.md").write_text(text + "\n")
    (OUT / f"{stem}.svg").write_text(
        chart(ratios, title, "float32 time / quantized time, bidirectional, Paddle formula")
    )
    print(f"wrote {OUT / stem}.{{md,svg}}", file=sys.stderr)
    return text
