"""`fusebridge serve`: a model behind the Open Inference Protocol on Ray Serve, until Ctrl-C or
SIGTERM.

The driver loads and optimizes the model before Ray starts (a bad model costs no cluster), then
starts a local Ray (or joins --address), Serve's HTTP proxy on --host:--port, and the model's
replicas; it prints the URL once the model answers. On exit it shuts the local Serve and Ray
down, or on a cluster deletes its own app and leaves Serve running.
"""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

from fusebridge.errors import ArgumentError, MissingDependencyError

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
# Serve kills an HTTP proxy not ready within 5 s, and serve.start then fails: a loaded 2-core
# machine took longer to import it (seen in the tests). A local Ray gets this many seconds.
PROXY_READY = ("RAY_SERVE_PROXY_READY_CHECK_TIMEOUT_S", "30")


def default_name(model_path: str) -> str:
    """The model file's stem, or the directory's name."""
    path = Path(model_path)
    return path.name if path.is_dir() else path.stem


def serve_command(
    model_path: str,
    *,
    name: str | None,
    host: str,
    port: int,
    address: str | None,
    max_batch_size: int,
    batch_wait_ms: float,
    replicas: int,
    threads: int,
    max_queued: int,
    request_timeout_s: float,
) -> int:
    try:
        import ray
        from ray import serve

        from fusebridge.batch import BatchModel
        from fusebridge.serve.app import build_app, check_name
    except ImportError as exc:
        raise MissingDependencyError(
            f'serve needs Ray Serve ({exc}): pip install "fusebridge[serve]"'
        ) from exc
    name = check_name(name or default_name(model_path))
    if not 0 < port < 65536:
        raise ArgumentError(f"serve: --port {port}, expected 1..65535")
    if not request_timeout_s > 0:
        raise ArgumentError(f"serve: --request-timeout-s {request_timeout_s}, expected > 0")
    app = build_app(
        BatchModel(model_path, threads=threads),
        name,
        max_batch_size=max_batch_size,
        batch_wait_ms=batch_wait_ms,
        replicas=replicas,
        max_queued=max_queued,
        threads=threads,
    )
    stop = threading.Event()
    if address:
        ray.init(address=address, log_to_driver=False)
    else:
        os.environ.setdefault(*PROXY_READY)  # Ray's processes inherit it
        ray.init(num_cpus=replicas * threads, include_dashboard=False, log_to_driver=False)
    # Set after ray.init, which replaces the SIGINT handler with the default one; from here a
    # signal only asks the loop below to stop, and Serve and Ray are shut down in order.
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in STOP_SIGNALS}
    try:
        options = {"host": host, "port": port, "request_timeout_s": request_timeout_s}
        serve.start(http_options=options)
        serve.run(app, name=name, route_prefix="/")
        print(
            f"serving {name!r} at http://{host}:{port}/v2/models/{name} (Ctrl-C stops)", flush=True
        )
        while not stop.wait(1.0):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if address:  # a cluster's Serve may hold other apps: only ours goes
            serve.delete(name)
        else:
            serve.shutdown()
        ray.shutdown()
    print("stopped", flush=True)
    return 0
