"""The cuda engine's fusion_gru against the cpu engine's, case by case: every layout, direction,
reset and update form and the 16 activation pairs, on the configurations of the CPU tests
(Paddle's gru: LoD, unsorted lengths with a sentence of one word; ONNX Runtime's GRU: padded,
unequal lengths, noise in the padding), with h0, return_last, empty sentences and no
projection. Each output is within the sum of the two engines' error bounds of the formula
(fusebridge.kernels.error_bounds: float64 reference plus running error analysis); padding is
exactly zero; and a sentence's bits do not depend on the batch it is in.

Run like gpu_cases: on a GPU by `python -m fusebridge.cuda.check`, in the CPU emulation by
tests/cuda/test_gru_emulated.py."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from fusebridge import cuda, kernels
from fusebridge.cuda.gpu_cases import Arrays, _case, _same_bits
from fusebridge.kernels.error_bounds import CUDA, FUSEBRIDGE, gru_bound

ACTS = ("sigmoid", "tanh", "relu", "identity")


@dataclass
class Case:
    name: str
    lengths: list[int]
    ic: int
    oc: int
    layout: str = "lod"
    direction: str = "forward"
    linear_before_reset: bool = False
    origin_mode: bool = True
    activation: str = "tanh"
    gate_activation: str = "sigmoid"
    h0: bool = True
    projection: bool = True
    seed: int = 0
    scale: float = 0.3  # weights: small enough that relu and identity stay bounded
    data: dict = field(default_factory=dict)

    @property
    def d(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    def make(self) -> Case:
        rng = np.random.default_rng(self.seed)
        d, oc, n = self.d, self.oc, len(self.lengths)
        f32 = lambda *s, k=1.0: (k * rng.standard_normal(s)).astype(np.float32)  # noqa: E731
        width = self.ic if self.projection else d * 3 * oc
        t = max(self.lengths, default=0)
        shape = {"lod": (sum(self.lengths), width), "tnc": (t, n, width), "ntc": (n, t, width)}
        self.data = {
            "x": f32(*shape[self.layout]),  # padded positions hold noise: none may leak
            "wx": f32(d, self.ic, 3 * oc, k=self.scale) if self.projection else None,
            "wh": f32(d, oc, 3 * oc, k=self.scale),
            "bias": f32(d, 3 * oc, k=0.1),
            "bias_h": f32(d, 3 * oc, k=0.1),
            "h0": f32(d, n, oc, k=0.5) if self.h0 else None,
        }
        return self

    def kwargs(self) -> dict:
        lengths = np.array(self.lengths, np.int64)
        where = (
            {"offsets": np.concatenate([[0], np.cumsum(lengths)])}
            if self.layout == "lod"
            else {"seq_lens": lengths}
        )
        attrs = ("layout", "direction", "linear_before_reset", "origin_mode")
        acts = ("activation", "gate_activation")
        return {**where, **{a: getattr(self, a) for a in attrs + acts}}

    def rows(self, s: int) -> np.ndarray:
        """The rows of sentence s's words in x flattened to [rows, width]."""
        n, t = len(self.lengths), max(self.lengths, default=0)
        steps = np.arange(self.lengths[s])
        if self.layout == "lod":
            return sum(self.lengths[:s]) + steps
        return steps * n + s if self.layout == "tnc" else s * t + steps


def paddle_cases() -> list[Case]:
    """Paddle's gru configurations (tests/kernels/test_gru_paddle.py): LoD, lengths unsorted
    with a sentence of one word, IC 5, OC 4; every activation pair, both update forms, both
    directions, with and without h0."""
    out = []
    for k, (gate, act) in enumerate(itertools.product(ACTS, ACTS)):
        for reverse in (False, True):
            out.append(
                Case(
                    f"paddle gru {gate}/{act} {'reverse' if reverse else 'forward'}",
                    [3, 1, 6, 2, 4],
                    5,
                    4,
                    direction="reverse" if reverse else "forward",
                    origin_mode=reverse,
                    gate_activation=gate,
                    activation=act,
                    h0=not reverse,
                    seed=k,
                )
            )
    return out


