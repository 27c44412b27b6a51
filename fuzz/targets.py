"""What the fuzz cases mutate: the bundled models and the committed fixtures, in every format,
each with the files it is made of and the feeds it runs on, and the one way every case feeds a
model to fusebridge (load, optimize, Session, run, save)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "tests" / "fixtures"


@dataclass(frozen=True)
class Target:
    name: str  # "onnx/torch_gru"
    format: str  # onnx, mxnet, paddle
    files: dict[str, bytes]  # file name -> content, written into the case's folder
    entry: str  # what fusebridge.load is given, relative to the case's folder
    feeds: dict  # what the unmutated model runs on (made here, in the parent, from the fixture)

    def kind(self, file: str) -> str:
        """protobuf, json or binary: what a mutation may assume about a file's bytes."""
        if file.endswith((".onnx", ".pdmodel")):
            return "protobuf"
        return "json" if file.endswith(".json") else "binary"


def _declared_feeds(model_path: Path) -> dict:
    """Feeds for a model from its declared inputs: symbolic dims 3 (integers: zeros, an id and a
    length every model takes)."""
    import fusebridge

    model = fusebridge.load(model_path)
    rng = np.random.default_rng(0)
    feeds = {}
    for v in model.graph.inputs:
        dims = [d if isinstance(d, int) else 3 for d in v.shape]
        dtype = np.dtype(v.dtype.numpy())
        feeds[v.name] = (
            rng.standard_normal(dims).astype(dtype) if dtype.kind == "f" else np.zeros(dims, dtype)
        )
    return feeds


def _onnx(path: Path) -> Target:
    return Target(
        f"onnx/{path.stem}",
        "onnx",
        {"model.onnx": path.read_bytes()},
        "model.onnx",
        _declared_feeds(path),
    )


def _mxnet(prefix: str) -> Target:
    from fusebridge.models.mxnet_models import sample_inputs

    names = ["data"] if prefix != "gru_tagger" else ["data0", "data1"]
    return Target(
        f"mxnet/{prefix}",
        "mxnet",
        {
            "m-symbol.json": (FIXTURES / "mxnet" / f"{prefix}-symbol.json").read_bytes(),
            "m-0000.params": (FIXTURES / "mxnet" / f"{prefix}-0000.params").read_bytes(),
        },
        "m-symbol.json",
        dict(zip(names, sample_inputs(prefix))),
    )


def _paddle(name: str) -> Target:
    import fusebridge
    from fusebridge.models import assets

    folder = assets.path(name)
    words = np.load(folder / "example_words.npy")
    lengths = [int(v) for v in (folder / "example_lengths.txt").read_text().split()]

    return Target(
        f"paddle/{name}",
        "paddle",
        {f: (folder / f).read_bytes() for f in ("inference.pdmodel", "inference.pdiparams")},
        ".",
        {"words": fusebridge.LoDTensor(words, lengths)},
    )


def _folder(name: str, folder: Path) -> Target:
    """A model saved as files in a folder (Paddle 3's model.json or model.pdmodel beside its
    parameters), fed by its declared inputs."""
    files = {f.name: f.read_bytes() for f in sorted(folder.iterdir()) if f.is_file()}
    return Target(name, "paddle", files, ".", _declared_feeds(folder))


def zero_size_targets() -> list[Target]:
    """What the zero-size class feeds empty tensors to: every target, and the fixtures the other
    classes leave out (the look-alikes of shipped ONNX models, Paddle 3's saved models)."""
    shipped = sorted((FIXTURES / "onnx" / "shipped").glob("*.onnx"))
    paddle3 = sorted((FIXTURES / "paddle3").glob("*/jit"))
    return [
        *targets(),
        *(_onnx(p) for p in shipped),
        *(_folder(f"paddle3/{p.parent.name}", p) for p in paddle3),
    ]


def targets() -> list[Target]:
    onnx_files = sorted((FIXTURES / "onnx").glob("*.onnx"))
    return [
        *(_onnx(p) for p in onnx_files),
        *(_mxnet(p) for p in ("gru_tagger", "gru_tagger_fixed", "mlp_dropout", "attention")),
        *(_paddle(n) for n in ("tagger", "sentiment")),
    ]


def run_model(path: Path, feeds: dict) -> None:
    """What a user does with a model: load, optimize, run (with a key where the model draws
    random numbers), save it back (MXNet symbols as MXNet files: ONNX needs input ranks, which
    MXNet symbols do not declare)."""
    import fusebridge
    from fusebridge.fuse_passes import explicit_rng

    model = fusebridge.load(path)
    optimized, _ = fusebridge.optimize(model)
    draws = explicit_rng(optimized).count > 0
    session = fusebridge.Session(optimized)
    session.run(feeds, rng=fusebridge.random.key(0) if draws else None)
    if path.suffix == ".json":
        fusebridge.save_mxnet(optimized, Path.cwd() / "saved")
    else:
        fusebridge.save_onnx(optimized, Path.cwd() / "saved.onnx")
