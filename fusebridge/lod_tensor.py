"""LoDTensor: a batch of sentences as rows of one array plus level-1 offsets, as Paddle holds it."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from fusebridge.errors import ArgumentError
from fusebridge.kernels.sequence_layout import as_offsets, offsets_from_lengths


def _frozen(offsets: np.ndarray) -> np.ndarray:
    """A read-only copy that no one else holds, so no later write can change it."""
    own = np.array(offsets, copy=True)
    own.setflags(write=False)
    return own


class LoDTensor:
    """data [words, ...] with offsets [N+1] (int64): sentence s is rows offsets[s]:offsets[s+1].

    Give the sentence lengths or the offsets, not both. The checks made here hold for the
    tensor's life: the offsets are the tensor's own read-only copy, and neither attribute can
    be rebound (data's values may change; it is a view of the array given)."""

    __slots__ = ("_data", "_offsets")

    def __init__(
        self,
        data: np.ndarray,
        lengths: Sequence[int] | np.ndarray | None = None,
        *,
        offsets: Sequence[int] | np.ndarray | None = None,
    ) -> None:
        # A view of its own: reshaping the caller's array in place leaves this one as checked.
        data = np.asarray(data).view()
        if data.ndim < 1:
            raise ArgumentError("LoDTensor: data must have at least one dimension (the words)")
        if (lengths is None) == (offsets is None):
            raise ArgumentError("LoDTensor: give lengths or offsets (exactly one of them)")
        rows = data.shape[0]
        if lengths is not None:
            own = offsets_from_lengths(lengths, "LoDTensor", rows)  # a new array
        else:
            # An array is copied before the check, so that what is checked is what is kept and
            # no one else can write to it (a list or tuple becomes a new array anyway).
            if not isinstance(offsets, (list, tuple)):
                offsets = np.array(offsets, copy=True)
            own = as_offsets(offsets, "LoDTensor", rows)
        own.setflags(write=False)
        object.__setattr__(self, "_data", data)
        object.__setattr__(self, "_offsets", own)

    @classmethod
    def _checked_already(cls, data: np.ndarray, offsets: np.ndarray) -> LoDTensor:
        """For a Session's outputs: offsets that a feed brought in, checked then, pass again
        without a second check (made read-only copies when they are not already)."""
        t = object.__new__(cls)
        object.__setattr__(t, "_data", data)
        frozen = offsets if not offsets.flags.writeable else _frozen(offsets)
        object.__setattr__(t, "_offsets", frozen)
        return t

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"LoDTensor is immutable: {name} cannot be set")

    def __reduce__(self) -> tuple:
        # pickle and copy rebuild through the checks (slots cannot be set from outside).
        return _from_offsets, (self._data, self._offsets)

    @property
    def data(self) -> np.ndarray:
        return self._data

    @property
    def offsets(self) -> np.ndarray:
        """int64 [N+1], read-only."""
        return self._offsets

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self._offsets)

    def __repr__(self) -> str:
        return (
            f"LoDTensor({self.data.dtype}{list(self.data.shape)}, lengths={self.lengths.tolist()})"
        )


def _from_offsets(data: np.ndarray, offsets: np.ndarray) -> LoDTensor:
    return LoDTensor(data, offsets=offsets)
