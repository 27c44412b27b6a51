"""The cuda engine against the cpu engine, case by case: the masks bit for bit, the outputs
bit for bit where the arithmetic is the same (dropout: one float32 multiply), within the bound
the arithmetic gives elsewhere (softmax's exp and sums, cuBLAS's GEMM).

One list of cases, two places: `python -m fusebridge.cuda.check` runs it on a GPU (device
arrays from CuPy), and tests/cuda runs it in the CPU emulation of the kernels (numpy arrays),
so what a GPU run checks first has been through the kernels' logic in CI already.
`python -m fusebridge.cuda.gpu_cases --small` runs one small case per kernel (for
compute-sanitizer)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import ml_dtypes
import numpy as np

from fusebridge import cuda, kernels

F32_EPS = float(np.finfo(np.float32).eps)
DTYPES = (np.float32, np.float16, ml_dtypes.bfloat16)
SEEDS = ((0, 0), (2**64 - 1, 3), (0x0123456789ABCDEF, 2**40 + 1))


class Arrays:
    """Moves arrays between the host and the engine's device (identity under emulation)."""

    def __init__(
        self, to_device: Callable[[np.ndarray], Any], to_host: Callable[[Any], np.ndarray]
    ):
        self.dev, self.host = to_device, to_host


def _random(rng: np.random.Generator, shape, dtype=np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32).astype(dtype)


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    a, b = np.ascontiguousarray(a), np.ascontiguousarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


def _case(name: str, ok: bool, **detail: Any) -> dict:
    return {"name": name, "ok": bool(ok), **detail}


# ---- dropout --------------------------------------------------------------------------------


