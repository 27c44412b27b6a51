"""The quantized GRU (int8, bf16) against the NumPy reference of its arithmetic
(kernels/qgru_reference.py: the kernel must match it bit for bit), on every ISA this CPU runs,
with its VNNI/BF16 instructions and with them emulated; against the float GRU within the
quantization's derived one-step bound; batch and thread invariance; bad input."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import fusebridge
from fusebridge import ArgumentError, kernels
from fusebridge.kernels import reference
from fusebridge.kernels.gru import ACTIVATIONS, GRUKernel
from fusebridge.kernels.qgru_reference import qgru
from fusebridge.kernels.qgru_weights import (
    pack_qgru_weights,
    quantize_gru_weights,
)

ACTS = sorted(ACTIVATIONS)
PRECISIONS = ("int8", "bf16")
# Every (ISA, extensions) build this process can run: the extensions' own instructions (those
# FUSEBRIDGE_ISA does not mask) and their emulation.
_ALLOWED = tuple(
    e for i, e in enumerate(kernels.core.EXTENSIONS) if kernels.core._C.extension_limit() >> i & 1
)
BUILDS = sorted(
    {(isa, ext) for isa in kernels.available_isas() for ext in ((), _ALLOWED) if isa != "scalar"}
    | {("scalar", ())}
)


@pytest.fixture(params=BUILDS, ids=lambda b: f"{b[0]}-{'+'.join(b[1]) or 'emulated'}")
def each_build(request):
    before = kernels.isa(), kernels.extensions()
    isa, ext = request.param
    kernels.set_isa(isa)
    kernels.set_extensions(ext)
    yield request.param
    kernels.set_isa(before[0])
    kernels.set_extensions(before[1])


def random_case(rng, d, ic, oc, lens, *, layout="lod", steps=None, h0=True, projection=True):
    def f32(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    lens = np.asarray(lens, np.int64)
    n, steps = len(lens), int(lens.max(initial=0)) if steps is None else steps
    width = ic if projection else d * 3 * oc
    weights = {
        "wx": f32(d, ic, 3 * oc, scale=0.7 / np.sqrt(ic)) if projection else None,
        "wh": f32(d, oc, 3 * oc, scale=0.7 / np.sqrt(oc)),
        "bias": f32(d, 3 * oc, scale=0.3),
        "bias_h": f32(d, 3 * oc, scale=0.3),
    }
    call = {"h0": f32(d, n, oc, scale=0.5) if h0 else None}
    if layout == "lod":
        x = f32(int(lens.sum()), width)
        call["offsets"] = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    else:
        x = f32(steps, n, width) if layout == "tnc" else f32(n, steps, width)
        call["seq_lens"] = lens
    return x, weights, call


def run_kernel(x, q, call, attrs):
    return GRUKernel(pack_qgru_weights(q), **attrs)(x, **call, return_last=True)


def assert_same_bits(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@st.composite
def qgru_cases(draw):
    layout = draw(st.sampled_from(["lod", "tnc", "ntc"]))
    lens = draw(st.lists(st.integers(0, 6), min_size=0, max_size=5))
    return {
        "precision": draw(st.sampled_from(PRECISIONS)),
        "direction": draw(st.sampled_from(["forward", "reverse", "bidirectional"])),
        "layout": layout,
        "lens": lens,
        "steps": max(lens, default=0) + draw(st.integers(0, 2)) if layout != "lod" else None,
        "ic": draw(st.integers(1, 19)),
        "oc": draw(st.sampled_from([1, 3, 8, 15, 16, 17, 33])),
        "h0": draw(st.booleans()),
        "projection": draw(st.booleans()),
        "attrs": {
            "linear_before_reset": draw(st.booleans()),
            "origin_mode": draw(st.booleans()),
            "activation": draw(st.sampled_from(ACTS)),
            "gate_activation": draw(st.sampled_from(ACTS)),
        },
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


@settings(max_examples=40)
@given(case=qgru_cases())
def test_matches_the_reference_bit_for_bit(each_build, case):
    rng = np.random.default_rng(case["seed"])
    d = 2 if case["direction"] == "bidirectional" else 1
    x, w, call = random_case(
        rng, d, case["ic"], case["oc"], case["lens"], layout=case["layout"], steps=case["steps"],
        h0=case["h0"], projection=case["projection"],
    )  # fmt: skip
    q = quantize_gru_weights(**w, precision=case["precision"])
    attrs = {"layout": case["layout"], "direction": case["direction"], **case["attrs"]}
    hidden, last = run_kernel(x, q, call, attrs)
    ref_hidden, ref_last = qgru(x, q, **call, **attrs)
    assert_same_bits(hidden, ref_hidden)
    assert_same_bits(last, ref_last)


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("scale", [1.0, 2.0**-61], ids=["normal", "near-denormal"])
def test_every_build_gives_the_reference_bits(precision, scale):
    """Sizes past one register tile and one block, unequal sentences, both reset forms, on
    every (ISA, extension) build; and (near-denormal) inputs and weights scaled so that bf16
    products and their running sums straddle the smallest normal float (2**-126), where
    VDPBF16PS flushes a denormal step to zero and a product is no longer exact in float32."""
    rng = np.random.default_rng(7)
    x, w, call = random_case(rng, 2, 70, 45, [9, 1, 0, 17, 4, 12, 3, 8, 11, 2, 6], h0=scale == 1)
    s = np.float32(scale)
    w = {k: None if v is None else v * (s if k in ("wx", "wh") else s * s) for k, v in w.items()}
    before = kernels.isa(), kernels.extensions()
    try:
        for lbr in (False, True):
            q = quantize_gru_weights(**w, precision=precision)
            attrs = {"direction": "bidirectional", "linear_before_reset": lbr,
                     "activation": "identity"}  # fmt: skip
            want = qgru(x * s, q, **call, **attrs)
            for isa, ext in BUILDS:
                kernels.set_isa(isa)
                kernels.set_extensions(ext)
                hidden, last = run_kernel(x * s, q, call, attrs)
                assert_same_bits(hidden, want[0])
                assert_same_bits(last, want[1])
    finally:
        kernels.set_isa(before[0])
        kernels.set_extensions(before[1])


@pytest.mark.parametrize("precision", PRECISIONS)
def test_a_sentence_gets_the_same_bits_in_any_batch_and_thread_count(precision, threads):
    rng = np.random.default_rng(3)
    lens = [13, 2, 9, 0, 21, 5, 7, 16, 1, 11, 4, 8]
    x, w, call = random_case(rng, 2, 24, 40, lens, h0=False)
    q = quantize_gru_weights(**w, precision=precision)
    kernel = GRUKernel(pack_qgru_weights(q), direction="bidirectional")
    off = call["offsets"]
    threads(1)
    alone = [kernel(x[off[i] : off[i + 1]], offsets=[0, lens[i]]) for i in range(len(lens))]
    for count in (1, 2):
        threads(count)
        batch = kernel(x, offsets=off)
        for i in range(len(lens)):
            assert_same_bits(batch[off[i] : off[i + 1]], alone[i])


def _pre_activation_bound(a, w, precision, wscale=None):
    """|a @ w - (a @ w as quantized)| per column, float64: each factor's rounding error (int8:
    half a quantum of the row's and the column's scale; bf16: 2**-9 relative each), the bf16
    f32 sums' rounding, and the float rescale's few roundings."""
    a, w = np.asarray(a, np.float64), np.asarray(w, np.float64)
    aa, wa = np.abs(a), np.abs(w)
    if precision == "int8":
        qa = aa.max(initial=0) / 127 / 2
        qw = (wa.max(axis=0) if wscale is None else wscale) / 2
        err = aa @ np.ones_like(wa) * qw + qa * (wa + qw).sum(axis=0)
    else:
        err = (aa @ wa) * (2**-8 + 2**-17 + len(a) * 2**-23)
    return err + 4 * 2**-24 * (aa @ wa) + 1e-30


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("lbr", [False, True])
def test_one_step_is_within_the_quantization_bound_of_the_float_gru(precision, lbr):
    """One step from h0 (every sentence one word long), so that every input of the error bound
    is known: the pre-activations' error bounds (above) carried through sigmoid (slope <= 1/4),
    tanh (<= 1) and the state blend, against the float64 GRU of the unquantized weights."""
    rng = np.random.default_rng(11)
    oc, ic, n = 48, 40, 30
    x, w, call = random_case(rng, 1, ic, oc, [1] * n)
    q = quantize_gru_weights(**w, precision=precision)
    attrs = {"linear_before_reset": lbr}
    hidden, _ = run_kernel(x, q, call, attrs)
    exact, _ = reference.gru(x, **w, **call, **attrs)
    wx, wh, b, bh = (np.asarray(w[k], np.float64)[0] for k in ("wx", "wh", "bias", "bias_h"))
    u, r, c = slice(0, oc), slice(oc, 2 * oc), slice(2 * oc, 3 * oc)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    act_err = 4e-7  # the polynomials' error, a few float32 ulps of values <= 1 in size
    for i in range(n):
        xi, hp = x[i].astype(np.float64), call["h0"][0, i].astype(np.float64)
        e_x = _pre_activation_bound(xi, wx, precision)
        e_h = _pre_activation_bound(hp, wh, precision)
        gx, gh = xi @ wx + b, hp @ wh
        upd, rst = sig(gx[u] + gh[u] + bh[u]), sig(gx[r] + gh[r] + bh[r])
        d_u = (e_x[u] + e_h[u]) / 4 + act_err
        d_r = (e_x[r] + e_h[r]) / 4 + act_err
        if lbr:
            inner = gh[c] + bh[c]
            pre = gx[c] + rst * inner
            e_c = e_x[c] + d_r * np.abs(inner) + (rst + d_r) * e_h[c]
        else:
            rh = rst * hp
            pre = gx[c] + rh @ wh[:, c] + bh[c]
            # r * h_prev off by d_r * |h|, then quantized itself
            e_c = (
                e_x[c]
                + (d_r * np.abs(hp)) @ np.abs(wh[:, c])
                + _pre_activation_bound(rh, wh[:, c], precision) * (1 + 2**-7)
            )
        cand = np.tanh(pre)
        d_c = e_c + act_err
        bound = (1 - upd + d_u) * d_c + np.abs(hp - cand) * d_u + 1e-6
        err = np.abs(hidden[i].astype(np.float64) - exact[i])
        assert np.all(err <= bound), (i, float((err - bound).max()), float(err.max()))
        assert err.max() > 0  # the quantized GRU is not the float one


def test_a_nan_reaches_only_its_own_sentence():
    rng = np.random.default_rng(5)
    x, w, call = random_case(rng, 1, 8, 16, [3, 4, 2], h0=False)
    q = quantize_gru_weights(**w, precision="int8")
    x[4, 2] = np.nan  # sentence 1, word 1
    hidden, _ = run_kernel(x, q, call, {})
    assert np.isnan(hidden[4:7]).all()
    assert np.isfinite(hidden[:4]).all() and np.isfinite(hidden[7:]).all()


def test_weight_errors_name_what_is_wrong():
    rng = np.random.default_rng(1)
    _, w, _ = random_case(rng, 1, 4, 5, [1])
    w["wh"][0, 2, 3] = np.inf
    with pytest.raises(ArgumentError, match=r"wh holds inf at direction 0, row 2, column 3"):
        quantize_gru_weights(**w, precision="int8")
    with pytest.raises(ArgumentError, match="precision must be 'int8' or 'bf16'"):
        quantize_gru_weights(**w, precision="int4")
    w["wh"][0, 2, 3] = 0
    q = quantize_gru_weights(**w, precision="int8")
    bad = type(q)(**{**q.__dict__, "wh": q.wh.astype(np.int16)})
    with pytest.raises(ArgumentError, match="wh must be int8"):
        pack_qgru_weights(bad)
    with pytest.raises(ArgumentError, match="int8 needs input and hidden size <= 65536"):
        desc = kernels.gru.QGRUDescriptor(
            layout=kernels.core._C.SeqLayout.lod, ic=70000, oc=4, directions=1, reverse=False,
            linear_before_reset=False, origin_mode=True, act=kernels.core._C.GruAct.tanh,
            gate=kernels.core._C.GruAct.sigmoid, projection=True,
            precision=kernels.core._C.GruPrecision.int8, isa=kernels.core._C.Isa.scalar,
            extensions=0,
        )  # fmt: skip
        kernels.core._C.primitive(desc)


def test_a_descriptor_cannot_ask_for_extensions_the_cpu_lacks():
    missing = 3 & ~kernels.core._C.cpu_extensions(1)  # what avx2 code cannot use here
    if not missing:
        missing = 3  # nothing is missing for avx2 on this CPU: scalar code has none
        isa = kernels.core._C.Isa.scalar
    else:
        isa = kernels.core._C.Isa.avx2
    desc = kernels.gru.QGRUDescriptor(
        layout=kernels.core._C.SeqLayout.lod, ic=4, oc=4, directions=1, reverse=False,
        linear_before_reset=False, origin_mode=True, act=kernels.core._C.GruAct.tanh,
        gate=kernels.core._C.GruAct.sigmoid, projection=True,
        precision=kernels.core._C.GruPrecision.int8, isa=isa, extensions=missing,
    )  # fmt: skip
    with pytest.raises(ArgumentError, match="cannot run the extensions"):
        kernels.core._C.primitive(desc)


def test_fusebridge_isa_masks_the_extensions(tmp_path):
    """FUSEBRIDGE_ISA=<isa>-novnni-nobf16 behaves as a CPU without them: the quantized GRU runs
    its emulation (CI's AVX2 pass runs avx2-novnni, an AMD Zen 3)."""
    code = "from fusebridge import kernels as k; print(k.extensions(), k.available_extensions())"
    path = os.pathsep.join([str(Path(fusebridge.__file__).parents[1]), *sys.path])
    isa = kernels.available_isas()[-1]

    def run(value):
        env = {**os.environ, "FUSEBRIDGE_ISA": value, "PYTHONPATH": path}
        return subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=tmp_path, capture_output=True, text=True
        )

    out = run(f"{isa}-novnni-nobf16")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[0] == "() ()"
    out = run(f"{isa}-nofma")
    assert out.returncode != 0 and "optionally followed by -novnni and/or -nobf16" in out.stderr


def test_set_extensions_checks_its_names():
    with pytest.raises(ArgumentError, match="set_extensions"):
        kernels.set_extensions(("vnni", "amx"))
    with pytest.raises(ArgumentError, match="set_extensions"):
        kernels.set_extensions("vnni")
    if _ALLOWED:
        before = kernels.extensions()
        kernels.set_extensions(())
        assert kernels.extensions() == ()
        kernels.set_extensions(before)
