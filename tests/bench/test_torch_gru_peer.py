"""fusebridge.bench.torch_gru_peer: PyTorch's dynamic int8 GRU tagger (the LAC model's sizes)
against torch's own float32 tagger of the same weights, the oracle: the int8 GRUs are really
quantized (torch's dynamic quantized GRU module, scores not bit-equal) and their scores stay
close to float32's. Skipped without torch, but for the missing-dependency error."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from fusebridge.bench import torch_gru_peer
from fusebridge.errors import ArgumentError, MissingDependencyError

LENGTHS = [1, 7, 23, 60, 12]  # unequal, unsorted (pack_padded_sequence's enforce_sorted=False)


def test_without_torch_it_says_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(MissingDependencyError, match=r"PyTorch.*fusebridge\[bench\]"):
        torch_gru_peer.time_torch_tagger([[3]], threads=1, repeat=1)


def test_the_int8_tagger_stays_close_to_torchs_float_tagger():
    torch = pytest.importorskip("torch")
    taggers = torch_gru_peer.torch_taggers(seed=1)
    assert isinstance(taggers["qint8"].gru, torch.ao.nn.quantized.dynamic.GRU)
    assert isinstance(taggers["float32"].gru, torch.nn.GRU)
    ids, lengths = torch_gru_peer.sentence_inputs(LENGTHS, seed=1)
    with torch.inference_mode():
        scores = {p: m(ids, lengths).numpy() for p, m in taggers.items()}
    valid = np.arange(max(LENGTHS))[:, None] < np.asarray(LENGTHS)  # [T, N]
    ref, got = scores["float32"][valid], scores["qint8"][valid]  # [words, TAGS]
    assert ref.shape == (sum(LENGTHS), torch_gru_peer.TAGS)
    assert not np.array_equal(ref, got)  # int8 weights: not float32's arithmetic
    # 8-bit weights and activations: about 2% of the scores' scale here (seeds 0-2).
    assert np.abs(got - ref).max() <= 0.05 * np.abs(ref).max()
    assert (got.argmax(-1) == ref.argmax(-1)).mean() >= 0.9


def test_timing_gives_each_precision_a_time_per_batch():
    pytest.importorskip("torch")
    times = torch_gru_peer.time_torch_tagger([[4, 2], [9]], threads=1, repeat=2)
    assert sorted(times) == ["float32", "qint8"]
    assert all(len(ms) == 2 and min(ms) > 0 for ms in times.values())


def test_bad_arguments_are_refused():
    with pytest.raises(ArgumentError, match="threads and repeat"):
        torch_gru_peer.time_torch_tagger([[3]], threads=0, repeat=1)
    with pytest.raises(ArgumentError, match="at least one batch"):
        torch_gru_peer.time_torch_tagger([], threads=1, repeat=1)
    pytest.importorskip("torch")
    with pytest.raises(ArgumentError, match="at least one word"):
        torch_gru_peer.sentence_inputs([3, 0])
