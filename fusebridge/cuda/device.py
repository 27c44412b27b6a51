"""Where the cuda engine's kernels run: a CUDA device through CuPy (modules loaded from the
CUBINs of build.py, launched on the current stream); in the tests, the CPU emulation of
tests/helpers/cuda_emulator.py, which runs the same kernel sources on numpy arrays; in
gpu_bench.tune, variants of the kernels' tuning constants.

Both are a `Launcher`: an array module (`xp`), a name for descriptors (`device`) and `launch`,
which runs a kernel over a number of warps' worth of work. The kernels loop grid-stride over
whole warps, so a launcher may pick any grid and any block of a multiple of 32 threads.
`launch_grid` runs a kernel on a grid its caller chose: the GRU's kernels, whose persistent
recurrence is a cooperative launch (every block resident at once, `resident_blocks` says how
many can be) synchronised by a grid barrier of its own."""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Iterator, Sequence
from typing import Any, Protocol

import numpy as np

from fusebridge.cuda.build import CudaUnavailableError, compile_source, nvrtc_version
from fusebridge.errors import ArgumentTypeError

BLOCK_THREADS = 256
# Blocks launched per SM, beyond those resident at once: on an H100 32 ran the dropout 4% faster
# than 8 (docs/cuda.md); the kernels loop grid-stride over whatever is left.
BLOCKS_PER_SM = 32


class Launcher(Protocol):
    xp: Any  # the array module: cupy, or numpy under emulation
    device: str  # part of every descriptor: "cuda:0", "emulated"

    def launch(self, source: str, kernel: str, warps: int, args: Sequence[object]) -> None: ...
    def launch_grid(
        self,
        source: str,
        kernel: str,
        grid: int,
        block: int,
        args: Sequence[object],
        *,
        shared_bytes: int = 0,
        cooperative: bool = False,
    ) -> None: ...
    def resident_blocks(self, source: str, kernel: str, block: int, shared_bytes: int) -> int: ...
    def empty(self, shape: Sequence[int], dtype: object, *, zeros: bool = False) -> Any: ...
    def upload(self, host: np.ndarray) -> Any: ...
    def download(self, device_array: Any) -> np.ndarray: ...


def cupy_module():
    """CuPy, or a clear error saying what to install."""
    try:
        import cupy
    except ImportError as exc:
        raise CudaUnavailableError(
            'the cuda engine needs CuPy for CUDA 13: pip install "fusebridge[cuda]"'
        ) from exc
    return cupy


def status() -> str:
    """What `fusebridge info` says of the engine: "available: GPU (arch), NVRTC x.y", or
    "not available: " and what is missing. Never raises, never waits on a device."""
    try:
        cupy = cupy_module()
        major, minor = nvrtc_version()
        if not cupy.cuda.is_available():
            return "not available: no CUDA driver or GPU found"
        dev = cupy.cuda.Device()
        name = cupy.cuda.runtime.getDeviceProperties(dev.id)["name"].decode()
        return f"available: {name} (sm_{dev.compute_capability}), NVRTC {major}.{minor}"
    except Exception as exc:  # any missing piece: say which
        return f"not available: {exc}"


def is_available() -> bool:
    """Whether a CUDA GPU can run the engine: CuPy, NVRTC and a driver with a device."""
    return status().startswith("available")