def dropout_cases(io: Arrays, small: bool = False) -> Iterator[dict]:
    rng = np.random.default_rng(0)
    shapes = [(7,), (3, 5, 7)] if small else [(1,), (7,), (3, 5, 7), (64, 129), (1 << 16) + 3]
    for dtype in DTYPES[:1] if small else DTYPES:
        for shape in shapes:
            x = _random(rng, shape, dtype)
            for seed, offset in SEEDS[:1] if small else SEEDS:
                for p in (0.1, 0.5):
                    y, m = cuda.dropout(io.dev(x), p, seed=seed, offset=offset, return_mask=True)
                    ye, me = kernels.dropout(x, p, seed=seed, offset=offset, return_mask=True)
                    yield _case(
                        f"dropout {np.dtype(dtype).name} {shape} seed={seed} offset={offset} p={p}",
                        _same_bits(io.host(m), me) and _same_bits(io.host(y), ye),
                    )
    sharing = [{"axes": (0,)}, {"axes": (1, 2)}, {"noise_shape": (4, 1, 8)}, {"axes": (0, 1, 2)}]
    # Every sharing in float32; one in each 16-bit type (the apply kernels of those types).
    plan = [(np.float32, kw) for kw in sharing] + [(t, sharing[1]) for t in DTYPES[1:]]
    for dtype, kw in [plan[0], *plan[-2:]] if small else plan:  # small: each dtype once
        x = _random(rng, (4, 6, 8), dtype)
        name = f"{np.dtype(dtype).name}, shared {kw}"
        y, m = cuda.dropout(io.dev(x), 0.3, seed=5, offset=1, return_mask=True, **kw)
        ye, me = kernels.dropout(x, 0.3, seed=5, offset=1, return_mask=True, **kw)
        yield _case(f"dropout {name}", _same_bits(io.host(m), me) and _same_bits(io.host(y), ye))
        dx = cuda.dropout_backward(io.dev(x), 0.3, mask=m, **kw)
        dxe = kernels.dropout_backward(x, 0.3, mask=me, **kw)
        yield _case(f"dropout_backward from the mask, {name}", _same_bits(io.host(dx), dxe))
        dx = cuda.dropout_backward(io.dev(x), 0.3, seed=5, offset=1, **kw)
        yield _case(f"dropout_backward recomputed, {name}", _same_bits(io.host(dx), dxe))
    if small:
        return
    # Shards: blocks of a (9, 13) tensor, the mask shared over axis 0 or not.
    whole = _random(rng, (9, 13))
    for kw in ({}, {"axes": (0,)}):
        for start, size in (((0, 0), (9, 13)), ((2, 5), (3, 7)), ((8, 12), (1, 1))):
            block = whole[start[0] : start[0] + size[0], start[1] : start[1] + size[1]].copy()
            shard = ((9, 13), start)
            y, m = cuda.dropout(
                io.dev(block), 0.4, seed=11, offset=2, return_mask=True, shard=shard, **kw
            )
            ye, me = kernels.dropout(
                block, 0.4, seed=11, offset=2, return_mask=True, shard=shard, **kw
            )
            yield _case(
                f"dropout shard {start} {size} {kw}",
                _same_bits(io.host(m), me) and _same_bits(io.host(y), ye),
            )
    # Modes, edge probabilities, inference, in place, seed and offset as device scalars.
    x = _random(rng, (257,), np.float16)
    for mode, training, p in (
        ("downgrade_in_infer", True, 0.3),
        ("downgrade_in_infer", False, 0.3),
        ("upscale_in_train", False, 0.3),
        ("upscale_in_train", True, 0.0),
        ("upscale_in_train", True, 1.0),
    ):
        y, m = cuda.dropout(io.dev(x), p, seed=1, mode=mode, training=training, return_mask=True)
        ye, me = kernels.dropout(x, p, seed=1, mode=mode, training=training, return_mask=True)
        yield _case(
            f"dropout {mode} training={training} p={p}",
            _same_bits(io.host(m), me) and _same_bits(io.host(y), ye),
        )
    xd = io.dev(x.copy())
    y = cuda.dropout(xd, 0.2, seed=9, offset=4, out=xd)
    yield _case(
        "dropout in place",
        y is xd and _same_bits(io.host(xd), kernels.dropout(x, 0.2, seed=9, offset=4)),
    )
    seed_dev, offset_dev = (
        io.dev(np.array([2**63 + 5], np.uint64)),
        io.dev(np.array([7], np.uint64)),
    )
    y = cuda.dropout(io.dev(x), 0.2, seed=seed_dev, offset=offset_dev)
    yield _case(
        "dropout seed and offset as device scalars",
        _same_bits(io.host(y), kernels.dropout(x, 0.2, seed=2**63 + 5, offset=7)),
    )
    for shape, shard in (((5, 77), None), ((3, 4), ((10, 20), (6, 9)))):
        m = cuda.dropout_mask(shape, 0.25, seed=3, offset=8, shard=shard)
        me = kernels.dropout_mask(shape, 0.25, seed=3, offset=8, shard=shard)
        yield _case(f"dropout_mask {shape} shard={shard}", _same_bits(io.host(m), me))


# ---- softmax_dropout ------------------------------------------------------------------------


def _close(got: np.ndarray, want: np.ndarray, bound: np.ndarray | float) -> tuple[bool, float]:
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    worst = float(np.max(err - bound)) if err.size else 0.0
    return bool(np.all(err <= bound)), worst


