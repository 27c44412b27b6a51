"""The hardware's limit for the quantized GRU: MACs per nanosecond of one core's VFMADD231PS
(float32), VDPBF16PS (bf16) and VPDPBUSD (int8) on zmm registers, 12 independent chains each
(benchmarks/native/dot_throughput.cpp, compiled here with g++ -O2). The quantized GRU's speedup
over float32 cannot exceed the ratio of these rates where its time is in the dot products.
Needs g++ and an AVX-512 CPU."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from benchmarks.common import machine

SOURCE = Path(__file__).parent / "native" / "dot_throughput.cpp"


def run(quick: bool = False, threads: int = 2) -> str:
    title = "### dot_throughput"
    if shutil.which("g++") is None or "avx512f" not in Path("/proc/cpuinfo").read_text():
        return f"{title}\n\nneeds g++ and an AVX-512 CPU"
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "dot_throughput"
        subprocess.run(["g++", "-O2", str(SOURCE), "-o", str(exe)], check=True)
        out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout
    return f"{title}\n\n{machine()}, one core\n\n```\n{out.strip()}\n```"
