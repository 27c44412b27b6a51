"""Runs an exported MXNet model (prefix-symbol.json + prefix-0000.params) on MXNet itself, the
oracle the MXNet tests compare fusebridge against. Needs mxnet 1.9.1 (numpy < 1.24): imported
only inside the functions.

MXNet's CPU GRU (oneDNN) silently ignores use_sequence_length: a short sentence in a padded
batch gets the padded steps computed and its reverse direction starts at the last padded step.
run_mxnet_per_sentence gives the right answer by running each sentence alone at its length.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from fusebridge.errors import ArgumentError


def _files(prefix: str | os.PathLike) -> tuple[str, str]:
    return f"{prefix}-symbol.json", f"{prefix}-0000.params"


def input_names(prefix: str | os.PathLike) -> list[str]:
    """The model's data inputs in graph order (gluon exports them as data, or data0, data1, ...):
    the symbol's inputs that the params file does not hold."""
    import mxnet as mx

    symbol_file, params_file = _files(prefix)
    stored = {name.split(":", 1)[1] for name in mx.nd.load(params_file)}
    return [name for name in mx.sym.load(symbol_file).list_inputs() if name not in stored]


def _load(prefix: str | os.PathLike, inputs: dict[str, np.dtype]) -> Any:
    import mxnet as mx

    # SymbolBlock.imports, but with the inputs' dtypes declared: without them MXNet warns that
    # it cannot decide their type (and assumes float32).
    symbol_file, params_file = _files(prefix)
    data = [mx.sym.var(name, dtype=dtype) for name, dtype in inputs.items()]
    block = mx.gluon.SymbolBlock(mx.sym.load(symbol_file), data)
    block.collect_params().load(params_file, ctx=mx.cpu())
    return block


def _run(block: Any, names: list[str], feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    import mxnet as mx

    # Outside autograd.record() the block runs in inference mode: Dropout(mode='training'),
    # gluon's default, is the identity.
    args = [mx.nd.array(feeds[name], dtype=np.asarray(feeds[name]).dtype) for name in names]
    out = block(*args)
    return [o.asnumpy() for o in (out if isinstance(out, list | tuple) else [out])]


def run_mxnet(prefix: str | os.PathLike, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Runs the model once in inference mode; feeds maps each input name (input_names) to an
    array (float32 as gluon traced them; integer ids and lengths work too). Returns the
    outputs as NumPy arrays."""
    names = input_names(prefix)
    missing = set(names) - set(feeds)
    if missing:
        raise KeyError(f"{prefix}: no feed for {sorted(missing)} (inputs: {names})")
    block = _load(prefix, {name: np.asarray(feeds[name]).dtype for name in names})
    return _run(block, names, feeds)


def run_mxnet_per_sentence(
    prefix: str | os.PathLike, ids: np.ndarray, lengths: np.ndarray
) -> list[np.ndarray]:
    """Runs each sentence of a padded batch alone at its own length: ids [N, T], lengths [N].
    The model's first input takes ids [1, L]; a second input, if any, takes the lengths [L].
    Returns, per sentence, the first output of that sentence ([L, ...] for a tagger)."""
    ids, lengths = np.asarray(ids), np.asarray(lengths)
    if ids.ndim != 2 or lengths.shape != ids.shape[:1]:
        raise ArgumentError(
            f"run_mxnet_per_sentence: ids [N, T] and lengths [N], got shapes {ids.shape} and "
            f"{lengths.shape}"
        )
    for i, length in enumerate(lengths.tolist()):
        # int() would turn 2.5 into 2, and a negative length into a slice from the end.
        if not (1 <= length <= ids.shape[1] and float(length).is_integer()):
            raise ArgumentError(
                f"run_mxnet_per_sentence: lengths[{i}] = {length}, expected a whole number in "
                f"[1, {ids.shape[1]}] (the ids' T)"
            )
    names = input_names(prefix)
    block = _load(prefix, dict.fromkeys(names, np.dtype(np.float32)))
    outputs = []
    for row, length in zip(ids, lengths):
        n = int(length)
        feeds = {names[0]: row[None, :n].astype(np.float32)}
        if len(names) > 1:
            feeds[names[1]] = np.array([n], np.float32)
        outputs.append(_run(block, names, feeds)[0][0])
    return outputs


# -- symbols made with mx.sym, run by MXNet's executor ---------------------------------------


def symbol_values(
    sym: Any, feeds: dict[str, np.ndarray], rng: np.random.Generator, scale: float = 0.5
) -> dict[str, np.ndarray]:
    """Values for every argument and auxiliary state of sym that feeds does not give, in the
    shapes and dtypes MXNet infers from the feeds: uniform in [-scale, scale], the auxiliary
    states (BatchNorm's moving mean and variance) in [0.5, 1.5] so that a variance is one."""
    shapes = {k: np.shape(v) for k, v in feeds.items()}
    arg_shapes, _, aux_shapes = sym.infer_shape(**shapes)
    arg_types, _, aux_types = sym.infer_type(**{k: np.asarray(v).dtype for k, v in feeds.items()})
    values = {}
    for names, all_shapes, types, low, high in (
        (sym.list_arguments(), arg_shapes, arg_types, -scale, scale),
        (sym.list_auxiliary_states(), aux_shapes, aux_types, 0.5, 1.5),
    ):
        for name, shape, dtype in zip(names, all_shapes, types):
            if name not in feeds:
                values[name] = rng.uniform(low, high, shape).astype(dtype)
    return values


def run_symbol(sym: Any, values: dict[str, np.ndarray]) -> list[np.ndarray]:
    """sym run once by MXNet's executor in inference mode (is_train=False); values: every
    argument and auxiliary state by name. Returns the outputs as NumPy arrays."""
    import mxnet as mx

    def arrays(names: list[str]) -> dict[str, Any]:
        return {n: mx.nd.array(values[n], dtype=np.asarray(values[n]).dtype) for n in names}

    args, aux = arrays(sym.list_arguments()), arrays(sym.list_auxiliary_states())
    exe = sym.bind(mx.cpu(), args, aux_states=aux, grad_req="null")
    return [o.asnumpy() for o in exe.forward(is_train=False)]


def save_symbol(sym: Any, params: dict[str, np.ndarray], prefix: str | os.PathLike) -> str:
    """Writes prefix-symbol.json and prefix-0000.params as MXNet saves a checkpoint (names
    prefixed arg: or aux:); returns the symbol file's path."""
    import mxnet as mx

    symbol_file, params_file = _files(prefix)
    aux = set(sym.list_auxiliary_states())
    sym.save(symbol_file)
    mx.nd.save(
        params_file,
        {
            f"{'aux' if k in aux else 'arg'}:{k}": mx.nd.array(v, dtype=np.asarray(v).dtype)
            for k, v in params.items()
        },
    )
    return symbol_file