def softmax_cases(io: Arrays, small: bool = False) -> Iterator[dict]:
    rng = np.random.default_rng(1)
    cases = [((4, 37), -1, None), ((2, 5, 3), 1, None)]
    if not small:
        cases += [
            ((16, 512), -1, None),
            ((3, 300), 1, None),
            ((3, 600), -1, None),  # cached forward, streamed backward
            ((2, 1100), -1, None),  # streamed both ways
            ((2, 3, 4, 64), 2, None),
            ((4, 24), -1, ((10, 24), (3, 0))),
            ((3, 5, 8), 1, ((6, 5, 8), (2, 0, 0))),
        ]
    for shape, axis, shard in cases:
        x = _random(rng, shape) * 3
        n = shape[axis]
        # Each engine's softmax lies within (n + 8) eps |y| of the exact one (an n-term sum;
        # exp, the division and the scale a few ulp each), so the two differ by at most twice
        # that. The bits must match exactly.
        for p in (0.0, 0.3):
            y, m = cuda.softmax_dropout(
                io.dev(x), p, axis=axis, seed=4, offset=2, return_mask=True, shard=shard
            )
            ye, me = kernels.softmax_dropout(
                x, p, axis=axis, seed=4, offset=2, return_mask=True, shard=shard
            )
            bound = 2 * (n + 8) * F32_EPS * np.abs(ye) + 1e-30
            ok, worst = _close(io.host(y), ye, bound)
            yield _case(
                f"softmax_dropout {shape} axis={axis} p={p} shard={shard}",
                ok and _same_bits(io.host(m), me),
                excess=worst,
            )
            dy = _random(rng, shape)
            for source in ("x", "probs"):
                src = x if source == "x" else kernels.softmax(x, axis=axis)
                dx = cuda.softmax_dropout_backward(
                    io.dev(dy), p, axis=axis, mask=m, shard=shard, **{source: io.dev(src)}
                )
                dxe = kernels.softmax_dropout_backward(
                    dy, p, axis=axis, mask=me, shard=shard, **{source: src}
                )
                dxr = cuda.softmax_dropout_backward(
                    io.dev(dy), p, axis=axis, seed=4, offset=2, shard=shard, **{source: io.dev(src)}
                )
                # dx = P * (g - dot): dot's n-term sum bounds the error, relative to |g| |P|.
                g = np.abs(dy.astype(np.float64)) / (1 - p)
                scale = np.max(g) * (2 * n + 16) * F32_EPS
                bound = scale * (
                    np.abs(src if source == "probs" else kernels.softmax(x, axis=axis)) + 1e-7
                )
                ok, worst = _close(io.host(dx), dxe, bound + 1e-12)
                yield _case(
                    f"softmax_dropout_backward {shape} axis={axis} p={p} from {source}",
                    ok and _same_bits(io.host(dxr), io.host(dx)),
                    excess=worst,
                )
        if small:
            break


# ---- matmul_dropout -------------------------------------------------------------------------


