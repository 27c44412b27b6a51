"""A local Ray for the tests that need one, and a free loopback port."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def start_local_ray(folder: Path, cpus: int = 2) -> None:
    """ray.init of `cpus` CPUs, started from `folder`: Ray puts the driver's current folder on
    its workers' sys.path, and CI runs the tests in a copy of the source tree with fusebridge
    installed, not built there; workers started from that folder would import the tree, which
    has no compiled core."""
    import ray

    from fusebridge.cli.serve_command import PROXY_READY

    here, proxy_ready = os.getcwd(), os.environ.get(PROXY_READY[0])
    os.chdir(folder)
    os.environ.setdefault(*PROXY_READY)  # as `fusebridge serve` gives a local Ray
    try:
        ray.init(
            num_cpus=cpus,
            include_dashboard=False,
            log_to_driver=False,
            _node_ip_address="127.0.0.1",  # loopback only
        )
    finally:
        os.chdir(here)
        if proxy_ready is None:
            os.environ.pop(PROXY_READY[0])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
