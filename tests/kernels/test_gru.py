"""The compiled fused GRU against the NumPy oracle written from the formulas (reference.gru),
on every ISA path this CPU runs; the framework oracles are in test_gru_paddle.py and
test_gru_onnxruntime.py."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from fusebridge import ArgumentError, ArgumentTypeError, kernels
from fusebridge.kernels import core, reference
from fusebridge.kernels.gru import ACTIVATIONS

ACTS = sorted(ACTIVATIONS)


def random_gru(rng, d, ic, oc, lens, *, layout="lod", steps=None, h0=True, bias_h=True, scale=0.7):
    """Inputs for one call; weights scaled by scale/sqrt(size). With unbounded gates (relu,
    identity) r * (h @ Wh) is quadratic in h and blows up within a few steps unless the
    weights are small."""

    def f32(*shape, scale=1.0):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    lens = np.asarray(lens, np.int64)
    n, steps = len(lens), int(lens.max(initial=0)) if steps is None else steps
    args = {
        "wx": f32(d, ic, 3 * oc, scale=scale / np.sqrt(ic)),
        "wh": f32(d, oc, 3 * oc, scale=scale / np.sqrt(oc)),
        "bias": f32(d, 3 * oc, scale=0.3),
        "bias_h": f32(d, 3 * oc, scale=0.3) if bias_h else None,
        "h0": f32(d, n, oc, scale=0.5) if h0 else None,
    }
    if layout == "lod":
        x = f32(int(lens.sum()), ic)
        args["offsets"] = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    else:
        x = f32(steps, n, ic) if layout == "tnc" else f32(n, steps, ic)
        args["seq_lens"] = lens
    return x, args


def assert_matches_reference(x, args, **attrs):
    hidden, last = kernels.fusion_gru(x, **args, **attrs, return_last=True)
    ref_hidden, ref_last = reference.gru(x, **args, **attrs)
    assert hidden.dtype == np.float32 and hidden.shape == ref_hidden.shape
    tol = 2e-5 * max(1.0, float(np.abs(ref_hidden).max(initial=0)))
    np.testing.assert_allclose(hidden, ref_hidden, rtol=2e-5, atol=tol)
    np.testing.assert_allclose(last, ref_last, rtol=2e-5, atol=tol)
    return hidden, last


@st.composite
def gru_cases(draw):
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    layout = draw(st.sampled_from(["lod", "tnc", "ntc"]))
    lens = draw(st.lists(st.integers(0, 7), min_size=0, max_size=6))
    steps = max(lens, default=0) + draw(st.integers(0, 2)) if layout != "lod" else None
    return {
        "direction": direction,
        "layout": layout,
        "lens": lens,
        "steps": steps,
        "ic": draw(st.integers(1, 20)),
        "oc": draw(st.sampled_from([1, 3, 8, 15, 16, 17, 33, 40])),
        "h0": draw(st.booleans()),
        "bias_h": draw(st.booleans()),
        "attrs": {
            "linear_before_reset": draw(st.booleans()),
            "origin_mode": draw(st.booleans()),
            "activation": draw(st.sampled_from(ACTS)),
            "gate_activation": draw(st.sampled_from(ACTS)),
        },
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


@given(case=gru_cases())
def test_matches_reference(each_isa, case):
    rng = np.random.default_rng(case["seed"])
    d = 2 if case["direction"] == "bidirectional" else 1
    x, args = random_gru(
        rng,
        d,
        case["ic"],
        case["oc"],
        case["lens"],
        layout=case["layout"],
        steps=case["steps"],
        h0=case["h0"],
        bias_h=case["bias_h"],
        scale=0.7 if case["attrs"]["gate_activation"] in ("sigmoid", "tanh") else 0.25,
    )
    assert_matches_reference(
        x, args, layout=case["layout"], direction=case["direction"], **case["attrs"]
    )


@pytest.mark.parametrize("lbr", [False, True])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
@pytest.mark.parametrize(("sentences", "oc"), [(40, 70), (3, 300), (16, 320)])
def test_threads_give_the_same_bits(each_isa, threads, lbr, direction, sentences, oc):
    """A batch large enough for the recurrence and the projection to split over threads: by
    sentences and directions (40 sentences; 3 sentences in two directions), by hidden units,
    each step's parts done before the next (3 sentences in one direction), and by sentences
    until the last few, then by hidden units (16 sentences at hidden 320, whose Wh is past a
    thread's share of the cache: gru.cpp's tail_step)."""
    rng = np.random.default_rng(1)
    lens = rng.integers(0, 30, sentences)
    d = 2 if direction == "bidirectional" else 1
    x, args = random_gru(rng, d, 24, oc, lens)
    attrs = {"direction": direction, "linear_before_reset": lbr, "origin_mode": False}
    threads(1)
    one = kernels.fusion_gru(x, **args, **attrs)
    for count in (2, 3):
        threads(count)
        many, _ = assert_matches_reference(x, args, **attrs)
        np.testing.assert_array_equal(many, one)


@pytest.mark.parametrize("lbr", [False, True])
@pytest.mark.parametrize("count", [1, 2, 3])
def test_projection_step_by_step_gives_the_bits_of_the_projection_up_front(
    each_isa, threads, lbr, count
):
    """A batch whose projection outgrows a quarter of L2 is projected a few steps at a time by
    the thread that runs those steps (gru.cpp's by_step); a sentence alone is projected up front.
    Each sentence's rows in the batch equal the sentence run alone, bit for bit."""
    rng = np.random.default_rng(7)
    lens = rng.integers(1, 40, 48)
    x, args = random_gru(rng, 2, 24, 70, lens)
    assert x.shape[0] * 2 * 3 * 70 * 4 > 1 << 19  # past gru.cpp's kProjectionBytesUpFront
    attrs = {"direction": "bidirectional", "linear_before_reset": lbr, "origin_mode": False}
    threads(count)
    batch, _ = assert_matches_reference(x, args, **attrs)
    offsets = args["offsets"]
    for s in (0, 5, 47):
        rows = slice(offsets[s], offsets[s + 1])
        alone = {
            **args,
            "offsets": np.array([0, lens[s]], np.int64),
            "h0": args["h0"][:, s : s + 1],
        }
        np.testing.assert_array_equal(kernels.fusion_gru(x[rows], **alone, **attrs), batch[rows])


@pytest.mark.parametrize("lbr", [False, True])
@pytest.mark.parametrize(
    ("gate", "act"),
    [("sigmoid", "tanh"), ("sigmoid", "relu"), ("tanh", "sigmoid"), ("relu", "identity")],
)
def test_nan_propagates(each_isa, gate, act, lbr):
    """NaN in the input or in a weight reaches the outputs exactly where the reference puts
    it (a clamp or a max that drops NaN would turn it into a finite number)."""
    rng = np.random.default_rng(5)
    lens = [3, 5, 1]
    attrs = {
        "direction": "bidirectional",
        "linear_before_reset": lbr,
        "origin_mode": False,
        "gate_activation": gate,
        "activation": act,
    }
    x, args = random_gru(rng, 2, 6, 20, lens, scale=0.25)
    nan_x = np.full_like(x, np.nan)
    nan_x[3] = x[3]  # one finite word: its sentence is NaN from the second word on
    hidden, last = kernels.fusion_gru(nan_x, **args, **attrs, return_last=True)
    ref_hidden, ref_last = reference.gru(nan_x, **args, **attrs)
    np.testing.assert_array_equal(np.isnan(hidden), np.isnan(ref_hidden))
    np.testing.assert_array_equal(np.isnan(last), np.isnan(ref_last))
    assert np.isnan(hidden[:3]).all() and np.isnan(hidden[4:]).all()
    assert np.isfinite(hidden[3, :20]).all()  # the forward direction's first word
    for weight in ("wx", "wh"):
        bad = {**args, weight: args[weight].copy()}
        bad[weight][0, 2, 5] = np.nan  # one weight of the forward direction
        hidden = kernels.fusion_gru(x, **bad, **attrs)
        ref_hidden, _ = reference.gru(x, **bad, **attrs)
        np.testing.assert_array_equal(np.isnan(hidden), np.isnan(ref_hidden))
        assert np.isnan(hidden[:, :20]).any() and not np.isnan(hidden[:, 20:]).any()


def test_padded_layouts_never_read_padding():
    rng = np.random.default_rng(2)
    lens = [4, 0, 6, 1]
    x, args = random_gru(rng, 2, 5, 9, lens, layout="tnc", steps=8)
    attrs = {"layout": "tnc", "direction": "bidirectional"}
    clean = kernels.fusion_gru(x, **args, **attrs)
    for s, n in enumerate(lens):
        x[n:, s] = np.nan  # the padding of sentence s
    dirty = kernels.fusion_gru(x, **args, **attrs)
    np.testing.assert_array_equal(clean, dirty)
    assert not dirty[4:, 0].any() and not dirty[:, 1].any()


def test_empty_sentences_return_h0():
    rng = np.random.default_rng(3)
    x, args = random_gru(rng, 2, 4, 6, [0, 3, 0])
    hidden, last = kernels.fusion_gru(x, **args, direction="bidirectional", return_last=True)
    assert hidden.shape == (3, 12)
    np.testing.assert_array_equal(last[:, [0, 2]], args["h0"][:, [0, 2]])
    x, args = random_gru(rng, 1, 4, 6, [0, 0], h0=False)
    hidden, last = kernels.fusion_gru(x, **args, return_last=True)
    assert hidden.shape == (0, 6) and not last.any()


def test_packed_weights_equal_raw_and_are_read_only():
    rng = np.random.default_rng(4)
    x, args = random_gru(rng, 1, 6, 20, [5, 2])
    raw = {k: args[k] for k in ("wx", "wh", "bias", "bias_h")}
    copies = {k: v.copy() for k, v in raw.items()}
    w = kernels.pack_gru_weights(**raw)
    packed = kernels.fusion_gru(x, w, offsets=args["offsets"], h0=args["h0"])
    np.testing.assert_array_equal(packed, kernels.fusion_gru(x, **args))
    for k in raw:
        np.testing.assert_array_equal(raw[k], copies[k])
    with pytest.raises(ValueError):
        w.wh[0, 0, 0, 0, 0] = 1.0


def test_packed_weights_start_on_cache_lines():
    # numpy places data 16 bytes past a 64-byte line, where each AVX-512 load of a weight reads
    # two lines (csrc/aligned.hpp); several packings, as numpy's placement varies.
    rng = np.random.default_rng(5)
    for oc in (5, 16, 33, 64):
        _, args = random_gru(rng, 2, 7, oc, [3])
        w = kernels.pack_gru_weights(args["wx"], args["wh"], args["bias"], args["bias_h"])
        for name in ("wx", "wh", "bias_x", "bias_hc"):
            a = getattr(w, name)
            assert a.ctypes.data % 64 == 0 and a.flags.c_contiguous, (oc, name)


def test_out_receives_hidden_and_is_checked():
    rng = np.random.default_rng(6)
    x, args = random_gru(rng, 2, 6, 5, [4, 1])
    want = kernels.fusion_gru(x, **args, direction="bidirectional")
    out = np.full((5, 10), np.nan, np.float32)
    got = kernels.fusion_gru(x, **args, direction="bidirectional", out=out)
    assert got is out
    np.testing.assert_array_equal(out, want)
    bad = [
        (np.zeros((5, 9), np.float32), "out must have shape \\(5, 10\\) and dtype float32"),
        (np.zeros((5, 10)), "dtype float32"),
        (np.zeros((10, 5), np.float32).T, "writeable C-contiguous"),
    ]
    for out, match in bad:
        with pytest.raises(ArgumentError, match=match):
            kernels.fusion_gru(x, **args, direction="bidirectional", out=out)
    x, args = random_gru(rng, 1, 6, 6, [4, 1])  # IC = OC: x itself has hidden's shape
    with pytest.raises(ArgumentError, match="out must not be x"):
        kernels.fusion_gru(x, **args, out=x)
    shared = np.zeros((6, 6), np.float32)
    shared[:5] = x
    with pytest.raises(ArgumentError, match="overlaps the input"):
        kernels.fusion_gru(shared[:5], **args, out=shared[1:])


def test_batches_with_the_same_total_rows_share_a_primitive_and_are_right():
    """Paddle's oneDNN fusion_gru keys by names and total rows and goes wrong when the batch
    changes: two batches with the same number of words must both be right. The lengths are
    arguments of each call, so both run on one primitive (its plan is made per call)."""
    rng = np.random.default_rng(5)
    before = kernels.cache_stats()["misses"]
    for lens in ([6, 6], [3, 3, 3, 3], [6, 6]):
        x, args = random_gru(rng, 1, 4, 5, lens)
        assert_matches_reference(x, args, origin_mode=False)
    assert kernels.cache_stats()["misses"] - before <= 1


@pytest.mark.parametrize("act", ["sigmoid", "tanh"])
def test_activations_accurate_to_1e6_relative(each_isa, act):
    x = np.linspace(-80, 80, 200001, dtype=np.float32)
    x = np.concatenate([x, np.float32(10.0) ** -np.arange(1, 30, dtype=np.float32)])
    x = np.concatenate([x, -x])
    y = np.empty_like(x)
    core._C.gru_activation(core.ISAS.index(each_isa), ACTIVATIONS[act], x, y)
    x64 = x.astype(np.float64)
    ref = np.tanh(x64) if act == "tanh" else 1 / (1 + np.exp(-x64))
    zero = ref == 0
    assert not y[zero].any()
    assert np.max(np.abs(y - ref)[~zero] / np.abs(ref[~zero])) < 1e-6


def test_errors_name_op_argument_and_expectation():
    rng = np.random.default_rng(6)
    x, args = random_gru(rng, 1, 4, 5, [2, 3])
    cases = [
        ({"x": x.astype(np.float64)}, ArgumentTypeError, "x must be float32"),
        ({"offsets": np.array([0, 2, 4])}, ArgumentError, "offsets must end"),
        ({"layout": "nct"}, ArgumentError, "layout must be one of"),
        ({"direction": "bidirectional"}, ArgumentError, "needs weights for 2"),
        ({"h0": np.zeros((3, 5), np.float32)}, ArgumentError, r"h0 must have shape \(1, 2, 5\)"),
        ({"activation": "gelu"}, ArgumentError, "activation must be one of"),
        ({"wh": args["wh"][:, :4]}, ArgumentError, "wx .* and wh .* disagree"),
        ({"bias": np.zeros(7, np.float32)}, ArgumentError, r"bias must have shape \(1, 15\)"),
        ({"x": x[:, :3]}, ArgumentError, "x has 3 features, the weights expect IC = 4"),
        ({"seq_lens": [2, 3]}, ArgumentError, "seq_lens belongs to padded layouts"),
        ({"wx": args["wx"].astype(np.int32)}, ArgumentTypeError, "wx must be a float"),
    ]
    for change, error, message in cases:
        call = {"x": x, **args, **change}
        with pytest.raises(error, match=f"^(fusion_gru|pack_gru_weights): .*{message}"):
            kernels.fusion_gru(call.pop("x"), **call)
    w = kernels.pack_gru_weights(args["wx"], args["wh"])
    with pytest.raises(ArgumentError, match="GRUWeights alone"):
        kernels.fusion_gru(x, w, args["wh"], offsets=args["offsets"])
    with pytest.raises(ArgumentError, match="x must be 3-D for layout 'tnc'"):
        kernels.fusion_gru(x, w, layout="tnc")


def _packed_layout(w: np.ndarray, ocp: int) -> np.ndarray:
    """[D, K, 3*OC] -> [D, OCp/16, K, 3, 16], zero past OC: the layout GRUWeights documents,
    written with NumPy (the packer's code before the compiled one replaced it)."""
    d, k, g3 = w.shape
    oc = g3 // 3
    blocks = np.zeros((d, k, 3, ocp), np.float32)  # [D, k, gate, unit]
    blocks[..., :oc] = w.reshape(d, k, 3, oc)
    return blocks.reshape(d, k, 3, ocp // 16, 16).transpose(0, 3, 1, 2, 4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
@pytest.mark.parametrize(("d", "ic", "oc"), [(1, 3, 5), (2, 7, 16), (2, 1, 33)])
def test_the_compiled_packer_writes_the_documented_layout(dtype, d, ic, oc):
    """kernels.pack_gru_weights (the compiled packer, csrc/gru.cpp, which the framework glues'
    saved weights come from too) against the layout written from its documentation, bit for
    bit: values rounded to float32 once, update and reset biases summed in float32."""
    rng = np.random.default_rng(oc)
    wx, wh = (rng.standard_normal((d, k, 3 * oc)).astype(dtype) for k in (ic, oc))
    b, bh = rng.standard_normal((2, d, 3 * oc)).astype(dtype)
    w = kernels.pack_gru_weights(wx, wh, b, bh)
    ocp = -(-oc // 16) * 16
    np.testing.assert_array_equal(w.wx, _packed_layout(wx.astype(np.float32), ocp))
    np.testing.assert_array_equal(w.wh, _packed_layout(wh.astype(np.float32), ocp))
    b32, bh32 = (v.astype(np.float32).reshape(d, 3, oc) for v in (b, bh))
    bias_x = np.zeros((d, 3, ocp), np.float32)
    bias_x[:, :, :oc] = b32
    bias_x[:, :2, :oc] += bh32[:, :2]
    bias_hc = np.zeros((d, ocp), np.float32)
    bias_hc[:, :oc] = bh32[:, 2]
    np.testing.assert_array_equal(w.bias_x, bias_x)
    np.testing.assert_array_equal(w.bias_hc, bias_hc)
