"""`fusebridge serve`, run as a user runs it: it starts a local Ray and Serve on a loopback
port, answers, and on SIGINT stops both and exits 0."""

import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("ray.serve")
httpx = pytest.importorskip("httpx")

from helpers.batch_rows import TAGGER, oracle  # noqa: E402
from helpers.local_ray import free_port  # noqa: E402

import fusebridge  # noqa: E402
from fusebridge.cli import command as cli  # noqa: E402

TAGS = "crf_decoding_0.tmp_0"


def test_serves_until_interrupted(tmp_path):
    port = free_port()
    exe = shutil.which("fusebridge")
    cmd = [exe] if exe else [sys.executable, "-m", "fusebridge.cli"]
    args = ["serve", str(TAGGER), "--port", str(port), "--max-batch-size", "4"]
    # From tmp_path: Ray puts the driver's folder on its workers' sys.path (tests/batch).
    server = subprocess.Popen(
        [*cmd, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, server.communicate()[1][-3000:]
            assert time.monotonic() < deadline, "not ready in 180 s"
            try:
                if httpx.get(f"{url}/v2/health/ready", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        words = [3, 14, 15, 92, 65]
        request = {
            "id": "r1",
            "inputs": [
                {"name": "words", "datatype": "INT64", "shape": [5, 1], "data": words},
                {"name": "words.offsets", "datatype": "INT64", "shape": [2], "data": [0, 5]},
            ],
            "outputs": [{"name": TAGS}],
        }
        r = httpx.post(f"{url}/v2/models/{TAGGER.name}/infer", json=request, timeout=60)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["id"] == "r1" and body["model_name"] == TAGGER.name
        feed = fusebridge.LoDTensor(np.array(words, np.int64).reshape(-1, 1), lengths=[5])
        want = np.asarray(oracle(TAGGER).run({"words": feed})[TAGS].data).reshape(-1)
        out = {t["name"]: t["data"] for t in body["outputs"]}
        assert out == {TAGS: want.tolist(), TAGS + ".offsets": [0, 5]}
    finally:
        server.send_signal(signal.SIGINT)
        try:
            stdout, stderr = server.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
    assert server.returncode == 0, stderr[-3000:]
    assert f"serving '{TAGGER.name}' at {url}/v2/models/{TAGGER.name}" in stdout
    assert "stopped" in stdout


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--name", "a/b"], "model name 'a/b', expected letters"),
        (["--port", "0"], "--port 0, expected 1..65535"),
        (["--replicas", "0"], "replicas must be an int >= 1"),
    ],
)
def test_refused_before_ray_starts(extra, message, capsys):
    assert cli.main(["serve", str(TAGGER), *extra]) == 2
    assert message in capsys.readouterr().err
