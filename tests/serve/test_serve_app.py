"""The tagger on Ray Serve over loopback, started and stopped here (a local Ray of 2 CPUs): the
Open Inference Protocol's routes, a bounded load from one async client with every answer
checked against a Session run on that request alone, the 4xx and 503 paths, and a replica
killed mid-load."""

import asyncio
import json
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")
serve = pytest.importorskip("ray.serve")
httpx = pytest.importorskip("httpx")

from helpers.batch_rows import TAGGER, oracle, sentences  # noqa: E402
from helpers.local_ray import free_port, start_local_ray  # noqa: E402

import fusebridge  # noqa: E402
from fusebridge.batch import BatchModel  # noqa: E402
from fusebridge.errors import ArgumentError, ArgumentTypeError  # noqa: E402
from fusebridge.serve import build_app  # noqa: E402

NAME = "tagger"
TAGS = "crf_decoding_0.tmp_0"
INFER = f"/v2/models/{NAME}/infer"
# Serve's proxy answers 408 to a request it waited on this long (fusebridge serve
# --request-timeout-s): once, under a loaded machine, a request sent as its replica was killed
# waited without an answer (Ray 2.60's proxy; the replica's death did not reach it).
TIMEOUT_S = 30


def request_of(rows: list[list[int]]) -> dict:
    flat = [w for r in rows for w in r]
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows], dtype=np.int64)]).tolist()
    return {
        "inputs": [
            {"name": "words", "datatype": "INT64", "shape": [len(flat), 1], "data": flat},
            {
                "name": "words.offsets",
                "datatype": "INT64",
                "shape": [len(offsets)],
                "data": offsets,
            },
        ]
    }


def expected(rows: list[list[int]]) -> tuple[list[int], list[int]]:
    """A Session run on the request's sentences alone: (tags, offsets)."""
    words = np.array([w for r in rows for w in r], np.int64).reshape(-1, 1)
    feed = fusebridge.LoDTensor(words, lengths=[len(r) for r in rows])
    tags = oracle(TAGGER).run({"words": feed})[TAGS]
    return np.asarray(tags.data).reshape(-1).tolist(), np.asarray(tags.offsets).tolist()


def answer(body: dict) -> tuple[list[int], list[int]]:
    out = {t["name"]: t for t in body["outputs"]}
    tags, offsets = out[TAGS], out[TAGS + ".offsets"]
    assert tags["datatype"] == offsets["datatype"] == "INT64"
    assert tags["shape"] == [len(tags["data"]), 1] and offsets["shape"] == [len(offsets["data"])]
    return tags["data"], offsets["data"]