class CupyDevice:
    """One GPU: CUBINs for its own architecture, loaded once per source."""

    def __init__(
        self, index: int, defines: tuple[str, ...] = (), blocks_per_sm: int = BLOCKS_PER_SM
    ) -> None:
        cupy = self.xp = cupy_module()
        self.index, self.defines, self.blocks_per_sm = index, defines, blocks_per_sm
        # Variants (gpu_bench.tune) get descriptors, hence primitives, of their own.
        variant = defines + (
            (f"blocks_per_sm={blocks_per_sm}",) if blocks_per_sm != BLOCKS_PER_SM else ()
        )
        self.device = f"cuda:{index}" + (f"[{','.join(variant)}]" if variant else "")
        with cupy.cuda.Device(index) as dev:
            major, minor = dev.compute_capability[:-1], dev.compute_capability[-1]
            self.arch = f"sm_{major}{minor}"
            self.sm_count = dev.attributes["MultiProcessorCount"]
        self._functions: dict[tuple[str, str], Any] = {}

    def function(self, source: str, kernel: str) -> Any:
        fn = self._functions.get((source, kernel))
        if fn is None:
            cubin = compile_source(source, self.arch, self.defines)
            with self.xp.cuda.Device(self.index):
                module = self.xp.RawModule(path=str(cubin.path))
                fn = self._functions[(source, kernel)] = module.get_function(kernel)
        return fn

    def empty(self, shape: Sequence[int], dtype: object, *, zeros: bool = False) -> Any:
        with self.xp.cuda.Device(self.index):
            return (self.xp.zeros if zeros else self.xp.empty)(tuple(shape), dtype)

    def upload(self, host: np.ndarray) -> Any:
        with self.xp.cuda.Device(self.index):
            return self.xp.asarray(host)

    def download(self, device_array: Any) -> np.ndarray:
        return self.xp.asnumpy(device_array)

    def cooperative_function(self, source: str, kernel: str, shared_bytes: int) -> Any:
        """The kernel from a module loaded for cooperative launches (CuPy then launches with
        cuLaunchCooperativeKernel, which refuses a grid that cannot be resident at once rather
        than letting a grid barrier wait forever), allowed `shared_bytes` of dynamic shared
        memory."""
        key = (source, kernel, "cooperative")
        fn = self._functions.get(key)
        if fn is None:
            cubin = compile_source(source, self.arch, self.defines)
            with self.xp.cuda.Device(self.index):
                module = self.xp.RawModule(path=str(cubin.path), enable_cooperative_groups=True)
                fn = self._functions[key] = module.get_function(kernel)
        if shared_bytes > fn.max_dynamic_shared_size_bytes:
            fn.max_dynamic_shared_size_bytes = shared_bytes
        return fn

    def resident_blocks(self, source: str, kernel: str, block: int, shared_bytes: int) -> int:
        """How many blocks of `block` threads and `shared_bytes` of dynamic shared memory the
        whole device holds at once (the occupancy calculator's count per SM, times the SMs)."""
        fn = self.cooperative_function(source, kernel, shared_bytes)
        driver = self.xp.cuda.driver
        with self.xp.cuda.Device(self.index):
            per_sm = driver.occupancyMaxActiveBlocksPerMultiprocessor(
                fn.kernel.ptr, block, shared_bytes
            )
        return per_sm * self.sm_count

    def launch_grid(
        self,
        source: str,
        kernel: str,
        grid: int,
        block: int,
        args: Sequence[object],
        *,
        shared_bytes: int = 0,
        cooperative: bool = False,
    ) -> None:
        args = tuple(np.uint64(0) if a is None else a for a in args)
        with self.xp.cuda.Device(self.index):
            if cooperative:
                fn = self.cooperative_function(source, kernel, shared_bytes)
            else:
                fn = self.function(source, kernel)
            fn((grid,), (block,), args, shared_mem=shared_bytes)

    def launch(self, source: str, kernel: str, warps: int, args: Sequence[object]) -> None:
        per_block = BLOCK_THREADS // 32
        grid = max(1, min(-(-warps // per_block), self.sm_count * self.blocks_per_sm))
        # A null pointer crosses as a 64-bit zero.
        args = tuple(np.uint64(0) if a is None else a for a in args)
        with self.xp.cuda.Device(self.index):
            self.function(source, kernel)((grid,), (BLOCK_THREADS,), args)


@functools.cache
def _device(index: int) -> CupyDevice:
    return CupyDevice(index)


_CHOSEN: contextvars.ContextVar[Launcher | None] = contextvars.ContextVar(
    "fusebridge_cuda_launcher", default=None
)


@contextlib.contextmanager
def use_launcher(launcher: Launcher) -> Iterator[None]:
    """Runs the engine's calls in this context on `launcher`: the tests' CPU emulation of the
    kernels (numpy arrays), or a variant of the kernels timed by gpu_bench.tune. Not for
    users."""
    token = _CHOSEN.set(launcher)
    try:
        yield
    finally:
        _CHOSEN.reset(token)


def current_launcher(device: int | None = None) -> Launcher:
    """The launcher of CUDA device `device` (default: CuPy's current one), or the one chosen by
    `use_launcher`: for calls with no input array to take the device from."""
    chosen = _CHOSEN.get()
    if chosen is not None:
        return chosen
    cupy = _usable_cupy()
    return _device(cupy.cuda.Device().id if device is None else int(device))


_CUPY_WITH_GPU = None  # CuPy, once a call has found a GPU behind it (that stays true)


def _usable_cupy():
    """CuPy with a driver and a GPU behind it, or the engine's error saying what is missing
    (CuPy's own would come from deep inside a call, or not at all until a launch)."""
    global _CUPY_WITH_GPU
    if _CUPY_WITH_GPU is None:
        cupy = cupy_module()
        if not cupy.cuda.is_available():
            raise CudaUnavailableError("the cuda engine found no CUDA driver or GPU here")
        _CUPY_WITH_GPU = cupy
    return _CUPY_WITH_GPU


def launcher_for(op: str, name: str, x: object) -> tuple[Launcher, Any]:
    """(launcher, array) for an input of op: a CuPy array, or anything with
    __cuda_array_interface__ or __dlpack__ on a CUDA device, taken without a copy. Host arrays
    are refused: the engine makes no host round trips."""
    chosen = _CHOSEN.get()
    if chosen is not None:
        if not isinstance(x, chosen.xp.ndarray):
            raise ArgumentTypeError(f"{op}: {name} must be a {chosen.xp.__name__} array here")
        return chosen, x
    if isinstance(x, np.ndarray) or not (
        hasattr(x, "__cuda_array_interface__") or hasattr(x, "__dlpack__")
    ):
        raise ArgumentTypeError(
            f"{op}: {name} must be a CUDA device array (CuPy, or anything with "
            f"__cuda_array_interface__ or __dlpack__), got {type(x).__name__}; the cpu "
            "engine (fusebridge.kernels) takes host arrays"
        )
    cupy = _usable_cupy()
    if not isinstance(x, cupy.ndarray):
        try:
            x = cupy.asarray(x) if hasattr(x, "__cuda_array_interface__") else cupy.from_dlpack(x)
        except Exception as exc:
            raise ArgumentTypeError(f"{op}: {name} is not on a CUDA device: {exc}") from None
    return _device(x.device.id), x


def same_device(op: str, launcher: Launcher, name: str, x: object) -> Any:
    """Another input of the call, on the same device as the first."""
    other, arr = launcher_for(op, name, x)
    if other is not launcher:
        raise ArgumentTypeError(
            f"{op}: {name} is on {other.device}, the other inputs on {launcher.device}"
        )
    return arr
