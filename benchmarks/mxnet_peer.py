"""MXNet's side of the MXNet benchmarks (benchmarks/mxnet_models.py, mxnet_families.py), in a
process of its own: MXNet's OpenMP and our kernels' pool in one process would spin against each
other on 2 cores.

    python -m benchmarks.mxnet_peer PREFIX REPEAT OUT.npz INPUT.npy [INPUT.npy ...] [--alone]

times the exported model PREFIX-symbol.json (a hybridized SymbolBlock with static_alloc; its
inputs `data`, or `data0`, `data1`, ... in the order of the files) on one batch and saves to
OUT.npz its first output (`batched`) and the best and median of REPEAT calls in seconds
(`seconds`, `median`). Where that output is an argmax, also the argmax's input (`logits`,
untimed), which says where two runtimes may rightly disagree. With --alone the last input is the
sentence lengths and `alone` is each sentence run by itself at its own length (right even where
the batch ignores the lengths).

export() and run_peer() are the parent's side: they start the children and import no mxnet."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Sequence

import numpy as np

from benchmarks.common import timings


def input_names(count: int) -> list[str]:
    """The inputs of a block gluon exported: `data`, or `data0`, `data1`, ... for several."""
    return ["data"] if count == 1 else [f"data{i}" for i in range(count)]


def export(prefix: str, builder: str, kwargs: dict, sample_shapes: Sequence[tuple]) -> None:
    """fusebridge.models.mxnet_models.`builder`(**kwargs), hybridized, run once on inputs of
    ones of `sample_shapes` (export needs the traced graph) and exported to PREFIX-symbol.json
    + PREFIX-0000.params, in a child process: mxnet stays out of this one."""
    code = (
        "import sys, mxnet as mx; from fusebridge.models import mxnet_models as m; "
        f"b = m.{builder}(**{kwargs!r}); b.hybridize(); "
        f"b(*[mx.nd.ones(s) for s in {list(sample_shapes)!r}]); "
        f"b.export({prefix!r})"
    )
    _child([sys.executable, "-c", code], dict(os.environ), "exporting the model")


def run_peer(
    prefix: str,
    inputs: Sequence[np.ndarray],
    repeat: int,
    threads: int,
    workdir: str,
    alone: bool = False,
) -> dict[str, np.ndarray]:
    """Runs this module as a child (OMP_NUM_THREADS=threads) on `inputs`; returns what it
    saved (see the module's docstring)."""
    files = []
    for i, value in enumerate(inputs):
        files.append(os.path.join(workdir, f"input{i}.npy"))
        np.save(files[-1], value)
    out = os.path.join(workdir, "mx.npz")
    cmd = [sys.executable, "-m", "benchmarks.mxnet_peer", prefix, str(repeat), out, *files]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    _child(cmd + (["--alone"] if alone else []), env, "the MXNet peer")
    with np.load(out) as saved:
        return dict(saved)


def _child(cmd: list[str], env: dict, what: str) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{what} failed ({done.returncode}):\n{done.stderr[-3000:]}")


def _argmax_input(prefix: str) -> str | None:
    """The name of the internal output an argmax output node reads, None if output 0 is not
    an argmax."""
    with open(f"{prefix}-symbol.json") as f:
        graph = json.load(f)
    nodes = graph["nodes"]
    last = nodes[graph["heads"][0][0]]
    if last["op"] != "argmax":
        return None
    source, index, _ = last["inputs"][0]
    return f"{nodes[source]['name']}_output" + (str(index) if index else "")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("prefix")
    parser.add_argument("repeat", type=int)
    parser.add_argument("out")
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--alone", action="store_true")
    args = parser.parse_args(argv)

    import mxnet as mx

    names = input_names(len(args.inputs))
    params = f"{args.prefix}-0000.params"
    block = mx.gluon.SymbolBlock.imports(f"{args.prefix}-symbol.json", names, params)
    block.hybridize(static_alloc=True)
    arrays = [np.load(path) for path in args.inputs]
    feeds = [mx.nd.array(a) for a in arrays]
    batched = block(*feeds).asnumpy()  # asnumpy waits for the result
    times = timings(lambda: block(*feeds).asnumpy(), args.repeat)
    saved = {"batched": batched, "seconds": min(times), "median": float(np.median(times))}
    logits = _argmax_input(args.prefix)
    if logits is not None:
        symbol = mx.sym.load(f"{args.prefix}-symbol.json").get_internals()[logits]
        inner = mx.gluon.SymbolBlock([symbol], [mx.sym.var(n) for n in names])
        inner.collect_params().load(params, ignore_extra=True)
        saved["logits"] = inner(*feeds).asnumpy()
    if args.alone:
        alone = np.zeros_like(batched)
        for i, k in enumerate(arrays[-1].astype(int)):
            one = [f[i : i + 1, :k] for f in feeds[:-1]] + [mx.nd.array([k])]
            alone[i, :k] = block(*one).asnumpy()[0]
        saved["alone"] = alone
    np.savez(args.out, **saved)


if __name__ == "__main__":
    main()
