"""MXNet's side of benchmarks/mxnet_models.py, in a process of its own: MXNet's OpenMP
and our kernels' pool in one process would spin against each other on 2 cores.
`python -m benchmarks.mxnet_peer PREFIX IDS.npy LENGTHS.npy REPEAT OUT.npz` times the exported
tagger (hybridized, static_alloc) on one batch and saves its output and best time."""

from __future__ import annotations

import sys

import numpy as np

from benchmarks.common import best_time


def main(prefix: str, ids_file: str, lengths_file: str, repeat: str, out: str) -> None:
    import mxnet as mx

    block = mx.gluon.SymbolBlock.imports(
        f"{prefix}-symbol.json", ["data0", "data1"], f"{prefix}-0000.params"
    )
    block.hybridize(static_alloc=True)
    ids, lengths = mx.nd.array(np.load(ids_file)), mx.nd.array(np.load(lengths_file))
    batched = block(ids, lengths).asnumpy()  # asnumpy waits for the result
    seconds = best_time(lambda: block(ids, lengths).asnumpy(), int(repeat))
    # Each sentence alone at its own length: right even where the batch ignores the lengths.
    alone = np.zeros_like(batched)
    for i, k in enumerate(np.load(lengths_file).astype(int)):
        alone[i, :k] = block(ids[i : i + 1, :k], mx.nd.array([k])).asnumpy()[0]
    np.savez(out, batched=batched, alone=alone, seconds=seconds)


if __name__ == "__main__":
    main(*sys.argv[1:])