def matmul_cases(io: Arrays, small: bool = False) -> Iterator[dict]:
    rng = np.random.default_rng(2)
    cases = [((8, 12), (12, 10), False, False, True)]
    if not small:
        cases += [
            ((64, 48), (48, 80), False, False, False),
            ((48, 64), (48, 80), True, False, True),
            ((2, 1, 16, 24), (3, 8, 24), False, True, True),
            ((5, 33, 7), (7, 9), False, False, False),
        ]
    for a_shape, b_shape, ta, tb, with_bias in cases:
        a, b = _random(rng, a_shape), _random(rng, b_shape)
        k = a_shape[-2] if ta else a_shape[-1]
        bias = _random(rng, (b_shape[-2] if tb else b_shape[-1],)) if with_bias else None
        kw = {"transpose_a": ta, "transpose_b": tb}
        dev_bias = None if bias is None else io.dev(bias)
        y, m = cuda.matmul_dropout(
            io.dev(a), io.dev(b), 0.2, seed=6, offset=1, bias=dev_bias, return_mask=True, **kw
        )
        ye, me = kernels.matmul_dropout(
            a, b, 0.2, seed=6, offset=1, bias=bias, return_mask=True, **kw
        )
        # A GEMM of depth k in float32, any summation order, then the bias add and the scale
        # (1 / 0.8): each engine lies within (k + 2) eps (|a| |b| + |bias|) / 0.8 of the exact
        # result, so the two differ by at most twice that.
        opa = np.swapaxes(a, -1, -2) if ta else a
        opb = np.swapaxes(b, -1, -2) if tb else b
        mag = np.abs(opa.astype(np.float64)) @ np.abs(opb.astype(np.float64))
        bound = 2 * (k + 2) * F32_EPS * (mag + (0 if bias is None else np.abs(bias))) / 0.8
        ok, worst = _close(io.host(y), ye, bound)
        yield _case(
            f"matmul_dropout {a_shape} x {b_shape} ta={ta} tb={tb} bias={with_bias}",
            ok and _same_bits(io.host(m), me),
            excess=worst,
        )
        dy = _random(rng, ye.shape)
        grads = cuda.matmul_dropout_backward(
            io.dev(dy), io.dev(a), io.dev(b), 0.2, mask=m, bias=dev_bias, **kw
        )
        want = kernels.matmul_dropout_backward(dy, a, b, 0.2, mask=me, bias=bias, **kw)
        # dz is bit-identical on both engines; each gradient element is a sum of `terms`
        # products (da: N per batch times the batches folded in; db: M likewise; dbias: the
        # rows), within (terms + 2) eps of the same sum over absolute values (the backward of
        # |dy|, |a|, |b|), on each engine.
        mags = kernels.matmul_dropout_backward(
            np.abs(dy), np.abs(a), np.abs(b), 0.2, mask=me, bias=bias, **kw
        )
        terms = [ye.size * k // a.size, ye.size * k // b.size, ye.size // ye.shape[-1]]
        ok = len(grads) == len(want)
        for g, w, mag, t in zip(map(io.host, grads), want, mags, terms):
            ok = ok and g.shape == w.shape
            ok = ok and _close(g, w, 2 * (t + 2) * F32_EPS * mag.astype(np.float64) + 1e-30)[0]
        yield _case(f"matmul_dropout_backward {a_shape} x {b_shape} ta={ta} tb={tb}", ok)
        if small:
            return


def interop_cases(io: Arrays, small: bool = False) -> Iterator[dict]:
    """A torch CUDA tensor in (through __cuda_array_interface__ / DLPack, no copy)."""
    import torch

    x = torch.randn(1000, device="cuda")
    y = cuda.dropout(x, 0.3, seed=2)
    want = kernels.dropout(x.cpu().numpy(), 0.3, seed=2)
    yield _case("dropout of a torch CUDA tensor", _same_bits(io.host(y), want))


DROPOUT_FAMILIES = (dropout_cases, softmax_cases, matmul_cases)


def run_all(
    io: Arrays | None = None, small: bool = False, families: Sequence[Callable] | None = None
) -> list[dict]:
    """Every case (or those of `families`); on a GPU (io None: CuPy) also a torch tensor as
    input, and the GRU at the sizes of real taggers."""
    from fusebridge.cuda import gru_cases, sequence_cases  # they build on this module

    gpu = io is None
    if families is None:
        gru = gru_cases.gru_cases_on_gpu if gpu else gru_cases.gru_cases
        families = [*DROPOUT_FAMILIES, gru, sequence_cases.run_all]
        families += [interop_cases] if gpu else []
    if gpu:
        io = _cupy_arrays()
    results = []
    for cases in families:
        try:
            results.extend(cases(io, small))
        except Exception as exc:  # a crash is a failed case, reported with the rest
            results.append(_case(f"{cases.__name__} raised", False, error=repr(exc)))
    return results


def _cupy_arrays() -> Arrays:
    import cupy

    return Arrays(cupy.asarray, cupy.asnumpy)


def graph_replay() -> dict:
    """A dropout captured once in a CUDA graph with its offset in a device scalar: replays
    after writing 0, 1, 2, 3 there give the masks of offsets 0..3, without re-capture."""
    import cupy

    x_host = np.random.default_rng(3).standard_normal(1 << 16).astype(np.float32)
    x, y = cupy.asarray(x_host), cupy.empty(1 << 16, np.float32)
    offset = cupy.zeros(1, np.uint64)
    cuda.dropout(x, 0.3, seed=7, offset=offset, out=y)  # loads the kernel, caches the primitive
    stream = cupy.cuda.Stream(non_blocking=True)
    with stream:
        stream.begin_capture()
        cuda.dropout(x, 0.3, seed=7, offset=offset, out=y)
        graph = stream.end_capture()
    results = []
    for k in range(4):
        with stream:
            offset.fill(k)
            graph.launch(stream)
        stream.synchronize()
        want = kernels.dropout(x_host, 0.3, seed=7, offset=k)
        results.append(_same_bits(cupy.asnumpy(y), want))
    return {"ok": all(results), "replays": results}


if __name__ == "__main__":
    results = run_all(small="--small" in sys.argv)
    bad = [r for r in results if not r["ok"]]
    print(f"{len(results)} cases, {len(bad)} failed", *bad, sep="\n")
    sys.exit(1 if bad else 0)
