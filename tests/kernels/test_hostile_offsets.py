"""Offsets and sequence lengths that would make a kernel read outside its buffers or size an
array from a wrapped-around number: every kernel taking them (the Python faces and the compiled
core called directly) refuses them with an ArgumentError naming the op and the value, before
any size is computed from them."""

import numpy as np
import pytest
from helpers.bounded_memory import run_calls_limited

from fusebridge import ArgumentError, Error, kernels
from fusebridge.kernels import core, reference

I64_MAX, I64_MIN = 2**63 - 1, -(2**63)
ROWS = 5
X = np.arange(ROWS * 3, dtype=np.float32).reshape(ROWS, 3)
WEIGHTS = kernels.pack_gru_weights(np.zeros((3, 12), np.float32), np.zeros((4, 12), np.float32))

# Offsets that pass np.diff-based checks, wrapped around, or break one rule each.
HOSTILE_OFFSETS = [
    pytest.param([0, I64_MAX, -2, ROWS], "be nondecreasing", id="wrapping-diff"),
    pytest.param([0, I64_MAX, I64_MIN, ROWS], "be nondecreasing", id="int64-extremes"),
    pytest.param([0, -1, ROWS], "be nondecreasing", id="negative"),
    pytest.param([0, 3, 2, ROWS], "be nondecreasing", id="decreasing"),
    pytest.param([0, ROWS + 1], "end at the number of rows", id="last-past-rows"),
    pytest.param([0, ROWS - 1], "end at the number of rows", id="last-short"),
    pytest.param([0, I64_MAX], "end at the number of rows", id="huge"),
    pytest.param([1, ROWS], "start at 0", id="first-not-0"),
    pytest.param([I64_MIN, ROWS], "start at 0", id="first-int64-min"),
    pytest.param([], "have N\\+1 >= 1 entries", id="empty"),
]

OFFSET_KERNELS = {
    "lod_to_padded": lambda off: kernels.lod_to_padded(X, off),
    "sequence_pool": lambda off: kernels.sequence_pool(X, off, "SUM"),
    "crf_decoding": lambda off: kernels.crf_decoding(X, np.zeros((5, 3), np.float32), off),
    "fusion_gru": lambda off: kernels.fusion_gru(X, WEIGHTS, offsets=off),
    # The NumPy oracle (Session(backend="reference")) slices with them: silently wrong before.
    "reference.lod_to_padded": lambda off: reference.lod_to_padded(X, off),
    "reference.sequence_pool": lambda off: reference.sequence_pool(X, off, "SUM"),
    "reference.crf_decoding": lambda off: reference.crf_decoding(X, np.zeros((5, 3)), off),
    "reference.gru": lambda off: reference.gru(
        X, np.zeros((3, 12)), np.zeros((4, 12)), offsets=off
    ),
}


@pytest.mark.parametrize("op", OFFSET_KERNELS)
@pytest.mark.parametrize(("offsets", "match"), HOSTILE_OFFSETS)
def test_python_faces_refuse_hostile_offsets(op, offsets, match):
    with pytest.raises(ArgumentError, match=f"^{op}: offsets must {match}"):
        OFFSET_KERNELS[op](np.array(offsets, np.int64))


@pytest.mark.parametrize(("offsets", "match"), HOSTILE_OFFSETS)
def test_compiled_crf_decoding_checks_offsets_itself(offsets, match):
    """The core's own check, for callers of _C (the Python face would have refused first)."""
    path = np.empty((ROWS, 1), np.int64)
    with pytest.raises(ArgumentError, match=f"^crf_decoding: offsets must {match}"):
        core._C.crf_decoding(
            X, np.zeros((5, 3), np.float32), np.array(offsets, np.int64), None, path
        )


@pytest.mark.parametrize(
    ("offsets", "match"),
    [
        ([0, 2**63], "offsets must fit in int64, got 9223372036854775808"),
        ([0, 2**64 + ROWS], "offsets must fit in int64"),
        ([0, -1, 2**63], "offsets must fit in int64"),
        (np.array([0, 2**63], np.uint64), "offsets must fit in int64"),
    ],
)
def test_offsets_beyond_int64_are_named(offsets, match):
    with pytest.raises(ArgumentError, match=f"^lod_to_padded: {match}"):
        kernels.lod_to_padded(X, offsets)


PADDED = np.zeros((4, 2, 3), np.float32)  # tnc: T = 4, N = 2
HOSTILE_SEQ_LENS = [
    pytest.param([1, -1], "must not be negative", id="negative"),
    pytest.param([1, I64_MIN], "must not be negative", id="int64-min"),
    pytest.param([5, 1], "must not exceed the padded length 4", id="past-T"),
    pytest.param([I64_MAX, I64_MAX], "must not exceed the padded length 4", id="int64-max"),
    pytest.param([1, 2, 3], "must have one entry per sentence", id="too-many"),
]
SEQ_LEN_KERNELS = {
    "padded_to_lod": lambda lens: kernels.padded_to_lod(PADDED, lens),
    "fusion_gru": lambda lens: kernels.fusion_gru(PADDED, WEIGHTS, layout="tnc", seq_lens=lens),
}


