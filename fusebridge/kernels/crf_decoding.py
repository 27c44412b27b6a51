"""Viterbi decoding of a linear-chain CRF on the compiled core: Paddle's `crf_decoding` op over
LoD input, with its float32 arithmetic and tie-breaking (the first best tag wins).

No primitive or cache here: nothing is worth planning ahead of a call, and keying on the
sentence lengths would only fill the cache."""

from __future__ import annotations

import numpy as np

from fusebridge.errors import ArgumentError, ArgumentTypeError
from fusebridge.kernels import core
from fusebridge.kernels.arguments import contiguous, new_array
from fusebridge.kernels.sequence_layout import as_offsets

OP = "crf_decoding"


def _matrix(a: object, name: str) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype not in (np.float32, np.float64):
        raise ArgumentTypeError(f"{OP}: {name} must be float32 (or float64), got {arr.dtype}")
    if arr.ndim != 2:
        raise ArgumentError(f"{OP}: {name} must be 2-D, got shape {arr.shape}")
    # float64 is rounded: the decoding compares in float32, as Paddle's does.
    return contiguous(arr, OP, name, np.float32)


def crf_decoding(
    emission: np.ndarray,
    transition: np.ndarray,
    offsets: np.ndarray,
    label: np.ndarray | None = None,
) -> np.ndarray:
    """The best tag sequence of every sentence, int64 [words, 1].

    emission [words, tags] holds the unary scores of the sentences stacked in LoD order (split
    by offsets [N+1]); transition [tags+2, tags] holds the start scores (row 0), the end scores
    (row 1) and w[i, j], the score of tag i followed by tag j (rows 2..). With label [words, 1]
    the result is 1 where the decoded tag equals the label and 0 elsewhere.
    """
    emission = _matrix(emission, "emission")
    transition = _matrix(transition, "transition")
    words, tags = emission.shape
    if tags < 1:
        raise ArgumentError(f"{OP}: emission must have at least one tag (column), got 0")
    if transition.shape != (tags + 2, tags):
        raise ArgumentError(
            f"{OP}: transition must have shape {(tags + 2, tags)} (start row, end row, then "
            f"[tags, tags]) for the emission's {tags} tags, got {transition.shape}"
        )
    offsets = as_offsets(offsets, OP, words)
    if label is not None:
        label = np.asarray(label)
        if label.dtype.kind not in "iu":
            raise ArgumentTypeError(f"{OP}: label must be an integer array, got {label.dtype}")
        if label.shape != (words, 1):
            raise ArgumentError(f"{OP}: label must have shape {(words, 1)}, got {label.shape}")
        # Out-of-range uint64 values wrap negative: they match no tag either way.
        label = contiguous(label, OP, "label", np.int64)
    path = new_array((words, 1), np.int64, OP, "path")
    core._C.crf_decoding(emission, transition, offsets, label, path)
    return path
