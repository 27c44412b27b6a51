"""A model on Ray Serve, speaking the Open Inference Protocol (KServe v2) over REST, with requests
batched dynamically (`@serve.batch`).

Routes: GET /v2/health/live, /v2/health/ready, /v2 (server metadata), /v2/models/NAME (inputs
and outputs with datatypes and shapes), /v2/models/NAME/ready, /v2/models/NAME/stats (requests
and batches run, Triton's statistics extension in brief); POST /v2/models/NAME/infer.

Requests waiting up to batch_wait_ms run as one block of rows: every answer equals that request
run alone, because the block's rows give the bits they give alone (fusebridge.batch, placement
fixed per model). A request the model refuses (a bad value) fails alone: its batch is run again
one request at a time. Past max_queued waiting requests Serve answers 503; a malformed request
gets a 400 whose body names what was wrong.
"""

from __future__ import annotations

import asyncio
import re
import threading

import numpy as np
import pyarrow as pa
from ray import serve
from starlette.requests import Request
from starlette.responses import JSONResponse

from fusebridge import conventions
from fusebridge.batch import BatchModel
from fusebridge.errors import ArgumentError, ArgumentTypeError, Error, ExecutionError
from fusebridge.serve import protocol
from fusebridge.serve.tensors import Rows, input_dtypes, output_names, to_rows, to_tensors

# A request body larger than this is refused (413) before it is read; a request of thousands
# of sentences fits.
MAX_BODY_BYTES = 64 << 20
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
ONGOING_MIN = 16
DEFAULTS = {"max_batch_size": 16, "batch_wait_ms": 5.0, "replicas": 1, "max_queued": 1024}


class HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def check_name(name: str) -> str:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ArgumentError(
            f"serve: model name {name!r}, expected letters, digits, '.', '_' or '-' (it is a "
            "part of the URL)"
        )
    return name


class ModelServer:
    """One replica: one Session of the model, batches of requests run on a worker thread."""

    def __init__(
        self, model: BatchModel, name: str, max_batch_size: int, batch_wait_s: float
    ) -> None:
        self.model, self.name, self.plan = model, name, model.columns
        model.session  # noqa: B018 - built now, not inside the first request's time
        self.dtypes = input_dtypes(self.plan)
        self.outputs = output_names(self.plan)
        self.ranks = model.output_ranks()
        self.metadata = self._metadata()
        self._infer_batch.set_max_batch_size(max_batch_size)
        self._infer_batch.set_batch_wait_timeout_s(batch_wait_s)
        self._stats_lock = threading.Lock()
        self.requests = self.batches = 0
        model = f"/v2/models/{name}"
        server = {"name": "fusebridge", "version": conventions.PACKAGE_VERSION}
        self.gets = {  # GET routes: path -> the answer's maker
            "/v2/health/live": lambda: {"live": True},
            "/v2/health/ready": lambda: {"ready": True},
            "/v2": lambda: {**server, "extensions": ["statistics"]},
            model: lambda: self.metadata,
            f"{model}/ready": lambda: {"name": name, "ready": True},
            f"{model}/stats": self._stats,
        }

    def _metadata(self) -> dict:
        """Inputs and outputs with datatypes and shapes (-1: free); what the graph leaves
        undeclared comes from the Session's run of one zero row."""
        spec, arrow, ranks = self.model.signature, self.model.output_types(), self.ranks
        offsets = {conventions.offsets_name(c.name) for c in self.plan.cuts if c.lod}

        def entry(name: str, dtype: np.dtype | None) -> dict:
            shape, rank = spec[name][1], 1 if name in offsets else ranks.get(name)
            if dtype is None:
                dtype = np.int64 if name in offsets else _innermost(arrow[name]).to_pandas_dtype()
            if rank is not None and (shape is None or len(shape) != rank):
                shape = [-1] * rank
            return {"name": name, "datatype": protocol.datatype(dtype), "shape": shape or [-1]}

        inputs = [entry(n, dtype) for n, dtype in self.dtypes.items()]
        outputs = [entry(n, spec[n][0]) for n in self.outputs]
        return {"name": self.name, "platform": "fusebridge", "inputs": inputs, "outputs": outputs}

    # -- HTTP ------------------------------------------------------------------------------
    async def __call__(self, request: Request) -> JSONResponse:
        try:
            body = await self._route(request)
        except HTTPError as exc:
            return JSONResponse({"error": str(exc)}, status_code=exc.status)
        except (ArgumentError, ArgumentTypeError) as exc:  # the request's fault
            return JSONResponse({"error": str(exc)}, status_code=400)
        except ExecutionError as exc:  # the model cannot run on this request's values (an id
            # past the vocabulary): the request was run alone, so it is this request's
            return JSONResponse({"error": str(exc)}, status_code=422)
        except Error as exc:  # ours: the model or a backend failed on a well-formed request
            return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=500)
        return JSONResponse(body)

    async def _route(self, request: Request) -> dict:
        path = request.url.path
        root = request.scope.get("root_path", "")  # the app's route_prefix, when not "/"
        if root and path.startswith(root):
            path = path[len(root) :]
        path = path.rstrip("/")
        model = f"/v2/models/{self.name}"
        gets = self.gets
        if path in gets:
            if request.method != "GET":
                raise HTTPError(405, f"{path} answers GET, not {request.method}")
            return gets[path]()
        if path == f"{model}/infer":
            if request.method != "POST":
                raise HTTPError(405, f"{path} answers POST, not {request.method}")
            return await self._infer(await _body(request))
        if path.startswith("/v2/models/"):
            raise HTTPError(404, f"no model at {path}; this server has {self.name!r} ({model})")
        raise HTTPError(404, f"no route {path}; the Open Inference Protocol's are under /v2")

    def _stats(self) -> dict:
        with self._stats_lock:
            counts = {"inference_count": self.requests, "execution_count": self.batches}
        return {"model_stats": [{"name": self.name, **counts}]}

    async def _infer(self, body: bytes) -> dict:
        request = protocol.parse_json(body)
        rows = to_rows(protocol.read_tensors(request, self.dtypes), self.plan)
        wanted = protocol.requested_outputs(request, self.outputs)
        for name in list(wanted):  # a LoD output comes with its offsets
            offsets = conventions.offsets_name(name)
            if offsets in self.outputs and offsets not in wanted:
                wanted.append(offsets)
        result = await self._infer_batch(rows)
        if isinstance(result, Exception):
            raise result
        outputs = to_tensors(result, self.plan, self.ranks, rows.steps)
        response = {
            "model_name": self.name,
            "outputs": [protocol.tensor(n, outputs[n]) for n in self.outputs if n in wanted],
        }
        if "id" in request:
            response["id"] = request["id"]
        return response

    # -- batching --------------------------------------------------------------------------
    @serve.batch(max_batch_size=DEFAULTS["max_batch_size"], batch_wait_timeout_s=0.005)
    async def _infer_batch(self, batch: list[Rows]) -> list[dict | Exception]:
        with self._stats_lock:
            self.requests += len(batch)
            self.batches += 1
        return await asyncio.to_thread(self._run, batch)

    def _run(self, batch: list[Rows]) -> list[dict | Exception]:
        """Each request's output columns, or the error the model raised on it."""
        try:
            table = pa.concat_tables([r.table for r in batch])
            columns = self.model.outputs(table)
        except Error as exc:
            if len(batch) == 1:
                return [exc]
            return [self._run([r])[0] for r in batch]  # only the request at fault fails
        out, start = [], 0
        for r in batch:
            rows = r.table.num_rows
            out.append({n: c.slice(start, rows) for n, c in columns.items()})
            start += rows
        return out


