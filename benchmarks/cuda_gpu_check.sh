#!/usr/bin/env bash
# `python -m fusebridge.cuda.check OUTDIR` on the GPU test machine (docs/cuda.md, "On a GPU"):
# installs the wheels that machine lacks from .whl/ (fetched beforehand, see docs/cuda.md),
# builds fusebridge there for its Python, then runs the check from outside the source tree.
set -euo pipefail
out=${1:?usage: benchmarks/cuda_gpu_check.sh OUTDIR}
root=$(cd "$(dirname "$0")/.." && pwd)
start=$SECONDS
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
  --target /tmp/fb-deps "$root"/.whl/*.whl
export PYTHONPATH=/tmp/fb-deps
CMAKE_BUILD_PARALLEL_LEVEL=$(nproc) python3 -m pip install -q --no-build-isolation --no-deps \
  --no-compile --target /tmp/fb "$root"
echo "install: $((SECONDS - start)) s"
export PYTHONPATH=/tmp/fb:/tmp/fb-deps PYTHONUNBUFFERED=1
cd /tmp  # the source tree holds no compiled core: it must not shadow the install
python3 -m fusebridge.cuda.check "$out"
