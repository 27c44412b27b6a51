"""The compiled CRF Viterbi decoding against the NumPy oracle written from the formulas
(reference.crf_decoding) and against Paddle's own `crf_decoding` op in a legacy static program.

Integer-valued scores are exact in float32 and float64 alike, so the paths must agree bit for
bit, ties included: they pin the tie-breaking (the first maximum wins, as in Paddle)."""

from __future__ import annotations

import functools

import numpy as np
import pytest
from helpers.error_bounds import assert_within, path_score_bound
from helpers.paddle_oracle import legacy_static, paddle_or_skip
from hypothesis import given
from hypothesis import strategies as st

from fusebridge import ArgumentError, ArgumentTypeError, kernels
from fusebridge.kernels import reference


def offsets_of(lengths) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)


def scores(rng, shape, kind: str) -> np.ndarray:
    """'ties': integers in [-2, 2], ties everywhere; 'spread': integers up to 1e4 (sums stay
    exact in float32); 'normal': continuous, where float32 and float64 may part at near-ties."""
    if kind == "ties":
        return rng.integers(-2, 3, shape).astype(np.float32)
    if kind == "spread":
        return rng.integers(-10_000, 10_001, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def path_score(emission, transition, offsets, path) -> np.ndarray:
    """Each sentence's score along `path`, in float64 (0 for an empty sentence)."""
    x, t, p = emission.astype(np.float64), transition.astype(np.float64), path[:, 0]
    out = []
    for s in range(len(offsets) - 1):
        lo, hi = offsets[s], offsets[s + 1]
        if hi == lo:
            out.append(0.0)
            continue
        tags = p[lo:hi]
        total = t[0, tags[0]] + t[1, tags[-1]] + x[np.arange(lo, hi), tags].sum()
        out.append(total + t[2 + tags[:-1], tags[1:]].sum())
    return np.array(out)


@st.composite
def crf_cases(draw):
    lengths = draw(st.lists(st.integers(0, 12), min_size=0, max_size=8))
    tags = draw(st.integers(1, 30))
    kind = draw(st.sampled_from(["ties", "spread", "normal"]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    words = sum(lengths)
    emission = scores(rng, (words, tags), kind)
    transition = scores(rng, (tags + 2, tags), kind)
    label = rng.integers(0, tags, (words, 1)) if draw(st.booleans()) else None
    return emission, transition, offsets_of(lengths), label, kind


@given(case=crf_cases())
def test_matches_reference(each_isa, case):
    emission, transition, offsets, label, kind = case
    path = kernels.crf_decoding(emission, transition, offsets)
    expected = reference.crf_decoding(emission, transition, offsets)
    assert path.dtype == np.int64 and path.shape == (emission.shape[0], 1)
    assert ((path >= 0) & (path < emission.shape[1])).all()
    if kind == "normal":
        # Rounding may pick another path only where two are within rounding of each other:
        # a float32 path score is a sum of 2L + 1 terms (error_bounds.path_score_bound).
        assert_within(
            path_score(emission, transition, offsets, path),
            path_score(emission, transition, offsets, expected),
            2 * path_score_bound(emission, transition, offsets, np.zeros(emission.shape)),
        )
    else:
        np.testing.assert_array_equal(path, expected)
    if label is not None:
        hits = kernels.crf_decoding(emission, transition, offsets, label)
        np.testing.assert_array_equal(hits, (path == label).astype(np.int64))
        if kind != "normal":
            np.testing.assert_array_equal(
                hits, reference.crf_decoding(emission, transition, offsets, label)
            )


def tie_cases():
    """(emission, transition, lengths, expected path): each tie resolved to the first tag."""
    t = 4
    zeros = np.zeros((t + 2, t), np.float32)
    start_tie = zeros.copy()
    start_tie[0] = [0, 3, 0, 3]
    end_tie = zeros.copy()
    end_tie[1] = [1, 0, 1, 0]
    from_tie = np.array([[1, 0, 1, 0], [0, 0, 9, 0]], np.float32)
    return [
        (np.zeros((5, t), np.float32), zeros, [2, 0, 3], [0, 0, 0, 0, 0]),
        (np.array([[0, 5, 0, 5]], np.float32), zeros, [1], [1]),
        (np.array([[0, 0, 0, 0], [0, 0, 9, 0]], np.float32), start_tie, [2], [1, 2]),
        (np.zeros((1, t), np.float32), end_tie, [1], [0]),
        (from_tie, zeros, [2], [0, 2]),  # tags 0 and 2 lead equally to tag 2
        (np.full((3, t), -np.inf, np.float32), zeros, [3], [0, 0, 0]),
    ]


@pytest.mark.parametrize("case", range(len(tie_cases())))
def test_ties_go_to_the_first_tag(each_isa, case):
    emission, transition, lengths, expected = tie_cases()[case]
    path = kernels.crf_decoding(emission, transition, offsets_of(lengths))
    np.testing.assert_array_equal(path[:, 0], expected)
    np.testing.assert_array_equal(
        reference.crf_decoding(emission, transition, offsets_of(lengths))[:, 0], expected
    )


def test_every_isa_gives_the_same_path():
    """The Viterbi's adds and compares round the same at any vector width: LAC's 57 tags (3
    full zmm and a partial one, 14 full xmm and one lane) and a tag count under one vector."""
    rng = np.random.default_rng(3)
    before = kernels.isa()
    for tags in (57, 5):
        lengths = rng.integers(1, 40, 30)
        emission = rng.standard_normal((int(lengths.sum()), tags)).astype(np.float32)
        transition = rng.standard_normal((tags + 2, tags)).astype(np.float32)
        paths = []
        for isa in kernels.available_isas():
            kernels.set_isa(isa)
            paths.append(kernels.crf_decoding(emission, transition, offsets_of(lengths)))
        kernels.set_isa(before)
        for path in paths[1:]:
            np.testing.assert_array_equal(path, paths[0])


def test_threads_give_the_same_path(threads):
    """Enough work for both threads, with lengths that differ a lot (dynamic schedule)."""
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 60, 300)
    emission = scores(rng, (int(lengths.sum()), 24), "normal")
    transition = scores(rng, (26, 24), "normal")
    offsets = offsets_of(lengths)
    threads(1)
    one = kernels.crf_decoding(emission, transition, offsets)
    for count in (3, 2):
        threads(count)
        two = kernels.crf_decoding(emission, transition, offsets)
        np.testing.assert_array_equal(one, two)
    expected = reference.crf_decoding(emission, transition, offsets)
    assert_within(
        path_score(emission, transition, offsets, two),
        path_score(emission, transition, offsets, expected),
        2 * path_score_bound(emission, transition, offsets, np.zeros(emission.shape)),
    )


def test_empty_batches_and_float64_input():
    transition = np.zeros((5, 3), np.float32)
    no_words = np.zeros((0, 3), np.float32)
    assert kernels.crf_decoding(no_words, transition, [0]).shape == (0, 1)
    assert kernels.crf_decoding(no_words, transition, [0, 0, 0]).shape == (0, 1)
    rng = np.random.default_rng(2)
    emission = scores(rng, (7, 3), "spread").astype(np.float64)
    offsets = offsets_of([3, 4])
    np.testing.assert_array_equal(
        kernels.crf_decoding(emission, transition.astype(np.float64), offsets),
        reference.crf_decoding(emission, transition, offsets),
    )


def test_errors_name_op_argument_and_expectation():
    emission = np.zeros((5, 3), np.float32)
    transition = np.zeros((5, 3), np.float32)
    offsets = offsets_of([2, 3])
    cases = [
        ({"emission": emission.astype(np.int32)}, ArgumentTypeError, "emission must be float32"),
        ({"emission": emission[0]}, ArgumentError, "emission must be 2-D"),
        ({"emission": emission[:, :0]}, ArgumentError, "emission must have at least one tag"),
        ({"transition": transition[:4]}, ArgumentError, r"transition must have shape \(5, 3\)"),
        ({"transition": transition.astype(np.float16)}, ArgumentTypeError, "transition must"),
        ({"offsets": [0, 2, 4]}, ArgumentError, "offsets must end at the number of rows"),
        ({"offsets": [0.0, 5.0]}, ArgumentTypeError, "offsets must be an integer array"),
        ({"offsets": [0, 3, 2, 5]}, ArgumentError, "offsets must be nondecreasing"),
        ({"label": np.zeros((5,), np.int64)}, ArgumentError, r"label must have shape \(5, 1\)"),
        ({"label": np.zeros((5, 1), np.float32)}, ArgumentTypeError, "label must be an integer"),
    ]
    for change, error, message in cases:
        call = {"emission": emission, "transition": transition, "offsets": offsets, **change}
        with pytest.raises(error, match=f"^crf_decoding: {message}"):
            kernels.crf_decoding(**call)


def test_compiled_core_checks_sizes_itself():
    """The binding passes buffers straight through: the C++ entry refuses inconsistent ones."""
    from fusebridge.kernels import core

    emission = np.zeros((5, 3), np.float32)
    path = np.empty((5, 1), np.int64)
    bad = [
        (emission, np.zeros((4, 3), np.float32), offsets_of([5]), None, path),
        (emission, np.zeros((5, 3), np.float32), np.array([0, 6]), None, path),
        (emission, np.zeros((5, 3), np.float32), np.array([0, 3, 2, 5]), None, path),
        (emission, np.zeros((5, 3), np.float32), offsets_of([5]), np.zeros(4, np.int64), path),
        (emission, np.zeros((5, 3), np.float32), offsets_of([5]), None, path[:4]),
    ]
    for args in bad:
        with pytest.raises(ValueError, match=r"^crf_decoding: "):
            core._C.crf_decoding(*args)


# Paddle's crf_decoding op as the oracle: legacy program, LoD feeds.


@functools.cache
def _paddle_program(tags: int, has_label: bool):
    paddle = paddle_or_skip()
    with legacy_static(paddle):
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            inputs = {
                "Emission": [paddle.static.data("emission", [-1, tags], "float32", lod_level=1)],
                "Transition": [paddle.static.data("transition", [tags + 2, tags], "float32")],
            }
            if has_label:
                inputs["Label"] = [paddle.static.data("label", [-1, 1], "int64", lod_level=1)]
            block = main.global_block()
            path = block.create_var(name="path", dtype="int64", lod_level=1)
            block.append_op(type="crf_decoding", inputs=inputs, outputs={"ViterbiPath": [path]})
        return main, path, paddle.static.Executor(paddle.CPUPlace())


def paddle_crf_decoding(emission, transition, lengths, label=None) -> np.ndarray:
    paddle = paddle_or_skip()
    main, path, exe = _paddle_program(emission.shape[1], label is not None)
    with legacy_static(paddle):

        def lod(a):
            t = paddle.base.core.DenseTensor()
            t.set(a, paddle.CPUPlace())
            t.set_recursive_sequence_lengths([[int(n) for n in lengths]])
            return t

        feed = {"emission": lod(emission), "transition": transition}
        if label is not None:
            feed["label"] = lod(label)
        (out,) = exe.run(main, feed=feed, fetch_list=[path], return_numpy=False)
        return np.array(out)


@pytest.mark.paddle
@pytest.mark.parametrize("tags", [1, 5, 24])
@pytest.mark.parametrize("kind", ["ties", "normal"])
@pytest.mark.parametrize("with_label", [False, True], ids=["path", "label"])
def test_matches_paddle(tags, kind, with_label):
    """Unsorted lengths with empty sentences (Paddle emits no rows for them); the same float32
    arithmetic as Paddle's, so the paths agree exactly even on continuous scores."""
    rng = np.random.default_rng(100 * tags + len(kind) + with_label)
    lengths = [3, 0, 1, 12, 0, 5, 7]
    words = sum(lengths)
    emission = scores(rng, (words, tags), kind)
    transition = scores(rng, (tags + 2, tags), kind)
    label = None
    if with_label:
        label = reference.crf_decoding(emission, transition, offsets_of(lengths))
        flip = rng.random((words, 1)) < 0.4
        label = np.where(flip, rng.integers(0, tags, (words, 1)), label).astype(np.int64)
    expected = paddle_crf_decoding(emission, transition, lengths, label)
    got = kernels.crf_decoding(emission, transition, offsets_of(lengths), label)
    assert expected.shape == got.shape == (words, 1)
    np.testing.assert_array_equal(got, expected)


@pytest.mark.paddle
@pytest.mark.parametrize("case", range(len(tie_cases())))
def test_ties_match_paddle(case):
    emission, transition, lengths, expected = tie_cases()[case]
    np.testing.assert_array_equal(
        paddle_crf_decoding(emission, transition, lengths)[:, 0], expected
    )
