"""fusebridge vs Paddle's own runtimes on one Paddle model, side by side (`fusebridge bench`).

fusebridge runs in this process; each Paddle peer (the Executor on the unfused program, Paddle
Inference with its IR passes, and with oneDNN) runs in its own subprocess
(`python -m fusebridge.bench.paddle_peer`), so that a Paddle crash is a row of
the table and not the end of the benchmark. Every peer's outputs are checked against ours."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx_ir as ir

import fusebridge as fb
from fusebridge import kernels
from fusebridge.bench.paddle_runtime import Feeds
from fusebridge.bench.progress import Progress
from fusebridge.errors import UnsupportedOpError

PEERS = ("paddle_executor", "paddle_inference", "paddle_inference_onednn")
# Paddle Inference on the model fb.save_paddle writes back (our GRU as a Paddle custom op):
# a peer of Paddle 3 (padded) models only.
SAVED_BACK = "paddle_inference_fusebridge_ops"
# Paddle Inference with oneDNN int8 GRUs, on Paddle's post-training quantized copy of the model
# (paddle_runtime.post_training_int8), made beforehand in the folder INT8_CACHE_ENV names
# (fusebridge.bench.lac.paddle_int8_model for the LAC tagger). Its outputs are int8's: they
# differ from fusebridge float32's, so its rows say "no" under same output.
ONEDNN_INT8 = "paddle_inference_onednn_int8"
INT8_CACHE_ENV = "FUSEBRIDGE_PADDLE_INT8_CACHE"
PEER_MODULE = "fusebridge.bench.paddle_peer"


MAX_WORDS = 60  # the longest random sentence


def _batch(vocab: int, n: int, seed: int) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed + n)
    lengths = rng.integers(5, MAX_WORDS + 1, n).tolist()  # unequal sentences, 5..60 words
    ids = rng.integers(1, vocab, (sum(lengths), 1)).astype(np.int64)
    return ids, lengths


def _word_inputs(model, session: fb.Session, model_dir: Path) -> tuple[str, str | None, int, bool]:
    """(the word-id input, the sentence-length input or None, the vocabulary size, whether the
    words are padded) of a model that looks its words up in an embedding table: the kind of
    model the benchmark makes random sentences for. The words are one LoD input (no length
    input), or ids [N, T] padded, with a lengths input [N] or without one (a Paddle 3 model)."""
    gather = next((n for n in model.graph if n.op_type == "Gather"), None)
    inputs = {v.name: v for v in model.graph.inputs}
    names = session.input_names
    lod = [n for n in names if f"{n}.offsets" in inputs]
    ranks = {len(inputs[n].shape or ()): n for n in names if inputs[n].dtype == ir.DataType.INT64}
    if len(names) == 1 and lod and gather is not None:
        words, lens, padded = lod[0], None, False
    elif len(names) == 1 and list(ranks) == [2] and gather is not None:
        words, lens, padded = ranks[2], None, True
    elif len(names) == 2 and sorted(ranks) == [1, 2] and gather is not None:
        words, lens, padded = ranks[2], ranks[1], True
    else:
        raise UnsupportedOpError(
            f"bench {model_dir}: the benchmark feeds random sentences of word ids, so it takes a "
            "model with one LoD input, or int64 ids [N, T] (and lengths [N]), looked up in an "
            f"embedding table (lookup_table, embedding); this one has inputs {names}"
            + ("" if gather is not None else " and no embedding lookup")
        )
    table = gather.inputs[0].const_value
    if table is None:
        raise UnsupportedOpError(f"bench {model_dir}: the embedding table is computed in the graph")
    return words, lens, int(table.shape[0]), padded


def _feeds(
    words: str, lens: str | None, ids: np.ndarray, lengths: list[int], steps: int | None
) -> Feeds:
    """The sentences as a LoD input (steps None), or right-padded with zeros to [N, steps] and,
    when the model takes them, their lengths."""
    if steps is None:
        return {words: (ids, lengths)}
    padded = np.zeros((len(lengths), steps), np.int64)
    padded[np.arange(steps) < np.asarray(lengths)[:, None]] = ids[:, 0]
    feeds = {words: (padded, None)}
    if lens is not None:
        feeds[lens] = (np.asarray(lengths, np.int64), None)
    return feeds


def save_feeds(path: Path, feeds: Feeds) -> None:
    """feeds into an .npz for a peer: each input's array, and NAME.lengths for a LoD input."""
    arrays = {name: array for name, (array, _) in feeds.items()}
    lod = {f"{name}.lengths": np.asarray(n) for name, (_, n) in feeds.items() if n is not None}
    np.savez(path, **arrays, **lod)


