"""LoDTensor: a batch of sentences as rows of one array plus level-1 offsets, as Paddle holds it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels.sequence_layout import as_offsets


class LoDTensor:
    """data [words, ...] with offsets [N+1] (int64): sentence s is rows offsets[s]:offsets[s+1].

    Give the sentence lengths or the offsets, not both."""

    __slots__ = ("data", "offsets")

    def __init__(
        self,
        data: np.ndarray,
        lengths: Sequence[int] | np.ndarray | None = None,
        *,
        offsets: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        self.data = np.asarray(data)
        if self.data.ndim < 1:
            raise ArgumentError("LoDTensor: data must have at least one dimension (the words)")
        if (lengths is None) == (offsets is None):
            raise ArgumentError("LoDTensor: give lengths or offsets (exactly one of them)")
        if lengths is not None:
            lens = np.asarray(lengths)
            if lens.ndim != 1 or (lens.size and lens.min() < 0):
                raise ArgumentError(
                    f"LoDTensor: lengths must be a vector of non-negative integers, got {lengths}"
                )
            offsets = np.concatenate([[0], np.cumsum(lens, dtype=np.int64)])
        self.offsets = as_offsets(offsets, "LoDTensor", self.data.shape[0])

    @classmethod
    def _checked_already(cls, data: np.ndarray, offsets: np.ndarray) -> LoDTensor:
        """For a Session's outputs: offsets that a feed brought in, checked then, pass again
        without a second check."""
        t = object.__new__(cls)
        t.data, t.offsets = data, offsets
        return t

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __repr__(self) -> str:
        return (
            f"LoDTensor({self.data.dtype}{list(self.data.shape)}, lengths={self.lengths.tolist()})"
        )
