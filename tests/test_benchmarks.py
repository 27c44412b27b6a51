"""The benchmark runner (benchmarks/run.py) and its missing-peer rows, without running a
benchmark: stub sections stand in for the slow ones."""

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import pytest

# Appended, not prepended: the installed fusebridge must stay ahead of the source tree.
sys.path.append(str(Path(__file__).parents[1]))

from benchmarks import (
    common,
    mxnet_families,
    mxnet_models,
    paddle_dygraph,
    paddle_families,
    paddle_models,
    paddle_training,
    run,
)


def stub_section(monkeypatch, name, body):
    module = types.ModuleType(f"stub_{name}")
    module.run = body
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module.__name__


def test_each_section_is_written_when_it_is_done(tmp_path, monkeypatch):
    out = tmp_path / "report.md"
    seen = []

    def second(quick, threads):
        seen.append(out.read_text())  # the first section's table is already in the report
        return "### second"

    def broken(quick, threads):
        raise RuntimeError("this section broke")

    sections = {
        "first": stub_section(monkeypatch, "first", lambda quick, threads: "### first"),
        "second": stub_section(monkeypatch, "second", second),
        "broken": stub_section(monkeypatch, "broken", broken),
        "last": stub_section(monkeypatch, "last", lambda quick, threads: f"### last {threads}"),
    }
    monkeypatch.setattr(run, "SECTIONS", sections)
    assert run.run_sections(list(sections), out, quick=True, threads=3) == ["broken"]
    assert seen[0].endswith("\n### first\n")
    report = out.read_text()
    assert report.startswith("Machine: ") and report.endswith("\n### last 3\n")
    assert "\n### first\n\n### second\n\n### broken: failed\n\n```\nTraceback" in report
    assert "RuntimeError: this section broke\n```\n" in report


def peer_missing(monkeypatch, module):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a)
    )


@pytest.mark.parametrize(
    ("section", "module", "row"),
    [
        (
            mxnet_models,
            "mxnet",
            "| mxnet | not installed: runs in the MXNet venv (pip install '.[mxnet]'; "
            "--only mxnet_models) |",
        ),
        (
            mxnet_families,
            "mxnet",
            "| mxnet | not installed: runs in the MXNet venv (pip install '.[mxnet]'; "
            "--only mxnet_families) |",
        ),
        (paddle_training, "paddle", "| paddle | not installed: pip install -e '.[bench]' |"),
        (paddle_dygraph, "paddle", "| paddle | not installed: pip install -e '.[bench]' |"),
        (paddle_families, "paddle", "| paddle | not installed: pip install -e '.[bench]' |"),
    ],
)
def test_a_missing_peer_is_a_row(monkeypatch, section, module, row):
    peer_missing(monkeypatch, module)
    text = section.run(quick=True, threads=1)
    assert text.startswith("### ") and text.endswith(f"| peer | status |\n|---|---|\n{row}")


@pytest.mark.parametrize(("lengths", "suffix"), [(True, ""), (False, ", no lengths fed")])
def test_the_paddle3_section_without_paddle_is_a_row(monkeypatch, lengths, suffix):
    peer_missing(monkeypatch, "paddle")
    text = paddle_models._paddle3_section(repeat=1, lengths=lengths)
    assert text == (
        f"### {paddle_models.PADDLE3_TITLE}{suffix}\n\n| peer | status |\n|---|---|\n"
        "| paddle | not installed: pip install -e '.[bench]' |"
    )


def test_a_paddle3_model_paddle_cannot_save_is_a_failed_section(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object())
    message = "saving the Paddle 3 tagger failed:\nValueError: no"

    def cannot_save(directory, lengths):
        raise RuntimeError(message)

    monkeypatch.setattr(paddle_models.paddle3_tagger, "save", cannot_save)
    text = paddle_models._paddle3_section(repeat=1, lengths=True)
    assert text == f"### {paddle_models.PADDLE3_TITLE}: failed\n\n```\n{message}\n```"


def test_the_fastest_paddle_peer_that_agreed_is_the_ratio():
    def row(n, runtime, ms, median, same="yes"):
        return {"sentences": n, "runtime": runtime, "ms": ms, "median_ms": median,
                "same_output": same}  # fmt: skip

    rows = [
        row(1, "fusebridge", 2.0, 4.0, same="-"),
        row(1, "paddle_executor", 18.0, 20.0),
        row(1, "paddle_inference", 9.0, 30.0),  # the fastest at best, not at the median
        row(16, "fusebridge", 10.0, 10.0, same="-"),
        row(16, "paddle_inference", 1.0, 1.0, same="no (max error 1)"),  # disagreed: not counted
        row(16, "paddle_inference_onednn", None, None),  # did not run
        row(16, "paddle_executor", 20.0, 25.0),
    ]
    assert paddle_models._fastest_paddle(rows) == (
        "Fastest Paddle configuration / fusebridge, by sentences per batch: "
        "1: 4.50x (median 5.00x), 16: 2.00x (median 2.50x) (target >= 1.5x)."
    )
    rows += [
        row(1, paddle_models.SAVED_BACK, 3.0, 4.0),
        row(16, paddle_models.SAVED_BACK, 5.0, 5.0),
    ]
    assert paddle_models._fastest_paddle(rows).endswith(
        "\n\nFastest Paddle configuration / Paddle Inference with our ops "
        "(paddle_inference_fusebridge_ops): 1: 3.00x (median 5.00x), 16: 4.00x (median 5.00x) "
        "(target >= 1.5x)."
    )