def load_feeds(path: str | os.PathLike) -> Feeds:
    """save_feeds' feeds back."""
    with np.load(path, allow_pickle=False) as f:
        arrays = {name: f[name] for name in f.files}
    return {
        name: (array, arrays[f"{name}.lengths"].tolist() if f"{name}.lengths" in arrays else None)
        for name, array in arrays.items()
        if not name.endswith(".lengths")
    }


def best_and_median_ms(fn, repeat: int) -> tuple[float, float]:
    """The best and the median of `repeat` timed calls after a warm one. The best is what the
    table compares: on a shared VM the host can slow a run many times over for seconds
    (docs/performance.md, "Noisy host")."""
    fn()  # warm: primitives built, caches filled
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * min(times), 1e3 * float(np.median(times))


def _same(ours: dict, theirs: dict) -> str:
    for name, value in ours.items():
        mine = value.data if isinstance(value, fb.LoDTensor) else value
        other = theirs.get(name)
        if other is None or other.shape != mine.shape:
            return f"no ({name}: shape {None if other is None else other.shape})"
        if mine.dtype.kind in "iu":
            if not np.array_equal(mine, other):
                return f"no ({name}: {int((mine != other).sum())} values differ)"
        elif not np.allclose(mine, other, rtol=1e-4, atol=1e-5):
            return f"no ({name}: max diff {np.abs(mine - other).max():.2e})"
    return "yes"


def compare_with_paddle(
    model_dir: str | os.PathLike,
    sentences: Sequence[int] = (1, 16, 64),
    *,
    repeat: int = 20,
    peers: Sequence[str] = PEERS,
    seed: int = 0,
) -> list[dict[str, object]]:
    """compare_batches on random sentences of 5..60 words, `sentences` per batch, for a model
    that looks words up in an embedding table (_word_inputs). Padded words are padded to the
    batch's longest sentence, or to all MAX_WORDS steps for a model fed no lengths."""
    model_dir = Path(model_dir).resolve()
    model = fb.load(model_dir)
    session = fb.Session(fb.optimize(model)[0])
    word_input, length_input, vocab, padded = _word_inputs(model, session, model_dir)
    batches = []
    for n in sentences:
        ids, lengths = _batch(vocab, n, seed)
        steps = None if not padded else max(lengths) if length_input else MAX_WORDS
        batches.append((n, sum(lengths), _feeds(word_input, length_input, ids, lengths, steps)))
    return compare_batches(model_dir, batches, repeat=repeat, peers=peers, session=session)


def compare_batches(
    model_dir: str | os.PathLike,
    batches: Sequence[tuple[int, int, Feeds]],
    *,
    repeat: int = 20,
    peers: Sequence[str] = PEERS,
    session: fb.Session | None = None,
) -> list[dict[str, object]]:
    """One row per (batch, runtime): best and median ms per batch, ratio to fusebridge, and
    whether the outputs equal fusebridge's. A batch is (sentences, words, feeds: input name ->
    (array, LoD lengths or None)). fusebridge's row also gives its Session overhead (time
    outside kernels and ONNX Runtime calls) in ms. A peer that could not run has ms None and
    its whole error in "error" (`failed` tells such rows). `session`: fusebridge's, on the
    optimized model (made here when None)."""
    model_dir = Path(model_dir).resolve()  # the peers run in another folder
    session = session or fb.Session(fb.optimize(fb.load(model_dir))[0])
    threads = kernels.get_num_threads()
    rows = []
    with (
        tempfile.TemporaryDirectory() as tmp,
        Progress(len(batches) * (1 + len(peers)), "bench") as progress,
    ):
        for n, words, peer_feeds in batches:
            progress.step(f"{n} sentences: fusebridge")
            feeds = {
                name: array if lod is None else fb.LoDTensor(array, lengths=lod)
                for name, (array, lod) in peer_feeds.items()
            }
            ours = session.run(feeds)
            ms, median = best_and_median_ms(lambda: session.run(feeds), repeat)  # noqa: B023
            profile: dict[str, float] = {}
            start = time.perf_counter()
            for _ in range(repeat):
                session.run(feeds, profile=profile)
            overhead = (time.perf_counter() - start - sum(profile.values())) / repeat
            rows.append(
                {
                    "sentences": n,
                    "words": words,
                    "runtime": "fusebridge",
                    "ms": ms,
                    "median_ms": median,
                    "vs_fusebridge": 1.0,
                    "same_output": "-",
                    "note": f"session overhead {1e3 * overhead:.3f} ms",
                }
            )
            save_feeds(Path(tmp) / "feed.npz", peer_feeds)
            for peer in peers:
                progress.step(f"{n} sentences: {peer}")
                row = {"sentences": n, "words": words, "runtime": peer}
                args = [model_dir, peer, Path(tmp) / "feed.npz", Path(tmp) / f"{peer}.npz"]
                rows.append(row | _peer_result(args, repeat, threads, Path(tmp), ms, ours))
    return rows


