"""Open Inference Protocol requests to rows and back, without a server: requests spelled as the
model's own inputs, batched as one block, give each request what a Session run on that request
alone gives (same values, shapes and dtypes); every malformed request is a ProtocolError that
names what was wrong."""

import json
import re

import numpy as np
import pytest

pytest.importorskip("ray.serve")
pa = pytest.importorskip("pyarrow")

from helpers.batch_rows import BIGRU, SENTIMENT, SPEECH, TAGGER, oracle, sentences  # noqa: E402

import fusebridge  # noqa: E402
from fusebridge.batch import BatchModel  # noqa: E402
from fusebridge.serve import protocol  # noqa: E402
from fusebridge.serve.protocol import ProtocolError  # noqa: E402
from fusebridge.serve.tensors import input_dtypes, to_rows, to_tensors  # noqa: E402


def lod_request(rows: list[list[int]]) -> dict[str, np.ndarray]:
    words = np.array([w for r in rows for w in r], np.int64).reshape(-1, 1)
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    return {"words": words, "words.offsets": offsets}


def padded_request(rng, rows: int, steps: int, width: int, lengths: bool) -> dict:
    x = rng.standard_normal((rows, steps, width)).astype(np.float32)
    if not lengths:
        return {"x": x}
    n = rng.integers(1, steps + 1, rows)
    n[0] = steps
    x[np.arange(steps) >= n[:, None]] = 0  # a Session run reads the padding; zeros as ours
    return {"x": x, "lengths": n.astype(np.int64)}


def body(tensors: dict[str, np.ndarray], **extra) -> bytes:
    return json.dumps(
        {"inputs": [protocol.tensor(n, v) for n, v in tensors.items()], **extra}
    ).encode()


