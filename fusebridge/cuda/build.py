"""The CUDA kernels compiled at run time: NVRTC turns one source of fusebridge/cuda/csrc into a
CUBIN for one GPU architecture (the device's own: PTX from a newer NVRTC would need a newer
driver), cached on disk so that each source is compiled once per architecture and toolkit.

NVRTC needs no GPU and no driver, so the same compilation (and its ptxas resource report) runs
in CI on machines without one (tests/cuda/test_cuda_build.py)."""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass
from pathlib import Path

from fusebridge.errors import Error

CSRC = Path(__file__).parent / "csrc"
# philox.hpp is the CPU build's own header: one generator source for both engines.
KERNELS_CSRC = Path(__file__).parents[1] / "kernels" / "csrc"
SOURCES = ("dropout.cu", "softmax_dropout.cu", "gru.cu", "sequence.cu")
HEADERS = (CSRC / "common.cuh", KERNELS_CSRC / "philox.hpp")
CACHE_ENV = "FUSEBRIDGE_CUDA_CACHE"
OPTIONS = ("-std=c++17", "--ptxas-options=-v", "-DNDEBUG")


class CudaUnavailableError(Error, RuntimeError):
    """The cuda engine cannot run here: a package, the driver or a GPU is missing."""


class CudaBuildError(Error, RuntimeError):
    """NVRTC refused a kernel source; the message holds its log."""


@dataclass(frozen=True)
class Cubin:
    source: str
    arch: str  # "sm_90"
    path: Path  # the cached CUBIN
    log: str  # NVRTC's log: ptxas's resource report per kernel


def cache_dir() -> Path:
    """Where CUBINs are kept: $FUSEBRIDGE_CUDA_CACHE, else fusebridge/cuda under the user's
    cache directory ($XDG_CACHE_HOME or ~/.cache)."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "fusebridge" / "cuda"


def _nvrtc():
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise CudaUnavailableError(
            "the cuda engine compiles its kernels with NVRTC through cuda-bindings, which is "
            'not installed: pip install "fusebridge[cuda]"'
        ) from exc
    return nvrtc


def nvrtc_version() -> tuple[int, int]:
    nvrtc = _nvrtc()
    _, major, minor = nvrtc.nvrtcVersion()
    return major, minor


def _check(nvrtc, result: tuple, what: str) -> tuple:
    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, message = nvrtc.nvrtcGetErrorString(err)
        raise CudaBuildError(f"NVRTC {what}: {message.decode()}")
    return result[1:]


def compile_source(source: str, arch: str, defines: tuple[str, ...] = ()) -> Cubin:
    """The CUBIN of csrc/`source` for `arch` ("sm_80", "sm_90", ...), from the disk cache when
    the same source, headers, options and NVRTC made it before. `defines` ("NAME=value")
    override the kernels' tuning constants (variants timed by gpu_bench.tune)."""
    if source not in SOURCES:
        raise CudaBuildError(f"no CUDA source {source!r}; the sources are {SOURCES}")
    if not re.fullmatch(r"sm_\d+a?", arch):
        raise CudaBuildError(f"arch must look like 'sm_90', got {arch!r}")
    nvrtc = _nvrtc()
    text = (CSRC / source).read_bytes()
    if not all(re.fullmatch(r"FB_\w+=\d+", d) for d in defines):
        raise CudaBuildError(f"defines must look like 'FB_NAME=number', got {defines}")
    options = (
        f"--gpu-architecture={arch}",
        *OPTIONS,
        *(f"-D{d}" for d in defines),
        f"-I{CSRC}",
        f"-I{KERNELS_CSRC}",
    )
    digest = hashlib.sha256(text)
    for header in HEADERS:
        digest.update(header.read_bytes())
    digest.update(repr((OPTIONS, defines, arch, nvrtc_version())).encode())
    stem = f"{Path(source).stem}-{arch}-{digest.hexdigest()[:20]}"
    folder = cache_dir()
    path, log_path = folder / f"{stem}.cubin", folder / f"{stem}.log"
    if path.is_file() and log_path.is_file():
        return Cubin(source, arch, path, log_path.read_text())

    (prog,) = _check(nvrtc, nvrtc.nvrtcCreateProgram(text, source.encode(), 0, [], []), "create")
    try:
        compiled = nvrtc.nvrtcCompileProgram(prog, len(options), [o.encode() for o in options])
        (size,) = _check(nvrtc, nvrtc.nvrtcGetProgramLogSize(prog), "log size")
        log = b" " * size
        _check(nvrtc, nvrtc.nvrtcGetProgramLog(prog, log), "log")
        log_text = log.rstrip(b"\x00 ").decode(errors="replace")
        if compiled[0] != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CudaBuildError(f"NVRTC could not compile {source} for {arch}:\n{log_text}")
        (size,) = _check(nvrtc, nvrtc.nvrtcGetCUBINSize(prog), "CUBIN size")
        cubin = b" " * size
        _check(nvrtc, nvrtc.nvrtcGetCUBIN(prog, cubin), "CUBIN")
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    folder.mkdir(parents=True, exist_ok=True)
    for target, data in ((path, cubin), (log_path, log_text.encode())):
        partial = target.with_name(f"{target.name}.{os.getpid()}.part")
        partial.write_bytes(data)
        os.replace(partial, target)  # readers see a whole file or none
    return Cubin(source, arch, path, log_text)


