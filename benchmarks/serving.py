"""Online serving: the bundled tagger on Ray Serve (fusebridge.serve), requests of one sentence
from one async client process at 1, 4 and 16 concurrent clients, dynamic batching
(--max-batch-size 16, 5 ms wait) against --max-batch-size 1; the target is >= 1.8x throughput
at 16 clients with identical outputs. Also: the mean batch the batcher formed, and Serve's own
cost per request measured with an empty deployment (a replica that answers {} at once).

    python -m benchmarks.serving [--quick] [--rounds R] [--requests N]

writes benchmarks/results/serving/serving.{md,json,svg} (--quick: serving-quick.*) and prints
the Markdown.

Setup: a local Ray of 2 CPUs in this process, Serve's proxy on a loopback port, three apps at
once, each one replica of one kernel thread: `dynamic` (route /dynamic), `single` (/single)
and `empty` (/empty). The client is this process (httpx.AsyncClient, one connection a client)
and shares the machine's cores with the proxy and the replica, as the issue asks. Requests:
sentences of 1..32 word ids (fixed seed), one a request. Peers take turns in blocks (order
rotating each round), each block after SETTLE seconds of idle and a short warm-up; throughput
is requests / the block's wall time, latency each request's round trip; a ratio is taken
within a round (dynamic / single, same clients), then median and min-max over rounds. Every
answer of every block is checked against the same sentence run alone in this process (a
Session of the same optimized model); a difference fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks.common import machine, markdown_table

OUT = Path(__file__).parent / "results" / "serving"
SEED = 17
SETTLE = 2.0
CLIENTS = (1, 4, 16)
PEERS = ("dynamic", "single")
TAGS = "crf_decoding_0.tmp_0"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def corpus(n: int) -> list[list[int]]:
    rng = np.random.default_rng(SEED)
    return [rng.integers(0, 100, k).tolist() for k in rng.integers(1, 33, n)]


def body(words: list[int]) -> bytes:
    return json.dumps(
        {
            "inputs": [
                {"name": "words", "datatype": "INT64", "shape": [len(words), 1], "data": words},
                {
                    "name": "words.offsets",
                    "datatype": "INT64",
                    "shape": [2],
                    "data": [0, len(words)],
                },
            ]
        }
    ).encode()


def empty_app() -> object:
    from ray import serve
    from starlette.responses import JSONResponse

    @serve.deployment(name="empty", max_ongoing_requests=32, ray_actor_options={"num_cpus": 0})
    class Empty:
        async def __call__(self, request: object) -> JSONResponse:
            await request.body()
            return JSONResponse({})

    return Empty.bind()


async def load(url: str, bodies: list[bytes], clients: int) -> tuple[float, list[float], list]:
    """(wall seconds, latencies, JSON answers) of every body POSTed, `clients` at once."""
    import httpx

    queue = list(enumerate(bodies))
    latencies = [0.0] * len(bodies)
    answers: list = [None] * len(bodies)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(timeout=120, limits=limits) as client:

        async def worker() -> None:
            while queue:
                i, b = queue.pop()
                t = time.perf_counter()
                r = await client.post(url, content=b)
                latencies[i] = time.perf_counter() - t
                if r.status_code != 200:
                    raise RuntimeError(f"{url}: HTTP {r.status_code}: {r.text[:500]}")
                answers[i] = r.json()

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        return time.perf_counter() - start, latencies, answers


def tags_of(answer: dict) -> list[int]:
    return next(t["data"] for t in answer["outputs"] if t["name"] == TAGS)


def stats(base: str, prefix: str) -> tuple[int, int]:
    import httpx

    s = httpx.get(f"{base}/{prefix}/v2/models/tagger/stats").json()["model_stats"][0]
    return s["inference_count"], s["execution_count"]


def measure(quick: bool, rounds: int | None, n: int | None) -> dict:
    import ray
    from ray import serve

    import fusebridge
    from fusebridge.batch import BatchModel
    from fusebridge.models import assets
    from fusebridge.serve import build_app

    rounds = rounds or (2 if quick else 5)
    n = n or (200 if quick else 1000)
    sentences = corpus(n)
    bodies = [body(s) for s in sentences]
    model = BatchModel(assets.path("tagger"), threads=1)
    optimized, _ = fusebridge.optimize(fusebridge.load(assets.path("tagger")))
    alone = fusebridge.Session(optimized, placement="kernels")
    want = []
    for s in sentences:
        feed = fusebridge.LoDTensor(np.array(s, np.int64).reshape(-1, 1), lengths=[len(s)])
        want.append(np.asarray(alone.run({"words": feed})[TAGS].data).reshape(-1).tolist())
    # One sentence alone in this process: the engine's share of a request.
    feed = fusebridge.LoDTensor(
        np.array(sentences[0], np.int64).reshape(-1, 1), [len(sentences[0])]
    )
    times = []
    for _ in range(200):
        t = time.perf_counter()
        alone.run({"words": feed})
        times.append(time.perf_counter() - t)
    engine_ms = 1e3 * min(times)

    from fusebridge.cli.serve_command import PROXY_READY

    os.environ.setdefault(*PROXY_READY)
    here = os.getcwd()
    os.chdir(tempfile.gettempdir())  # Ray puts the driver's folder on its workers' sys.path
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    finally:
        os.chdir(here)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    runs: list[dict] = []
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        apps = {"dynamic": 16, "single": 1}
        for prefix, size in apps.items():
            app = build_app(model, "tagger", max_batch_size=size, batch_wait_ms=5.0, threads=1)
            serve.run(app, name=prefix, route_prefix=f"/{prefix}")
        serve.run(empty_app(), name="empty", route_prefix="/empty")
        for r in range(rounds):
            for clients in CLIENTS:
                order = PEERS if (r + clients) % 2 == 0 else PEERS[::-1]
                for peer in [*order, "empty"]:
                    url = f"{base}/{peer}" + ("" if peer == "empty" else "/v2/models/tagger/infer")
                    time.sleep(SETTLE)
                    asyncio.run(load(url, bodies[: 4 * clients], clients))  # warm-up
                    before = stats(base, peer) if peer != "empty" else (0, 0)
                    wall, lat, answers = asyncio.run(load(url, bodies, clients))
                    after = stats(base, peer) if peer != "empty" else (0, 0)
                    if peer != "empty":
                        for i, a in enumerate(answers):
                            if tags_of(a) != want[i]:
                                raise SystemExit(f"{peer}, {clients} clients: request {i} differs")
                    batches = after[1] - before[1]
                    runs.append(
                        {
                            "round": r,
                            "peer": peer,
                            "clients": clients,
                            "requests_s": n / wall,
                            "p50_ms": 1e3 * float(np.percentile(lat, 50)),
                            "p99_ms": 1e3 * float(np.percentile(lat, 99)),
                            "mean_batch": (after[0] - before[0]) / batches if batches else None,
                        }
                    )
                    print(json.dumps(runs[-1]), flush=True)
    finally:
        serve.shutdown()
        ray.shutdown()
    return {"runs": runs, "requests": n, "rounds": rounds, "engine_ms": engine_ms}


def spread(values: list[float], fmt: str) -> str:
    return f"{statistics.median(values):{fmt}} ({min(values):{fmt}}-{max(values):{fmt}})"


def summarize(data: dict) -> list[dict]:
    rows = []
    for clients in CLIENTS:
        for peer in (*PEERS, "empty"):
            mine = [r for r in data["runs"] if r["peer"] == peer and r["clients"] == clients]
            row = {"peer": peer, "clients": clients}
            for key in ("requests_s", "p50_ms", "p99_ms"):
                row[key] = [r[key] for r in mine]
            row["mean_batch"] = [r["mean_batch"] for r in mine if r["mean_batch"] is not None]
            if peer == "dynamic":
                single = {
                    r["round"]: r["requests_s"]
                    for r in data["runs"]
                    if r["peer"] == "single" and r["clients"] == clients
                }
                row["ratio"] = [r["requests_s"] / single[r["round"]] for r in mine]
            rows.append(row)
    return rows


def chart(summary: list[dict], title: str) -> str:
    """Grouped bars: requests/s per client count, dynamic vs single (median, min-max)."""
    width, height, left, top, bottom = 640, 320, 60, 50, 40
    colors = {"dynamic": "#d08030", "single": "#4878a8"}
    bars = [r for r in summary if r["peer"] in PEERS]
    most = max(max(r["requests_s"]) for r in bars) * 1.1
    y = lambda v: top + (height - top - bottom) * (1 - v / most)  # noqa: E731
    group = (width - left - 20) / len(CLIENTS)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="10" y="20" font-size="14" font-weight="bold">{title}</text>',
    ]
    for i, peer in enumerate(PEERS):
        label = "dynamic batching (16, 5 ms)" if peer == "dynamic" else "--max-batch-size 1"
        parts.append(
            f'<rect x="{left + 220 * i}" y="28" width="10" height="10" fill="{colors[peer]}"/>'
            f'<text x="{left + 220 * i + 14}" y="37">{label}</text>'
        )
    for g, clients in enumerate(CLIENTS):
        x0 = left + g * group + group * 0.15
        for i, peer in enumerate(PEERS):
            r = next(r for r in bars if r["peer"] == peer and r["clients"] == clients)
            med, lo, hi = (f(r["requests_s"]) for f in (statistics.median, min, max))
            x = x0 + i * group * 0.35
            w = group * 0.32
            parts += [
                f'<rect x="{x:.1f}" y="{y(med):.1f}" width="{w:.1f}" '
                f'height="{y(0) - y(med):.1f}" fill="{colors[peer]}"/>',
                f'<line x1="{x + w / 2:.1f}" x2="{x + w / 2:.1f}" y1="{y(lo):.1f}" '
                f'y2="{y(hi):.1f}" stroke="black"/>',
                f'<text x="{x + w / 2:.1f}" y="{y(hi) - 4:.1f}" text-anchor="middle">'
                f"{med:.0f}</text>",
            ]
        parts.append(
            f'<text x="{x0 + group * 0.33:.1f}" y="{height - bottom + 16}" '
            f'text-anchor="middle">{clients} client{"s" if clients > 1 else ""}</text>'
        )
    parts.append(
        f'<line x1="{left}" x2="{width - 10}" y1="{y(0):.1f}" y2="{y(0):.1f}" stroke="#888"/>'
        f'<text x="{left - 6}" y="{top + 4}" text-anchor="end">{most:.0f}</text>'
        f'<text x="10" y="{height - 6}" fill="#555">requests per second (median of rounds, '
        "min-max whiskers); one sentence a request</text></svg>"
    )
    return "\n".join(parts) + "\n"


def report(data: dict, summary: list[dict]) -> str:
    rows = []
    for r in summary:
        ratio = spread(r["ratio"], ".2f") + "x" if "ratio" in r else ""
        batch = spread(r["mean_batch"], ".1f") if r["mean_batch"] else ""
        rows.append(
            [
                str(r["clients"]),
                r["peer"],
                spread(r["requests_s"], ".0f"),
                ratio,
                spread(r["p50_ms"], ".2f"),
                spread(r["p99_ms"], ".2f"),
                batch,
            ]
        )
    header = ["clients", "deployment", "requests/s", "dynamic / single", "p50 ms", "p99 ms"]
    empty1 = next(r for r in summary if r["peer"] == "empty" and r["clients"] == 1)
    return "\n".join(
        [
            "## Online serving: the bundled tagger on Ray Serve, one sentence a request",
            "",
            f"{machine()}; {datetime.date.today()}; {data['requests']} requests a block, "
            f"{data['rounds']} rounds, blocks interleaved (order rotating), {SETTLE:.0f} s "
            "settle before each; one replica of one kernel thread per deployment; the client "
            "(one process, httpx) shares the cores. Every answer equals the sentence run alone.",
            "",
            markdown_table([*header, "mean batch formed"], rows),
            "",
            f"Serve's own cost a request (the empty deployment, 1 client): p50 "
            f"{statistics.median(empty1['p50_ms']):.2f} ms; the engine's share (the sentence "
            f"run alone in one process, best of 200): {data['engine_ms']:.3f} ms.",
            "",
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--requests", type=int)
    args = parser.parse_args()
    data = measure(args.quick, args.rounds, args.requests)
    summary = summarize(data)
    text = report(data, summary)
    stem = "serving-quick" if args.quick else "serving"
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{stem}.md").write_text(text)
    (OUT / f"{stem}.json").write_text(json.dumps({**data, "summary": summary}, indent=1))
    (OUT / f"{stem}.svg").write_text(chart(summary, "fusebridge serve: the tagger on Ray Serve"))
    print(text)


if __name__ == "__main__":
    main()