@pytest.mark.parametrize("op", SEQ_LEN_KERNELS)
@pytest.mark.parametrize(("seq_lens", "match"), HOSTILE_SEQ_LENS)
def test_python_faces_refuse_hostile_seq_lens(op, seq_lens, match):
    with pytest.raises(ArgumentError, match=f"^{op}: seq_lens {match}"):
        SEQ_LEN_KERNELS[op](np.array(seq_lens, np.int64))


# All but the layout: 3 inputs, 4 hidden units, one forward direction.
GRU_FIELDS = {"ic": 3, "oc": 4, "directions": 1, "reverse": False, "projection": True}
GRU_FIELDS |= {"linear_before_reset": False, "origin_mode": True, "isa": core._C.Isa.scalar}
GRU_FIELDS |= {"act": core._C.GruAct.tanh, "gate": core._C.GruAct.sigmoid}


def gru_forward(lens, layout="lod", steps=0, x=X, out=None):
    """The compiled GRU called directly: the lengths and steps are arguments of the call."""
    desc = core._C.GRUDescriptor(layout=core._C.SeqLayout[layout], **GRU_FIELDS)
    prim = core._C.GruPrimitive(desc)
    w, out = WEIGHTS, np.empty((1, 4), np.float32) if out is None else out
    lens = np.array(lens, np.int64)
    prim.forward(lens, steps, x, w.wx, w.wh, w.bias_x, w.bias_hc, None, out, None)


@pytest.mark.parametrize(
    ("lens", "layout", "steps", "match"),
    [
        ([I64_MAX, I64_MAX, 304], "lod", 0, "the sentence lengths sum past int64"),
        ([-1, 6], "lod", 0, "sentence 0 has length -1, below 0"),
        ([I64_MIN], "lod", 0, "has length -9223372036854775808"),
        ([3, 5], "tnc", 4, r"sentence 1 has length 5, outside \[0, 4\]"),
        ([1, 1, 1, 1], "ntc", 2**62, r"steps \* sentences .* overflows int64"),
        ([1], "tnc", -1, "steps must be >= 0"),
    ],
)
def test_compiled_gru_checks_lengths_before_sizing(lens, layout, steps, match):
    """Before: 'cannot create std::vector larger than max_size()' (a size from a sum that
    wrapped), or a plan over rows that do not exist."""
    with pytest.raises(ArgumentError, match=match):
        gru_forward(lens, layout, steps)


def test_compiled_gru_descriptor_refuses_unknown_layouts():
    with pytest.raises(ArgumentError, match="GRUDescriptor: field 'layout' cannot take 7"):
        core._C.GRUDescriptor(layout=7, **GRU_FIELDS)


def test_compiled_gru_plan_checks_its_buffers():
    with pytest.raises(ArgumentError, match="fusion_gru: x holds 12 elements, expected 15"):
        gru_forward([2, 3], x=X[:4], out=np.empty((5, 4), np.float32))


def test_lodtensor_overflow_case_runs_in_bounded_memory():
    """The reported case, each kernel on it, in a process limited to 4 GiB of address space:
    typed errors, no crash (lod_to_padded segfaulted), nothing allocated from a wrapped size."""
    lines = run_calls_limited(
        """
        import numpy as np
        import fusebridge as fb
        from fusebridge import kernels as k
        x = np.zeros((302, 4), np.float32)
        offsets = np.array([0, 2**63 - 1, -2, 302], np.int64)
        w = k.pack_gru_weights(np.zeros((4, 12), np.float32), np.zeros((4, 12), np.float32))
        calls = [
            lambda: fb.LoDTensor(x, lengths=[2**63 - 1, 2**63 - 1, 304]),
            lambda: fb.LoDTensor(x, offsets=offsets),
            lambda: k.lod_to_padded(x, offsets),
            lambda: k.sequence_pool(x, offsets, "SUM"),
            lambda: k.fusion_gru(x, w, offsets=offsets),
            lambda: k.crf_decoding(x, np.zeros((6, 4), np.float32), offsets),
        ]
        """
    )
    assert len(lines) == 6 and all(line.startswith("ArgumentError") for line in lines), lines
    assert "lengths sum to 18446744073709551918" in lines[0]
    assert all("got 9223372036854775807 then -2" in line for line in lines[1:])


def test_errors_are_fusebridge_errors():
    with pytest.raises(Error):
        kernels.sequence_pool(X, [0, I64_MAX, -2, ROWS], "MAX")