async def post_all(url: str, bodies: list[bytes], clients: int, on_done=None) -> list:
    """Every body POSTed, `clients` at once: (status, JSON) each, in order."""
    gate = asyncio.Semaphore(clients)
    done = 0
    limits = httpx.Limits(max_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def one(body: bytes) -> tuple[int, dict]:
            nonlocal done
            async with gate:
                r = await client.post(url, content=body)
                done += 1
                if on_done is not None:
                    await on_done(done)
                # Serve's own 5xx (a replica died) are plain text
                json_body = r.headers.get("content-type", "").startswith("application/json")
                return r.status_code, r.json() if json_body else {"text": r.text}

        return await asyncio.gather(*(one(b) for b in bodies))


def requests_of(count: int, seed: int, most: int = 3) -> list[list[list[int]]]:
    rng = np.random.default_rng(seed)
    pool = sentences(count * most, seed=seed, longest=30)
    out, at = [], 0
    for n in rng.integers(1, most + 1, count):
        out.append(pool[at : at + n])
        at += n
    return out


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    start_local_ray(tmp_path_factory.mktemp("driver"))
    port = free_port()
    try:
        options = {"host": "127.0.0.1", "port": port, "request_timeout_s": TIMEOUT_S}
        serve.start(http_options=options)
        yield f"http://127.0.0.1:{port}"
    finally:
        serve.shutdown()
        ray.shutdown()


def deploy(**options) -> None:
    serve.run(build_app(BatchModel(TAGGER), NAME, **options), name=NAME, route_prefix="/")


@pytest.fixture(scope="module")
def batching(base):
    deploy(max_batch_size=16, batch_wait_ms=5, replicas=2)
    return base


def test_routes_and_metadata(batching):
    with httpx.Client(base_url=batching, timeout=30) as c:
        assert c.get("/v2/health/ready").status_code == 200
        assert c.get("/v2/health/live").json() == {"live": True}
        assert c.get(f"/v2/models/{NAME}/ready").json() == {"name": NAME, "ready": True}
        meta = c.get(f"/v2/models/{NAME}").json()
        assert meta["name"] == NAME
        assert meta["inputs"] == [
            {"name": "words", "datatype": "INT64", "shape": [-1, 1]},
            {"name": "words.offsets", "datatype": "INT64", "shape": [-1]},
        ]
        assert [(t["name"], t["datatype"], len(t["shape"])) for t in meta["outputs"]] == [
            (TAGS, "INT64", 2),
            (TAGS + ".offsets", "INT64", 1),
        ]
        assert c.get("/v2").json()["name"] == "fusebridge"


def test_a_load_of_2000_requests_each_as_alone(batching):
    requests = requests_of(2000, seed=1)
    bodies = [json.dumps(request_of(r)).encode() for r in requests]
    answers = asyncio.run(post_all(batching + INFER, bodies, clients=16))
    for rows, (status, body) in zip(requests, answers, strict=True):
        assert status == 200, body
        assert answer(body) == expected(rows)
    stats = httpx.get(f"{batching}/v2/models/{NAME}/stats").json()["model_stats"][0]
    assert stats["inference_count"] > stats["execution_count"] > 0  # batches of > 1 formed


def test_an_empty_request_is_answered(batching):
    r = httpx.post(batching + INFER, json=request_of([]), timeout=30)
    assert r.status_code == 200, r.text
    assert answer(r.json()) == ([], [0])


@pytest.mark.parametrize(
    "method, path, body, status, message",
    [
        ("POST", INFER, b"{oops", 400, "not JSON"),
        ("POST", INFER, b'{"inputs": []}', 400, "lacks inputs ['words', 'words.offsets']"),
        ("GET", INFER, None, 405, "answers POST"),
        ("GET", "/v2/models/other", None, 404, "no model at /v2/models/other"),
        ("GET", "/elsewhere", None, 404, "no route /elsewhere"),
    ],
)
def test_malformed_requests_get_a_4xx_naming_the_fault(
    batching, method, path, body, status, message
):
    r = httpx.request(method, batching + path, content=body, timeout=30)
    assert r.status_code == status
    assert message in r.json()["error"]


def test_a_body_past_the_limit_is_refused_unread(monkeypatch):
    from starlette.requests import Request

    from fusebridge.serve import app

    monkeypatch.setattr(app, "MAX_BODY_BYTES", 10)
    read = []

    async def receive() -> dict:
        read.append(1)
        return {"type": "http.request", "body": b"x" * 11, "more_body": False}

    declared = {"type": "http", "method": "POST", "path": INFER}
    scope = {**declared, "headers": [(b"content-length", b"11")]}
    with pytest.raises(app.HTTPError, match="a body of 11 bytes, expected at most 10"):
        asyncio.run(app._body(Request(scope, receive)))
    assert not read  # refused from the header, before a byte is read
    with pytest.raises(app.HTTPError, match="a body past 10 bytes"):  # chunked: no length
        asyncio.run(app._body(Request({**declared, "headers": []}, receive)))


def test_a_bad_value_fails_its_request_alone(batching):
    good = requests_of(15, seed=4)
    bad = [[1, 2, 5000]]  # past the tagger's 1000 words
    bodies = [json.dumps(request_of(r)).encode() for r in [*good[:8], bad, *good[8:]]]
    answers = asyncio.run(post_all(batching + INFER, bodies, clients=16))
    status, body = answers[8]
    assert status == 422 and "every id in 'words' must lie in [0, 1000)" in body["error"]
    for rows, (status, body) in zip(good, answers[:8] + answers[9:], strict=True):
        assert status == 200 and answer(body) == expected(rows)


def replicas() -> set[str]:
    return {
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == "serve" and a["name"].startswith("SERVE_REPLICA::")
    }


def running(count: int) -> bool:
    app = serve.status().applications.get(NAME)
    return app is not None and app.status == "RUNNING" and len(replicas()) == count


def test_a_replica_killed_mid_load(batching):
    before = replicas()
    assert len(before) == 2
    victim = sorted(before)[0]

    async def kill_at(done: int) -> None:
        if done == 150:
            ray.kill(ray.get_actor(victim, namespace="serve"), no_restart=True)

    requests = requests_of(600, seed=7)
    bodies = [json.dumps(request_of(r)).encode() for r in requests]
    answers = asyncio.run(post_all(batching + INFER, bodies, clients=16, on_done=kill_at))
    failed = 0
    for rows, (status, body) in zip(requests, answers, strict=True):
        if status == 200:
            assert answer(body) == expected(rows)  # never a wrong or empty answer
        else:
            assert status >= 500 or status == 408, (status, body)
            failed += 1
    assert failed < len(requests) // 2
    deadline = time.monotonic() + 90
    while not (running(2) and victim not in replicas()):
        assert time.monotonic() < deadline, serve.status()
        time.sleep(0.5)
    after = requests_of(100, seed=8)
    bodies = [json.dumps(request_of(r)).encode() for r in after]
    answers = asyncio.run(post_all(batching + INFER, bodies, clients=16))
    for rows, (status, body) in zip(after, answers, strict=True):
        assert status == 200 and answer(body) == expected(rows)


def test_past_the_queue_limit_a_503(base):
    deploy(max_batch_size=1, replicas=1, max_queued=2)
    requests = requests_of(48, seed=9, most=64)
    bodies = [json.dumps(request_of(r)).encode() for r in requests]
    answers = asyncio.run(post_all(base + INFER, bodies, clients=48))
    statuses = [s for s, _ in answers]
    assert set(statuses) <= {200, 503} and statuses.count(503) > 0 and statuses.count(200) > 0
    for rows, (status, body) in zip(requests, answers, strict=True):
        if status == 200:
            assert answer(body) == expected(rows)


@pytest.mark.parametrize(
    "model, kwargs, error, message",
    [
        ("tagger", {"name": "a b"}, ArgumentError, "expected letters, digits"),
        ("tagger", {"max_batch_size": 0}, ArgumentError, "max_batch_size must be an int >= 1"),
        ("tagger", {"replicas": True}, ArgumentError, "replicas must be an int >= 1"),
        ("tagger", {"batch_wait_ms": -1}, ArgumentError, "batch_wait_ms must be within"),
        ("path", {}, ArgumentTypeError, "expected a BatchModel, got PosixPath"),
    ],
)
def test_bad_arguments(model, kwargs, error, message):
    handle = BatchModel(TAGGER) if model == "tagger" else TAGGER
    kwargs = {"name": NAME, **kwargs}
    with pytest.raises(error, match=message):
        build_app(handle, kwargs.pop("name"), **kwargs)