def peer_process(
    args: Sequence[object], workdir: Path, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess:
    """`python -m PEER_MODULE ARGS` started in `workdir`, a folder of temporary files: `-m` puts
    the working directory first on sys.path, and a repository root there (`fusebridge bench`
    run from a checkout after `pip install .`) would shadow the installed fusebridge with a
    source tree that has no compiled core."""
    cmd = [sys.executable, "-m", PEER_MODULE, *map(str, args)]
    return subprocess.run(
        cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=env
    )


def _error_text(stderr: str) -> str:
    """The error a failed child reports: its last traceback's exception (all its lines), or
    everything it printed when it printed no traceback."""
    lines = stderr.strip().splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("Traceback ")]
    if not starts:
        return "\n".join(lines) or "no output"
    tail = lines[starts[-1] + 1 :]
    frames = [i for i, line in enumerate(tail) if line.startswith(" ")]
    return "\n".join(tail[frames[-1] + 1 :] if frames else tail)


def _peer_result(args, repeat, threads, workdir, our_ms, ours) -> dict[str, object]:
    no_run = {"ms": None, "median_ms": None, "vs_fusebridge": None, "same_output": "-"}
    if importlib.util.find_spec("paddle") is None:
        why = "paddlepaddle is not installed (pip install 'fusebridge[paddle]')"
        return no_run | {"note": "not installed", "error": why}
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "GLOG_minloglevel": "3"}
    try:
        done = peer_process([*args, repeat, threads], workdir, env)
    except subprocess.TimeoutExpired as exc:
        return no_run | {"note": "timed out", "error": f"no answer in {exc.timeout:g} s"}
    if done.returncode != 0:
        rc = done.returncode
        note = f"crashed (signal {-rc})" if rc < 0 else f"failed (exit status {rc})"
        return no_run | {"note": note, "error": _error_text(done.stderr)}
    timing = json.loads(done.stdout.strip().splitlines()[-1])
    with np.load(args[-1], allow_pickle=False) as theirs:
        same = _same(ours, dict(theirs))
    return {
        "ms": timing["ms"],
        "median_ms": timing["median_ms"],
        "vs_fusebridge": timing["ms"] / our_ms,
        "same_output": same,
        "note": "",
    }


def failed(row: dict[str, object]) -> bool:
    """A peer that did not run, or whose outputs differ from fusebridge's."""
    return row["ms"] is None or str(row["same_output"]).startswith("no")


def table(rows: Sequence[dict[str, object]]) -> str:
    """Markdown table of compare_with_paddle's rows; each failure's whole error is numbered
    below it (a table cell would cut it or break on its line breaks)."""
    lines = [
        "| sentences | words | runtime | best ms | median ms | x fusebridge (best) | same output "
        "| note |",
        "|---:|---:|---|---:|---:|---:|---|---|",
    ]
    errors: list[str] = []
    for r in rows:
        ms = "-" if r["ms"] is None else f"{r['ms']:.2f}"
        median = "-" if r["median_ms"] is None else f"{r['median_ms']:.2f}"
        ratio = "-" if r["vs_fusebridge"] is None else f"{r['vs_fusebridge']:.2f}"
        note = r["note"]
        if "error" in r:
            if r["error"] not in errors:
                errors.append(r["error"])
            note = f"{note} [{errors.index(r['error']) + 1}]"
        lines.append(
            f"| {r['sentences']} | {r['words']} | {r['runtime']} | {ms} | {median} | {ratio} | "
            f"{r['same_output']} | {note} |"
        )
    lines += ["", *(f"[{i}] {error}" for i, error in enumerate(errors, 1))] if errors else []
    return "\n".join(lines)
