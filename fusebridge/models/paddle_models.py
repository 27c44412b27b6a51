"""Example Paddle models of the kind fusebridge fuses: classic Paddle 1.x-style static LEGACY
programs (ProgramDesc, not PIR) with the unfused `gru` op, built op by op so that the saved
program holds exactly the ops old Paddle emitted (docs/gru.md, "Paddle's gru and fusion_gru").

- build_tagger: the lexical-analysis (LAC) tagger: lookup_table -> bidirectional GRU layers
  (mul + elementwise_add + gru per direction, concat) -> mul + elementwise_add -> crf_decoding
  (or softmax).
- build_sentiment: lookup_table_v2 -> fc -> gru -> sequence_pool -> dropout -> fc -> softmax.

Weights are random but deterministic (NumPy, seeded). Paddle is imported lazily: fusebridge
itself does not need it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fusebridge.integrations.paddle.legacy import import_paddle, legacy_static

POOL_TYPES = ("sum", "average", "sqrt", "max", "last", "first")
TAGGER_HEADS = ("crf", "softmax", "features")

# The names save_model writes; the runtimes look for them.
COMBINED_MODEL = "inference.pdmodel"
COMBINED_PARAMS = "inference.pdiparams"
SEPARATE_MODEL = "__model__"


@dataclass
class PaddleModel:
    """A built legacy program with its weights (in its own scope) and feed/fetch names."""

    name: str
    program: Any  # paddle.static.Program (legacy)
    scope: Any  # paddle.static.Scope holding the weights
    feed_names: list[str]
    fetch_names: list[str]
    config: dict[str, Any] = field(default_factory=dict)
    # Parameter name -> value set into the scope.
    weights: dict[str, np.ndarray] = field(default_factory=dict)


class _Builder:
    """Appends ops to a legacy block with Paddle 1.x's naming (fc_0.w_0, fc_0.tmp_0, ...), so
    that the saved model reads like one from the old layers API."""

    def __init__(self, paddle: Any, main: Any, rng: np.random.Generator, scale: float):
        self.paddle = paddle
        self.block = main.global_block()
        self.rng = rng
        self.scale = scale
        self.weights: dict[str, np.ndarray] = {}
        self.counters: dict[str, int] = {}

    def prefix(self, kind: str) -> str:
        n = self.counters.get(kind, 0)
        self.counters[kind] = n + 1
        return f"{kind}_{n}"

    def param(self, name: str, shape: list[int], scale: float | None = None) -> Any:
        s = self.scale if scale is None else scale
        # Uniform in [-s, s]: with s ~ 0.1..0.5 the gates stay off saturation.
        self.weights[name] = self.rng.uniform(-s, s, size=shape).astype(np.float32)
        return self.paddle.static.create_parameter(
            shape=shape,
            dtype="float32",
            name=name,
            default_initializer=self.paddle.nn.initializer.Constant(0.0),
        )

    def var(self, name: str, dtype: str = "float32", lod_level: int = 0) -> Any:
        return self.block.create_var(name=name, dtype=dtype, lod_level=lod_level)

    def op(self, type: str, inputs: dict, outputs: dict, attrs: dict) -> None:
        self.block.append_op(type=type, inputs=inputs, outputs=outputs, attrs=attrs)

    def fc(
        self,
        x: Any,
        in_size: int,
        size: int,
        lod_level: int,
        num_flatten_dims: int = 1,
        bias: bool = True,
    ) -> Any:
        """What fluid.layers.fc / Paddle 3.3.1's legacy static fc emit: mul, then
        elementwise_add with axis = num_flatten_dims (without bias, the mul alone)."""
        p = self.prefix("fc")
        w = self.param(f"{p}.w_0", [in_size, size])
        prod = self.var(f"{p}.tmp_0", lod_level=lod_level)
        self.op(
            "mul",
            {"X": [x], "Y": [w]},
            {"Out": [prod]},
            {"x_num_col_dims": num_flatten_dims, "y_num_col_dims": 1},
        )
        if not bias:
            return prod
        b = self.param(f"{p}.b_0", [size])
        out = self.var(f"{p}.tmp_1", lod_level=lod_level)
        self.op(
            "elementwise_add", {"X": [prod], "Y": [b]}, {"Out": [out]}, {"axis": num_flatten_dims}
        )
        return out

    def gru(self, x: Any, hidden: int, *, is_reverse: bool) -> Any:
        """fluid.layers.dynamic_gru: gru op with Weight [OC, 3*OC] and Bias [1, 3*OC]."""
        p = self.prefix("gru")
        w = self.param(f"{p}.w_0", [hidden, 3 * hidden])
        b = self.param(f"{p}.b_0", [1, 3 * hidden], scale=0.5)
        # The work buffers must exist as variables (the op and Paddle's fuse passes need them).
        outs = {
            slot: [self.var(f"{p}.tmp_{i}", lod_level=1 if slot == "Hidden" else 0)]
            for i, slot in enumerate(("Hidden", "BatchGate", "BatchResetHiddenPrev", "BatchHidden"))
        }
        self.op(
            "gru",
            {"Input": [x], "Weight": [w], "Bias": [b]},
            outs,
            {
                "activation": "tanh",
                "gate_activation": "sigmoid",
                "is_reverse": is_reverse,
                "origin_mode": False,
            },
        )
        return outs["Hidden"][0]

    def softmax(self, x: Any, lod_level: int) -> Any:
        out = self.var(f"{self.prefix('softmax')}.tmp_0", lod_level=lod_level)
        self.op("softmax", {"X": [x]}, {"Out": [out]}, {"axis": -1})
        return out


def scope_with_weights(paddle: Any, startup: Any, weights: dict[str, np.ndarray]) -> Any:
    """A private scope after the startup program, each parameter overwritten with its value."""
    scope = paddle.static.Scope()
    place = paddle.CPUPlace()
    with paddle.static.scope_guard(scope):
        paddle.static.Executor(place).run(startup)
    for name, value in weights.items():
        scope.find_var(name).get_tensor().set(value, place)
    return scope


def _build(name: str, seed: int, scale: float, config: dict[str, Any], body: Any) -> PaddleModel:
    """Runs body(builder, words) -> fetch var in a fresh legacy program, runs the startup
    program in a private scope, then overwrites every parameter with the NumPy values."""
    paddle = import_paddle()
    with legacy_static(paddle), paddle.utils.unique_name.guard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        builder = _Builder(paddle, main, np.random.default_rng(seed), scale)
        with paddle.static.program_guard(main, startup):
            words = paddle.static.data("words", [-1, 1], "int64", lod_level=1)
            out = body(builder, words)
        scope = scope_with_weights(paddle, startup, builder.weights)
    return PaddleModel(name, main, scope, ["words"], [out.name], config, builder.weights)


def build_tagger(
    *,
    vocab_size: int = 1000,
    emb_size: int = 128,
    hidden: int = 128,
    num_layers: int = 2,
    num_tags: int = 24,
    head: str = "crf",
    seed: int = 0,
) -> PaddleModel:
    """Paddle's LAC tagger. Feed `words` int64 [words, 1] LoD; fetch the decoded tags int64
    [words, 1] (head "crf"), the tag probabilities float32 [words, num_tags] ("softmax"), or
    the last BiGRU layer's output [words, 2*hidden] through scale(1.0) ("features": how a
    tagger that hands its features on fetches them)."""
    if head not in TAGGER_HEADS:
        raise ValueError(f"head must be one of {TAGGER_HEADS}, got {head!r}")

    def body(b: _Builder, words: Any) -> Any:
        emb = b.param("word_emb", [vocab_size, emb_size], scale=0.5)
        x = b.var("embedding_0.tmp_0", lod_level=1)
        # fluid.embedding of Paddle 1.x: lookup_table (v1) on ids [words, 1] -> [words, emb].
        b.op(
            "lookup_table",
            {"W": [emb], "Ids": [words]},
            {"Out": [x]},
            {"is_sparse": False, "is_distributed": False, "padding_idx": -1},
        )
        width = emb_size
        for _ in range(num_layers):
            fwd = b.gru(b.fc(x, width, 3 * hidden, 1), hidden, is_reverse=False)
            bwd = b.gru(b.fc(x, width, 3 * hidden, 1), hidden, is_reverse=True)
            x = b.var(f"{b.prefix('concat')}.tmp_0", lod_level=1)
            b.op("concat", {"X": [fwd, bwd]}, {"Out": [x]}, {"axis": 1})
            width = 2 * hidden
        if head == "features":
            features = b.var(f"{b.prefix('scale')}.tmp_0", lod_level=1)
            b.op("scale", {"X": [x]}, {"Out": [features]}, {"scale": 1.0, "bias": 0.0})
            return features
        emission = b.fc(x, width, num_tags, 1)
        if head == "softmax":
            return b.softmax(emission, 1)
        transition = b.param("crfw", [num_tags + 2, num_tags], scale=0.5)
        path = b.var(f"{b.prefix('crf_decoding')}.tmp_0", dtype="int64", lod_level=1)
        b.op(
            "crf_decoding",
            {"Emission": [emission], "Transition": [transition]},
            {"ViterbiPath": [path]},
            {},
        )
        return path

    config = dict(
        vocab_size=vocab_size,
        emb_size=emb_size,
        hidden=hidden,
        num_layers=num_layers,
        num_tags=num_tags,
        head=head,
        seed=seed,
    )
    return _build("tagger", seed, 0.2, config, body)


def build_sentiment(
    *,
    vocab_size: int = 1000,
    emb_size: int = 128,
    hidden: int = 128,
    num_classes: int = 2,
    pool_type: str = "sum",
    dropout_prob: float = 0.3,
    seed: int = 0,
) -> PaddleModel:
    """GRU sentiment classifier. Feed `words` int64 [words, 1] LoD (id 0 = padding); fetch the
    class probabilities float32 [sentences, num_classes]."""
    if pool_type not in POOL_TYPES:
        raise ValueError(f"pool_type must be one of {POOL_TYPES}, got {pool_type!r}")

    def body(b: _Builder, words: Any) -> Any:
        emb = b.param("word_emb", [vocab_size, emb_size], scale=0.5)
        # lookup_table_v2 keeps the ids' shape: [words, 1] -> [words, 1, emb]; the fc's mul
        # (x_num_col_dims=1) flattens it back to [words, emb], as in Paddle 2.x models.
        x = b.var("embedding_0.tmp_0", lod_level=1)
        b.op("lookup_table_v2", {"W": [emb], "Ids": [words]}, {"Out": [x]}, {"padding_idx": 0})
        h = b.gru(b.fc(x, emb_size, 3 * hidden, 1), hidden, is_reverse=False)
        p = b.prefix("sequence_pool")
        pooled = b.var(f"{p}.tmp_0")
        b.op(
            "sequence_pool",
            {"X": [h]},
            {"Out": [pooled], "MaxIndex": [b.var(f"{p}.tmp_1", dtype="int32")]},
            {"pooltype": pool_type.upper(), "is_test": True, "pad_value": 0.0},
        )
        p = b.prefix("dropout")
        dropped = b.var(f"{p}.tmp_0")
        # downgrade_in_infer: at inference the op scales by (1 - p), so it changes the numbers
        # and a converter must keep (or fold) it.
        b.op(
            "dropout",
            {"X": [pooled]},
            {"Out": [dropped], "Mask": [b.var(f"{p}.tmp_1", dtype="uint8")]},
            {
                "dropout_prob": dropout_prob,
                "is_test": True,
                "dropout_implementation": "downgrade_in_infer",
            },
        )
        return b.softmax(b.fc(dropped, hidden, num_classes, 0), 0)

    config = dict(
        vocab_size=vocab_size,
        emb_size=emb_size,
        hidden=hidden,
        num_classes=num_classes,
        pool_type=pool_type,
        dropout_prob=dropout_prob,
        seed=seed,
    )
    return _build("sentiment", seed, 0.2, config, body)


def save_model(
    model: PaddleModel,
    dirname: str | os.PathLike,
    *,
    combined: bool = True,
    clip_extra: bool = False,
) -> None:
    """Saves as a legacy inference model: combined -> dirname/inference.pdmodel +
    dirname/inference.pdiparams; otherwise dirname/__model__ + one file per parameter, named
    after it. clip_extra=True strips the gru work outputs: Paddle's Executor and Inference then
    segfault in GruInferMeta (fusebridge must read such models all the same)."""
    paddle = import_paddle()
    dirname = os.fspath(dirname)
    os.makedirs(dirname, exist_ok=True)
    with legacy_static(paddle), paddle.static.scope_guard(model.scope):
        block = model.program.global_block()
        paddle.static.save_inference_model(
            os.path.join(dirname, COMBINED_MODEL.removesuffix(".pdmodel")),
            [block.var(n) for n in model.feed_names],
            [block.var(n) for n in model.fetch_names],
            paddle.static.Executor(paddle.CPUPlace()),
            program=model.program,
            clip_extra=clip_extra,
            # Undocumented in 3.3.1: writes __model__ and calls save_vars(filename=None), the
            # Paddle 1.x one-file-per-variable layout.
            separate_parameters=not combined,
        )
    model_path = os.path.join(dirname, COMBINED_MODEL if combined else SEPARATE_MODEL)
    with open(model_path, "rb") as f:
        desc = paddle.base.core.ProgramDesc(f.read())
    write_without_call_stacks(desc, model_path)


def write_without_call_stacks(desc: Any, path: str | os.PathLike) -> None:
    """Writes a ProgramDesc without the Python call stack each op keeps (absolute paths of this
    checkout and of site-packages): the bytes then depend only on the model."""
    for i in range(desc.num_blocks()):
        block_desc = desc.block(i)
        for j in range(block_desc.op_size()):
            op = block_desc.op(j)
            if op.has_attr("op_callstack"):
                op.remove_attr("op_callstack")
    with open(path, "wb") as f:
        f.write(desc.serialize_to_string())


def example_feed(
    vocab_size: int, lengths: list[int], seed: int = 0
) -> tuple[np.ndarray, list[int]]:
    """Uniform word ids in [0, vocab_size), int64 [sum(lengths), 1], and the sentence lengths:
    the `words` LoD feed of both models (id 0 is the sentiment model's padding id)."""
    lengths = [int(n) for n in lengths]
    ids = np.random.default_rng(seed).integers(0, vocab_size, size=(sum(lengths), 1))
    return ids.astype(np.int64), lengths
