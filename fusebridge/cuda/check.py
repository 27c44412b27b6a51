"""`python -m fusebridge.cuda.check OUTDIR`: every GPU check and benchmark of the cuda engine
in one run of a few minutes, each part's results written to OUTDIR as soon as it is done.

Parts, in order: the environment; the kernels compiled for sm_80 and sm_90 with their
resource reports; correctness against the cpu engine (masks bit for bit, values within the
arithmetic's bound); a captured CUDA graph advancing the offset from a device scalar;
compute-sanitizer (memcheck) on one small case per kernel; the benchmarks of docs/cuda.md
against a device copy, torch and the bare cuBLAS GEMM. With no GPU the GPU parts say so and
the rest runs (the "no-GPU half")."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fusebridge.cuda import build
from fusebridge.cuda.device import is_available

SANITIZER_SECONDS = 90
TAGGER_SECONDS = 120
ARCHS = ("sm_80", "sm_90")


# ---- parts ----------------------------------------------------------------------------------


def environment(_: Path) -> dict:
    info: dict[str, Any] = {"python": sys.version.split()[0], "machine": platform.machine()}
    info["nvrtc"] = ".".join(map(str, build.nvrtc_version()))
    try:
        import cupy

        info["cupy"] = cupy.__version__
        if cupy.cuda.is_available():
            dev = cupy.cuda.Device()
            props = cupy.cuda.runtime.getDeviceProperties(dev.id)
            info["gpu"] = props["name"].decode()
            info["compute_capability"] = dev.compute_capability
            info["sms"] = dev.attributes["MultiProcessorCount"]
            info["driver"] = cupy.cuda.runtime.driverGetVersion()
    except ImportError:
        info["cupy"] = None
    try:
        import torch

        info["torch"] = torch.__version__
    except ImportError:
        info["torch"] = None
    if shutil.which("nvidia-smi"):
        smi = subprocess.run(
            [
                "nvidia-smi",
                "--query-gpu=name,driver_version,clocks.sm,clocks.mem",
                "--format=csv,noheader",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
        info["nvidia_smi"] = smi.stdout.strip()
    return info


def compile_kernels(_: Path) -> dict:
    """Every source for every arch, each kernel's resources against the budget."""
    report, failures = {}, []
    for source in build.SOURCES:
        for arch in ARCHS:
            cubin = build.compile_source(source, arch)
            for kernel, used in build.resources(cubin.log).items():
                report[f"{kernel}@{arch}"] = used.__dict__
                failures += [f"{arch} {v}" for v in build.over_budget(kernel, used)]
    return {"ok": not failures, "failures": failures, "kernels": report}


def correctness(_: Path) -> dict:
    from fusebridge.cuda import gpu_cases

    results = gpu_cases.run_all()
    failed = [r for r in results if not r["ok"]]
    return {"ok": not failed, "cases": len(results), "failed": failed, "results": results}


def graph_replay(_: Path) -> dict:
    from fusebridge.cuda import gpu_cases

    return gpu_cases.graph_replay()


def sanitizer(outdir: Path) -> dict:
    tool = shutil.which("compute-sanitizer")
    if tool is None:
        return {"ok": None, "skipped": "compute-sanitizer is not on PATH"}
    runs, logs = {}, []
    deadline = time.monotonic() + SANITIZER_SECONDS
    for name in ("memcheck", "racecheck"):
        left = deadline - time.monotonic()
        if left < 10:
            runs[name] = {"skipped": "out of the time box"}
            continue
        cmd = [tool, "--tool", name, "--error-exitcode", "3", sys.executable, "-m"]
        cmd += ["fusebridge.cuda.gpu_cases", "--small"]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=left)
        except subprocess.TimeoutExpired:
            runs[name] = {"exit": None, "summary": ["timed out"]}
            continue
        text = done.stdout + done.stderr
        logs.append(f"==== {name}: exit {done.returncode}\n{text}")
        summary = [line for line in text.splitlines() if "SUMMARY" in line or "cases," in line]
        runs[name] = {"exit": done.returncode, "summary": summary}
    (outdir / "sanitizer.log").write_text("\n".join(logs))
    ok = all(r.get("exit") == 0 for r in runs.values() if "exit" in r)
    return {"ok": ok, "runs": runs}


def benchmarks(outdir: Path) -> dict:
    from fusebridge.cuda import gpu_bench

    rows = gpu_bench.run_all() + _tagger_rows(outdir / "tagger.json")
    (outdir / "bench.md").write_text(gpu_bench.table(rows))
    # The tagger's rows hold its tags on the device against the cpu Session's: a wrong tag
    # fails the part, as a failed benchmark does.
    ok = not any("error" in row or row.get("tags equal") is False for row in rows)
    return {"ok": ok, "rows": rows}


def _tagger_rows(out: Path) -> list[dict]:
    """fusebridge.bench.cuda_tagger's rows, run as a command: it needs a Session, the layer
    above this engine."""
    cmd = [sys.executable, "-m", "fusebridge.bench.cuda_tagger", str(out)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=TAGGER_SECONDS)
    except subprocess.TimeoutExpired:
        return [{"benchmark": "tagger", "error": f"over {TAGGER_SECONDS} s"}]
    if done.returncode != 0:
        return [{"benchmark": "tagger", "error": done.stderr[-2000:]}]
    return json.loads(out.read_text())


GPU_PARTS = ("correctness", "graph_replay", "sanitizer", "benchmarks")
PARTS: tuple[tuple[str, Callable[[Path], dict]], ...] = (
    ("environment", environment),
    ("compile_kernels", compile_kernels),
    ("correctness", correctness),
    ("graph_replay", graph_replay),
    ("sanitizer", sanitizer),
    ("benchmarks", benchmarks),
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fusebridge.cuda.check")
    parser.add_argument("outdir", type=Path)
    parser.add_argument("--only", nargs="*", help="run these parts alone")
    ns = parser.parse_args(argv)
    ns.outdir.mkdir(parents=True, exist_ok=True)
    gpu = is_available()
    status = 0
    for name, part in PARTS:
        if ns.only and name not in ns.only:
            continue
        t0 = time.monotonic()
        if name in GPU_PARTS and not gpu:
            result: dict = {"ok": None, "skipped": "no CUDA GPU here (cupy.cuda.is_available())"}
        else:
            try:
                result = part(ns.outdir)
            except Exception:
                result = {"ok": False, "error": traceback.format_exc()}
        result["seconds"] = round(time.monotonic() - t0, 2)
        (ns.outdir / f"{name}.json").write_text(json.dumps(result, indent=1, default=str))
        mark = {True: "ok", False: "FAILED", None: "skipped"}[result.get("ok", True)]
        print(f"{name:16s} {mark:8s} {result['seconds']:7.2f} s", flush=True)
        if result.get("ok") is False:
            status = 1
            print(
                result.get("error") or json.dumps(result.get("failed", result), default=str)[:4000]
            )
    if gpu and (ns.outdir / "bench.md").is_file():
        print((ns.outdir / "bench.md").read_text())
    return status


if __name__ == "__main__":
    os.environ.setdefault("CUPY_TF32", "0")  # full float32 GEMMs: the peers run without TF32
    sys.exit(main())