def onnxruntime_cases() -> list[Case]:
    """ONNX Runtime's GRU configurations (tests/kernels/test_gru_onnxruntime.py): padded,
    lengths [4, 6, 1, 3] of T 6, IC 5, H 3; every direction, linear_before_reset 0 and 1, with
    and without initial_h; ntc too."""
    out = []
    for direction, lbr, h0 in itertools.product(
        ("forward", "reverse", "bidirectional"), (False, True), (False, True)
    ):
        out.append(
            Case(
                f"onnxruntime gru tnc {direction} lbr={int(lbr)} h0={int(h0)}",
                [4, 6, 1, 3],
                5,
                3,
                layout="tnc",
                direction=direction,
                linear_before_reset=lbr,
                h0=h0,
                seed=len(out),
            )
        )
    for lbr in (False, True):
        out.append(
            Case(f"gru ntc bidirectional lbr={int(lbr)}", [4, 6, 0, 3], 5, 3, layout="ntc",
                 direction="bidirectional", linear_before_reset=lbr, seed=40 + lbr)
        )  # fmt: skip
    return out


def wider_cases(large: bool) -> list[Case]:
    """Blocks owning many units, empty sentences, no projection; on a GPU also the sizes of
    real taggers (many blocks, several passes of units a warp)."""
    lengths = [7, 0, 12, 1, 9, 3, 12, 5, 2]
    out = [
        Case("gru lod bidirectional oc 40", lengths, 33, 40, direction="bidirectional"),
        Case("gru lod bidirectional oc 64 lbr", lengths, 17, 64, direction="bidirectional",
             linear_before_reset=True, seed=1),
        Case("gru lod no projection", lengths, 0, 6, projection=False, seed=2),
        Case("gru ntc reverse no projection lbr", lengths, 0, 5, layout="ntc",
             direction="reverse", projection=False, linear_before_reset=True, seed=3),
    ]  # fmt: skip
    if large:
        rng = np.random.default_rng(5)
        many = [int(v) for v in rng.integers(5, 61, 64)]
        out += [
            Case("gru lod bidirectional 128/128, 64 sentences", many, 128, 128,
                 direction="bidirectional", seed=6, scale=0.1),
            Case("gru tnc forward 256/512 lbr", many[:16], 256, 512, layout="tnc",
                 linear_before_reset=True, seed=7, scale=0.05),
        ]  # fmt: skip
    return out


def _bounds(case: Case) -> tuple[np.ndarray, np.ndarray]:
    """The bound of |cuda - cpu| for hidden (flattened to [rows, D*OC]) and last [D, N, OC]:
    the sum of both engines' bounds of the formula."""
    c, oc = case.data, case.oc
    x = c["x"].reshape(-1, c["x"].shape[-1])
    hidden = np.zeros((x.shape[0], case.d * oc))
    last = np.zeros((case.d, len(case.lengths), oc))
    for k, s in itertools.product(range(case.d), range(len(case.lengths))):
        if not case.lengths[s]:
            continue
        reverse = k == 1 or case.direction == "reverse"
        bound = 0.0
        for lib in (FUSEBRIDGE, CUDA):
            _, e = gru_bound(
                x[case.rows(s)][:, k * 3 * oc : (k + 1) * 3 * oc] if not case.projection
                else x[case.rows(s)],
                None if c["wx"] is None else c["wx"][k],
                c["wh"][k],
                c["bias"][k],
                bias_h=c["bias_h"][k],
                h0=None if c["h0"] is None else c["h0"][k, s : s + 1],
                lengths=[case.lengths[s]],
                reverse=reverse,
                linear_before_reset=case.linear_before_reset,
                origin_mode=case.origin_mode,
                activation=case.activation,
                gate_activation=case.gate_activation,
                lib=lib,
            )  # fmt: skip
            bound = bound + e
        hidden[case.rows(s), k * oc : (k + 1) * oc] = bound
        last[k, s] = bound[0 if reverse else -1]
    return hidden, last