@dataclass(frozen=True)
class Resources:
    """What ptxas reports for one kernel."""

    registers: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int
    shared_bytes: int


_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:.*?(\d+) bytes smem)?")


def resources(log: str) -> dict[str, Resources]:
    """ptxas's report (--ptxas-options=-v) per kernel entry, from an NVRTC log."""
    found: dict[str, Resources] = {}
    name, frame = None, (0, 0, 0)
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            name, frame = m.group(1), (0, 0, 0)
        elif (m := _FRAME.search(line)) and name:
            frame = tuple(int(v) for v in m.groups())
        elif (m := _USED.search(line)) and name:
            found[name] = Resources(int(m.group(1)), *frame, int(m.group(2) or 0))
            name = None
    return found


# Registers and shared memory each kernel may use, what it uses today on sm_80 and sm_90
# (docs/cuda.md): a change that needs more is looked at, not let through. No kernel may
# spill or use a stack frame (local memory).
BUDGETS = {
    # The caps of the kernels' __launch_bounds__: 4 blocks of 256 threads (64 registers), 3
    # (80, rounded down to the allocation unit of 8), 2 (128).
    "dropout_forward": Resources(64, 0, 0, 0, 0),
    "dropout_apply": Resources(56, 0, 0, 0, 0),
    "softmax_dropout_forward": Resources(80, 0, 0, 0, 0),
    "softmax_dropout_backward": Resources(128, 0, 0, 0, 0),
    # sequence.cu, no launch bounds beyond the block: 64 on sm_80 (40 on sm_90), 28.
    "crf_decoding": Resources(64, 0, 0, 0, 0),
    "lod_to_padded": Resources(28, 0, 0, 0, 0),
    "padded_to_lod": Resources(28, 0, 0, 0, 0),
    # gru.cu: 64 on both (the projection's 4 x 4 tile, the recurrence's 4 units x 3 gates of
    # sums); the projection's two 16 x 64 float tiles; the recurrence's Wh slice is dynamic.
    "gru_projection": Resources(64, 0, 0, 0, 8192),
    "gru_recurrence": Resources(64, 0, 0, 0, 0),
}


def over_budget(kernel: str, used: Resources) -> list[str]:
    """What of `used` exceeds the kernel's budget, in words (empty when within it)."""
    family = kernel.rsplit("_", 1)[0] if kernel.startswith("dropout_") else kernel
    budget = BUDGETS.get(family)
    if budget is None:
        return [f"{kernel} has no budget in fusebridge/cuda/build.py BUDGETS"]
    return [
        f"{kernel}: {field} {getattr(used, field)} > {getattr(budget, field)}"
        for field in Resources.__dataclass_fields__
        if getattr(used, field) > getattr(budget, field)
    ]