def alone(path, tensors: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The oracle: a Session run on the request's own feeds, outputs spelled as tensors."""
    feeds = dict(tensors)
    if "words" in feeds:
        lengths = np.diff(feeds.pop("words.offsets"))
        feeds["words"] = fusebridge.LoDTensor(feeds["words"], lengths=lengths)
    out = {}
    for name, value in oracle(path).run(feeds).items():
        if isinstance(value, fusebridge.LoDTensor):
            out[name], out[name + ".offsets"] = np.asarray(value.data), np.asarray(value.offsets)
        else:
            out[name] = np.asarray(value)
    return out


def batched(path, requests: list[dict]) -> list[dict[str, np.ndarray]]:
    """The server's path: each body read, all rows run as one block, cut back per request."""
    model = BatchModel(path)
    dtypes = input_dtypes(model.columns)
    rows = [
        to_rows(protocol.read_tensors(protocol.parse_json(body(r)), dtypes), model.columns)
        for r in requests
    ]
    columns = model.outputs(pa.concat_tables([r.table for r in rows]))
    out, start = [], 0
    for r in rows:
        n = r.table.num_rows
        mine = {name: c.slice(start, n) for name, c in columns.items()}
        out.append(to_tensors(mine, model.columns, model.output_ranks(), r.steps))
        start += n
    return out


def requests_for(path, rng) -> list[dict]:
    if path in (TAGGER, SENTIMENT):
        return [lod_request(sentences(k, seed=k)) for k in (1, 3, 2, 5)]
    if path == SPEECH:
        return [padded_request(rng, n, t, 16, True) for n, t in ((2, 5), (3, 3), (1, 7), (2, 2))]
    return [padded_request(rng, n, t, 12, False) for n, t in ((2, 4), (1, 6), (3, 4))]


@pytest.mark.parametrize("path", [TAGGER, SENTIMENT, SPEECH, BIGRU], ids=lambda p: p.stem)
def test_a_batch_of_requests_answers_each_as_alone(path):
    rng = np.random.default_rng(3)
    requests = requests_for(path, rng)
    for request, got in zip(requests, batched(path, requests), strict=True):
        want = alone(path, request)
        assert sorted(got) == sorted(want)
        for name in want:
            assert got[name].dtype == want[name].dtype, name
            assert got[name].shape == want[name].shape, name
            np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def test_an_empty_request_is_answered_with_empty_outputs():
    empty = {"words": np.zeros((0, 1), np.int64), "words.offsets": np.zeros(1, np.int64)}
    (got,) = batched(TAGGER, [empty])
    tags = "crf_decoding_0.tmp_0"
    assert got[tags].shape == (0, 1) and got[tags].dtype == np.int64
    np.testing.assert_array_equal(got[tags + ".offsets"], [0])
    one = lod_request(sentences(1, seed=9))
    _, got = batched(TAGGER, [empty, one])
    np.testing.assert_array_equal(got[tags], alone(TAGGER, one)[tags])


def test_values_past_a_rows_length_are_not_read():
    rng = np.random.default_rng(5)
    request = padded_request(rng, 3, 6, 16, True)
    noisy = dict(request, x=request["x"].copy())
    past = np.arange(6) >= request["lengths"][:, None]
    noisy["x"][past] = rng.standard_normal((int(past.sum()), 16))
    clean, dirty = batched(SPEECH, [request, noisy])
    np.testing.assert_array_equal(clean["mask"], dirty["mask"])


WORDS = {"name": "words", "datatype": "INT64", "shape": [3, 1], "data": [1, 2, 3]}
OFFSETS = {"name": "words.offsets", "datatype": "INT64", "shape": [3], "data": [0, 1, 3]}


def words(**change) -> dict:
    return {**WORDS, **change}


def offsets(**change) -> dict:
    return {**OFFSETS, **change}


BAD = [
    (b"{not json", "not JSON"),
    (b"[1, 2]", "a JSON list, expected an object"),
    ({}, 'no "inputs"'),
    ({"inputs": [WORDS]}, "lacks inputs ['words.offsets']"),
    ({"inputs": [WORDS, OFFSETS, {"name": "x"}]}, "input 'x': not an input of the model"),
    ({"inputs": [WORDS, WORDS, OFFSETS]}, "input 'words': given twice"),
    ({"inputs": [words(datatype="FP32"), OFFSETS]}, "datatype 'FP32', expected INT64"),
    ({"inputs": [words(shape=[3, -1]), OFFSETS]}, "expected a list of sizes >= 0"),
    ({"inputs": [words(shape=[4, 1]), OFFSETS]}, "3 values for its shape, expected 4"),
    ({"inputs": [words(data=[1, 2.5, 3]), OFFSETS]}, "expected integers"),
    ({"inputs": [words(data=[1, 2, "3"]), OFFSETS]}, "expected integers"),
    ({"inputs": [words(data=[1, 2, 2**70]), OFFSETS]}, "expected integers"),
    ({"inputs": [words(data=[[1], [2, 3], [4]]), OFFSETS]}, "nested unevenly"),
    ({"inputs": [words(data=7), OFFSETS]}, "data is int, expected a list"),
    ({"inputs": [words(shape=[3]), OFFSETS]}, "shape [3], expected 2 dims with [1]"),
    ({"inputs": [WORDS, offsets(data=[1, 2, 3])]}, "expected [rows + 1] from 0 to the 3"),
    ({"inputs": [WORDS, offsets(data=[0, 1, 2])]}, "expected [rows + 1] from 0 to the 3"),
    ({"inputs": [WORDS, offsets(data=[0, 2, 1, 3], shape=[4])]}, "offsets decrease"),
    ({"inputs": [WORDS, OFFSETS], "outputs": [{"name": "y"}]}, "outputs ['y'] are not outputs"),
    ({"inputs": [WORDS, OFFSETS], "outputs": "y"}, '"outputs" must be a list'),
]


@pytest.mark.parametrize("request_body, message", BAD, ids=[m for _, m in BAD])
def test_malformed_requests_name_what_was_wrong(request_body, message):
    model = BatchModel(TAGGER)
    raw = request_body if isinstance(request_body, bytes) else json.dumps(request_body).encode()
    with pytest.raises(ProtocolError, match=re.escape(message)):
        request = protocol.parse_json(raw)
        to_rows(protocol.read_tensors(request, input_dtypes(model.columns)), model.columns)
        protocol.requested_outputs(request, ["crf_decoding_0.tmp_0"])


def test_padded_requests_checked_against_their_lengths():
    model = BatchModel(SPEECH)
    x = np.zeros((2, 4, 16), np.float32)
    for lengths, message in (([1, 5], "within its 4 steps"), ([1, 2, 3], "expected 2 of them")):
        tensors = {"x": x, "lengths": np.array(lengths, np.int64)}
        with pytest.raises(ProtocolError, match=message):
            to_rows(tensors, model.columns)
    with pytest.raises(ProtocolError, match=r"shape \[2, 4, 8\], expected 3 dims with \[16\]"):
        to_rows(
            {"x": np.zeros((2, 4, 8), np.float32), "lengths": np.ones(2, np.int64)}, model.columns
        )