def _run(io: Arrays | None, case: Case):
    c = case.data
    weights = {k: c[k] for k in ("wx", "wh", "bias", "bias_h")}
    h0 = c["h0"]
    if io is None:
        return kernels.fusion_gru(c["x"], **weights, h0=h0, return_last=True, **case.kwargs())
    packed = cuda.pack_gru_weights(**{k: v if v is None else io.dev(v) for k, v in weights.items()})
    hidden, last = cuda.fusion_gru(
        io.dev(c["x"]), packed, h0=None if h0 is None else io.dev(h0), return_last=True,
        **case.kwargs(),
    )  # fmt: skip
    return io.host(hidden), io.host(last)


def _compare(io: Arrays, case: Case) -> dict:
    got, got_last = _run(io, case.make())
    want, want_last = _run(None, case)
    bound, last_bound = _bounds(case)
    width = got.shape[-1]
    err = np.abs(got.reshape(-1, width).astype(np.float64) - want.reshape(-1, width))
    err_last = np.abs(got_last.astype(np.float64) - want_last)
    padding = np.ones(err.shape[0], bool)
    for s in range(len(case.lengths)):
        padding[case.rows(s)] = False
    ok = (
        got.shape == want.shape
        and bool(np.all(err <= bound))
        and bool(np.all(err_last <= last_bound))
        and not np.any(got.reshape(-1, width)[padding])  # exactly zero, from no work at all
    )
    worst = float(np.max(err / np.maximum(bound, 1e-30), initial=0.0))
    return _case(case.name, ok, worst_fraction_of_bound=worst)


def _batch_invariance(io: Arrays) -> Iterator[dict]:
    """A sentence's bits alone equal its bits in two batches of other sentences, in either
    order, and with h0 rows of their own: the arithmetic of an output is fixed by the shapes."""
    base = Case("invariance", [9, 4, 11, 1, 6], 7, 12, direction="bidirectional").make()
    packed = cuda.pack_gru_weights(*(io.dev(base.data[k]) for k in ("wx", "wh", "bias")))
    x = base.data["x"]
    starts = np.concatenate([[0], np.cumsum(base.lengths)])

    def run(sentences: list[int]) -> list[np.ndarray]:
        xs = np.concatenate([x[starts[s] : starts[s + 1]] for s in sentences])
        lens = [base.lengths[s] for s in sentences]
        offsets = np.cumsum([0, *lens])
        y = io.host(cuda.fusion_gru(io.dev(xs), packed, offsets=offsets, direction=base.direction))
        bounds = np.cumsum([0, *lens])
        return [y[bounds[i] : bounds[i + 1]] for i in range(len(sentences))]

    alone = {s: run([s])[0] for s in range(5)}
    for batch in ([0, 1, 2, 3, 4], [4, 2, 0], [2, 2, 3]):
        same = all(_same_bits(y, alone[s]) for s, y in zip(batch, run(batch)))
        yield _case(f"gru: a sentence's bits alone and in batch {batch}", same)


def gru_cases(io: Arrays, small: bool = False, large: bool = False) -> Iterator[dict]:
    """Every case (small: one of each kernel path, for compute-sanitizer; large: also the sizes
    of real taggers, for a GPU)."""
    cases = paddle_cases() + onnxruntime_cases() + wider_cases(large)
    if small:
        cases = [cases[0], cases[33], cases[-3]]
    for case in cases:
        yield _compare(io, case)
    if not small:
        yield from _batch_invariance(io)


def gru_cases_on_gpu(io: Arrays, small: bool = False) -> Iterator[dict]:
    """gru_cases with the sizes of real taggers too (unless small)."""
    return gru_cases(io, small, large=not small)