@pytest.mark.paddle
def test_the_paddle3_tagger_is_saved_as_the_benchmark_describes(tmp_path):
    pytest.importorskip("paddle")
    import fusebridge as fb

    tagger = paddle_models.paddle3_tagger
    path = tagger.save(tmp_path)
    assert path == tmp_path / "model.json" and path.with_suffix(".pdiparams").is_file()
    model = fb.load(tmp_path)
    assert [v.name for v in model.graph.inputs] == ["ids", "lens"]
    table = next(n for n in model.graph if n.op_type == "Gather").inputs[0].const_value
    assert table.shape == (tagger.VOCAB, tagger.EMBED)
    optimized, _ = fb.optimize(model)
    assert [n.op_type for n in optimized.graph].count("FusionGRU") == tagger.LAYERS


def test_the_families_chart_draws_a_bar_per_model_and_batch():
    import xml.etree.ElementTree as ET

    results = {"deepspeech (jit)": {1: 2.1, 64: 0.9}, "ernie (jit)": {16: 1.25}}
    root = ET.fromstring(paddle_families.chart(results, "title"))
    ns = "{http://www.w3.org/2000/svg}"
    bars = [r for r in root.iter(f"{ns}rect") if r.get("fill") in ("#4878a8", "#c04040")]
    assert [b.get("fill") for b in bars] == ["#4878a8", "#c04040", "#4878a8"]
    texts = [t.text for t in root.iter(f"{ns}text")]
    assert {"deepspeech (jit), 64", "0.90x", "1.25x", "1.5x"} <= set(texts)


def test_the_mxnet_families_check_allows_float32_rounding_and_ties_only():
    rng = np.random.default_rng(0)
    probs = rng.uniform(0, 1, (5, 2, 29)).astype(np.float32)
    theirs = {"batched": probs}
    assert mxnet_families.check("deepspeech", probs + 5e-5, theirs).startswith("max diff 5")
    with pytest.raises(AssertionError, match=r"max \|difference\| \S+ > 0.0001"):
        mxnet_families.check("deepspeech", probs + 2e-4, theirs)
    with pytest.raises(AssertionError, match="shape"):
        mxnet_families.check("deepspeech", probs[:4], theirs)

    logits = rng.uniform(-1, 1, (4, 2, 29)).astype(np.float32)
    logits[0, 0, :2] = 5.0, 5.0 + 5e-5  # MXNet's top two within 1e-4: a tie
    chars = np.argmax(logits, axis=-1).astype(np.float32)
    theirs = {"batched": chars, "logits": logits}
    assert mxnet_families.check("crnn", chars, theirs) == "0 of 8 differ (1 ties)"
    ours = chars.copy()
    ours[0, 0] = 0  # the other side of the tie
    assert mxnet_families.check("crnn", ours, theirs) == "1 of 8 differ (1 ties)"
    ours[1, 1] = (chars[1, 1] + 1) % 29  # not a tie
    with pytest.raises(AssertionError, match="1 of 8 characters differ"):
        mxnet_families.check("crnn", ours, theirs)


def test_medians_in_blocks_takes_turns_after_a_pause(monkeypatch):
    """Each case's block follows a settle pause, the cases alternate block by block, the
    result is the median of the block medians, and the back-to-back pass alternates calls."""
    clock, calls = [0.0], []
    monkeypatch.setattr(common.time, "perf_counter", lambda: clock[0])
    monkeypatch.setattr(common.time, "sleep", lambda secs: calls.append("pause"))

    def case(name, costs):
        it = iter(costs)

        def fn():
            calls.append(name)
            clock[0] += next(it)

        return fn

    # a: warm-up + 2 timed calls per block, 3 blocks, then 2 back-to-back calls
    a = case("a", [9, 1, 1, 9, 5, 5, 9, 2, 2, 7, 7])
    b = case("b", [9, 3, 3, 9, 3, 3, 9, 3, 3, 4, 4])
    assert common.medians_in_blocks([("a", a), ("b", b)], blocks=3, repeat=2) == [
        ("a", 2.0, 7.0),
        ("b", 3.0, 4.0),
    ]
    block = ["pause", "a", "a", "a", "pause", "b", "b", "b"]
    assert calls == block * 3 + ["a", "b", "a", "b"]
