"""PyTorch's dynamic int8 GRU as a peer of the quantized LAC tagger: a tagger of the LAC model's
sizes (embedding 58224 x 128, two bidirectional GRU layers of hidden 128, the second taking 256,
a linear layer to the 49 tags; no CRF), random weights, in eval mode, timed in float32 and after
`torch.ao.quantization.quantize_dynamic(model, {torch.nn.GRU}, dtype=torch.qint8)` (int8 GRU
weights, activations quantized per call; the embedding and linear layer stay float32).

torch 2.13 still runs quantize_dynamic on a GRU, with warnings: a DeprecationWarning
("torch.ao.quantization is deprecated and will be removed in 2.10", pointing to torchao's
quantize_) and a UserWarning that the quantized tensor creation functions (quint8, qint8,
qint32 dtypes) will be removed. They are silenced here; the numbers are what 2.13 gives.

torch is imported only inside the functions (MissingDependencyError when it is absent)."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np

from fusebridge.errors import ArgumentError, MissingDependencyError

# The LAC model's sizes (LAC/lac_model/model: word_emb, gru_0..3, fc_4).
VOCAB = 58224
EMBED = 128
HIDDEN = 128
TAGS = 49
PRECISIONS = ("float32", "qint8")


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise MissingDependencyError(
            "fusebridge.bench.torch_gru_peer needs PyTorch: pip install 'fusebridge[bench]'"
        ) from exc
    return torch


def torch_taggers(seed: int = 0) -> dict[str, Any]:
    """{"float32": the tagger, "qint8": quantize_dynamic's copy with int8 GRUs}, both in eval
    mode, weights from torch's default initialization under torch.manual_seed(seed) (the
    global generator is left as it was). Each is called as model(ids, lengths): ids [T, N]
    int64 padded, lengths [N] int64 -> scores [T, N, TAGS] (past a sentence's end: the linear
    layer's bias)."""
    torch = _torch()
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    class Tagger(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embedding = torch.nn.Embedding(VOCAB, EMBED)
            self.gru = torch.nn.GRU(EMBED, HIDDEN, num_layers=2, bidirectional=True)
            self.fc = torch.nn.Linear(2 * HIDDEN, TAGS)

        def forward(self, ids, lengths):
            packed = pack_padded_sequence(self.embedding(ids), lengths, enforce_sorted=False)
            hidden, _ = pad_packed_sequence(self.gru(packed)[0], total_length=ids.shape[0])
            return self.fc(hidden)

    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = Tagger().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", UserWarning)
        quantized = torch.ao.quantization.quantize_dynamic(
            model, {torch.nn.GRU}, dtype=torch.qint8, inplace=False
        )
    return {"float32": model, "qint8": quantized.eval()}


def sentence_inputs(lengths: Sequence[int], seed: int = 0) -> tuple[Any, Any]:
    """(ids [T, N] int64, lengths [N] int64) as torch tensors: random word ids (1..VOCAB-1)
    for sentences of the given lengths, zero-padded to the longest."""
    torch = _torch()
    lengths = [int(n) for n in lengths]
    if not lengths or min(lengths) < 1:
        raise ArgumentError(f"torch tagger: sentences of at least one word, got {lengths}")
    rng = np.random.default_rng([seed, len(lengths)])
    ids = np.zeros((max(lengths), len(lengths)), np.int64)
    for k, n in enumerate(lengths):
        ids[:n, k] = rng.integers(1, VOCAB, n)
    return torch.from_numpy(ids), torch.tensor(lengths, dtype=torch.int64)


def time_torch_tagger(
    lengths_per_batch: list[list[int]], threads: int, repeat: int
) -> dict[str, list[float]]:
    """Best ms per call of each precision ("float32", "qint8": dynamic int8 GRUs) on each
    batch (one list of sentence lengths per batch; the ms in the same order), `repeat` timed
    calls after a warm one (paddle_comparison.best_and_median_ms), under torch.inference_mode
    with torch.set_num_threads(threads) (restored after)."""
    from fusebridge.bench.paddle_comparison import best_and_median_ms

    if threads < 1 or repeat < 1:
        raise ArgumentError(f"torch tagger: threads and repeat >= 1, got {threads}, {repeat}")
    if not lengths_per_batch:
        raise ArgumentError("torch tagger: give at least one batch of sentence lengths")
    torch = _torch()
    inputs = [sentence_inputs(lengths) for lengths in lengths_per_batch]
    taggers = torch_taggers()
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        times: dict[str, list[float]] = {p: [] for p in PRECISIONS}
        with torch.inference_mode():
            for ids, lengths in inputs:
                for precision, model in taggers.items():
                    call = lambda m=model, x=ids, n=lengths: m(x, n)  # noqa: E731
                    best, _ = best_and_median_ms(call, repeat)
                    times[precision].append(best)
    finally:
        torch.set_num_threads(before)
    return times


__all__ = ["PRECISIONS", "TAGS", "sentence_inputs", "time_torch_tagger", "torch_taggers"]