def _innermost(t: pa.DataType) -> pa.DataType:
    while pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        t = t.value_type
    return t


async def _body(request: Request) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise HTTPError(413, f"a body of {declared} bytes, expected at most {MAX_BODY_BYTES}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            raise HTTPError(413, f"a body past {MAX_BODY_BYTES} bytes, expected at most that")
        chunks.append(chunk)
    return b"".join(chunks)


def build_app(
    model: BatchModel,
    name: str,
    *,
    max_batch_size: int = DEFAULTS["max_batch_size"],
    batch_wait_ms: float = DEFAULTS["batch_wait_ms"],
    replicas: int = DEFAULTS["replicas"],
    max_queued: int = DEFAULTS["max_queued"],
    threads: int = 1,
) -> serve.Application:
    """The Serve application of one model: `serve.run(build_app(...), route_prefix="/")`.

    max_batch_size: requests a batch holds at most (1: no batching); batch_wait_ms: how long
    the first request of a batch waits for more; replicas: processes, one Session each, of
    `threads` kernel threads; max_queued: requests waiting past which Serve answers 503."""
    check_name(name)
    if not isinstance(model, BatchModel):
        raise ArgumentTypeError(f"serve: expected a BatchModel, got {type(model).__name__}")
    ints = {"max_batch_size": max_batch_size, "replicas": replicas, "threads": threads}
    ints["max_queued"] = max_queued
    for key, value in ints.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ArgumentError(f"serve: {key} must be an int >= 1, got {value!r}")
    if not isinstance(batch_wait_ms, (int, float)) or not 0 <= batch_wait_ms <= 10_000:
        raise ArgumentError(f"serve: batch_wait_ms must be within [0, 10000], got {batch_wait_ms}")
    deployment = serve.deployment(
        ModelServer,
        name=name,
        num_replicas=replicas,
        # A batch forms from requests a replica holds at once; one more batch's worth waits.
        # At least ONGOING_MIN: past the limit Serve's router retries with a backoff (measured:
        # --max-batch-size 1 at 16 clients fell from 63 to 17 requests/s with a limit of 2).
        max_ongoing_requests=max(2 * max_batch_size, ONGOING_MIN),
        max_queued_requests=max_queued,
        ray_actor_options={"num_cpus": threads},
    )
    return deployment.bind(model, name, max_batch_size, batch_wait_ms / 1000)
