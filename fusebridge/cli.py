"""The `fusebridge` command."""

from __future__ import annotations

import argparse
import json
import sys
from importlib.resources import files

import numpy as np

import fusebridge
from fusebridge import kernels
from fusebridge.errors import Error


def info() -> dict[str, object]:
    return {
        "version": fusebridge.__version__,
        "engines": {"cpu": "available", "cuda": "not built in this version"},
        "isa": {"selected": kernels.isa(), "available": list(kernels.available_isas())},
        "blas": kernels.blas_info(),
        "openmp_threads": kernels.get_num_threads(),
        "primitive_cache": kernels.cache_stats(),
    }


def demo(seed: int, p: float) -> int:
    path = files("fusebridge") / "data" / "demo_tensor.npy"
    with path.open("rb") as f:
        x = np.load(f, allow_pickle=False)
    print(f"input: bundled tensor {x.shape} {x.dtype} ({path.name})")
    print(f"dropout p={p} seed={seed} offset=0 mode=upscale_in_train on {kernels.isa()}")
    y, mask = kernels.dropout(x, p, seed=seed, return_mask=True)
    keep = np.unpackbits(mask, bitorder="little", count=x.size).reshape(x.shape).astype(bool)
    with np.printoptions(precision=3, suppress=True, linewidth=120):
        print("y =\n", y)
    print(f"kept {keep.sum()} of {x.size} ({keep.mean():.1%}), scale 1/(1-p) = {1 / (1 - p):.4f}")
    print(f"packed mask: {mask.size} bytes: {mask.tobytes().hex()}")
    shared = kernels.dropout(x, p, seed=seed, axes=(0,))
    print(
        f"axes=(0,): mask shared down each column: {int((shared != 0).any(0).sum())} of "
        f"{x.shape[1]} columns kept"
    )
    dy = np.ones_like(x)
    from_mask = kernels.dropout_backward(dy, p, mask=mask)
    recomputed = kernels.dropout_backward(dy, p, seed=seed)
    same = np.array_equal(from_mask, recomputed)
    print(f"backward from the mask == backward recomputed from the seed: {same}")
    halves = [
        kernels.dropout(x[:, :6], p, seed=seed, shard=(x.shape, (0, 0))),
        kernels.dropout(x[:, 6:], p, seed=seed, shard=(x.shape, (0, 6))),
    ]
    split_same = np.array_equal(np.concatenate(halves, axis=1), y)
    print(f"the tensor run as two shards == the whole: {split_same}")
    return 0 if same and split_same else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="fusebridge", description=fusebridge.__doc__)
    parser.add_argument("--version", action="version", version=fusebridge.__version__)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("info", help="version, engines, ISA, BLAS, threads, primitive cache")
    d = sub.add_parser("demo", help="run the bundled example")
    d.add_argument("--seed", type=int, default=2024)
    d.add_argument("--p", type=float, default=0.3)
    args = parser.parse_args(argv)
    try:
        if args.command == "info":
            print(json.dumps(info(), indent=2))
            return 0
        return demo(args.seed, args.p)
    except Error as exc:
        print(f"fusebridge: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
