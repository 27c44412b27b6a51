"""Runs CUDA kernels on the CPU, for tests on machines without a GPU: g++ compiles the kernel
sources unchanged after tests/cuda/emulator/cuda_emulator.hpp, into the driver
tests/cuda/emulator/harness.cpp, under ASan and UBSan; each launch is one run of that
executable, so that a sanitizer's report or the emulator's abort (a lane that left before a
shuffle, a deadlock, ...) becomes an EmulatorError instead of ending the test session.

    exe = build_harness([Path("a.cu")], ["my_kernel"], [Path("include")], tmp_path)
    Emulator(exe).launch("my_kernel", grid=4, block=128, args=[np.int32(n), x, y, None])

Arrays are device memory: the kernel reads them, and what it writes lands in them. Scalars
must be numpy scalars of 4 or 8 bytes (np.int32, np.float64, ...), the width of the kernel's
parameter. The blocks of a launch run one after another; with cooperative=True they all run
at once (16384 threads at most), so that they may wait for each other at a grid barrier whose
spin loop calls __nanosleep (a spin wait that never ends is an EmulatorError). shared_bytes is
each block's dynamic shared memory, which the kernel reaches through FB_DYNAMIC_SHARED(T,
name); it starts as 0xA5 bytes (see the header):

    Emulator(exe).launch("step", grid=4, block=64, args=[...], shared_bytes=4096,
                         cooperative=True)"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

EMULATOR_DIR = Path(__file__).resolve().parents[1] / "cuda" / "emulator"
HEADER = EMULATOR_DIR / "cuda_emulator.hpp"
HARNESS = EMULATOR_DIR / "harness.cpp"

SANITIZE_FLAGS = ("-fsanitize=address,undefined", "-fno-sanitize-recover=all")
BASE_FLAGS = ("-std=c++17", "-O1", "-g", "-fno-omit-frame-pointer")
# Reports, not aborts: the report reaches stderr and the exit status is non-zero either way.
SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=0",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}
SCALAR_TYPES = (np.int32, np.uint32, np.float32, np.int64, np.uint64, np.float64)
MAGIC = b"FBEMU2\0\0"
# ASan's notice at the first swapcontext of every run; the emulator annotates its switches.
ASAN_FIBER_WARNING = "ASan doesn't fully support makecontext/swapcontext"


class EmulatorError(RuntimeError):
    """A launch failed: the message names the kernel and holds the harness's stderr (the
    emulator's own diagnosis, or an AddressSanitizer / UBSan report)."""


class EmulatorBuildError(RuntimeError):
    """g++ refused the harness with the kernel sources; the message holds its output."""


def compiler() -> str | None:
    """The g++ the emulator builds with, None where there is none."""
    return shutil.which("g++")


def _c_string(path: Path) -> str:
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def build_harness(
    kernel_sources: Sequence[Path],
    kernels: Sequence[str],
    include_dirs: Sequence[Path],
    workdir: Path,
    sanitize: bool = True,
    defines: Sequence[str] = (),
) -> Path:
    """Compiles the harness with `kernel_sources` (included in order, after the emulator
    header; their own #include "..." resolve next to them, then in `include_dirs`), exposing
    the extern "C" kernels named in `kernels`, with `defines` ("NAME=value") set. The
    executable is cached in `workdir` under a hash of the preprocessed translation unit and
    the flags, so a change to any header the sources include also rebuilds it."""
    cxx = compiler()
    if cxx is None:
        raise EmulatorBuildError("the CUDA emulator needs g++, which is not on PATH")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    sources = [Path(s).resolve() for s in kernel_sources]
    listing = "".join(f"#include {_c_string(s)}\n" for s in sources)
    registry = "".join(f"EMU_KERNEL({k})\n" for k in kernels)
    # The generated files live in a folder named after their text, so that builds of other
    # kernel sets in the same workdir never overwrite the files a cached build came from.
    gen = workdir / ("emu-gen-" + hashlib.sha256((listing + registry).encode()).hexdigest()[:16])
    gen.mkdir(exist_ok=True)
    _write(gen / "sources.inc", listing)
    _write(gen / "registry.inc", registry)
    flags = [*BASE_FLAGS, *(SANITIZE_FLAGS if sanitize else ()), *(f"-D{d}" for d in defines)]
    unit = [
        f"-I{EMULATOR_DIR}",
        *(f"-I{Path(d).resolve()}" for d in include_dirs),
        f"-DEMU_SOURCES_FILE={_c_string(gen / 'sources.inc')}",
        f"-DEMU_REGISTER_FILE={_c_string(gen / 'registry.inc')}",
        str(HARNESS),
    ]
    pre = _compile([cxx, *flags, "-E", *unit], "preprocessing")
    key = hashlib.sha256(" ".join(flags).encode() + b"\0" + pre).hexdigest()[:16]
    exe = workdir / f"emu-harness-{key}"
    if exe.exists():
        return exe
    # Built under a private name, then renamed: a concurrent build never sees half a file.
    part = workdir / f"emu-harness-{key}.{os.getpid()}.part"
    _compile([cxx, *flags, *unit, "-o", str(part)], "compiling")
    os.replace(part, exe)
    return exe


def _write(path: Path, text: str) -> None:
    """Writes whole or not at all: another process may be reading the same file."""
    if path.exists() and path.read_text() == text:
        return
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    part.write_text(text)
    os.replace(part, path)


def _compile(cmd: list[str], what: str) -> bytes:
    done = subprocess.run(cmd, capture_output=True)
    if done.returncode != 0:
        raise EmulatorBuildError(
            f"{what} the CUDA emulator harness failed:\n$ {' '.join(cmd)}\n"
            + done.stderr.decode(errors="replace")
        )
    return done.stdout


def _dim3(v: int | Sequence[int], what: str) -> tuple[int, int, int]:
    dims = (v,) if isinstance(v, (int, np.integer)) else tuple(v)
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"{what} has 1 to 3 dimensions, not {len(dims)}")
    dims = tuple(int(d) for d in dims) + (1,) * (3 - len(dims))
    if any(not 1 <= d < 2**32 for d in dims):
        raise ValueError(f"{what} {dims}: every dimension is 1 .. 2**32 - 1")
    return dims


def _address(a: np.ndarray) -> int:
    return a.__array_interface__["data"][0]


def _root(a: np.ndarray, i: int) -> np.ndarray:
    """The array that owns a's memory (following .base through views)."""
    root = a
    while isinstance(root.base, np.ndarray):
        root = root.base
    if a.dtype.hasobject or root.dtype.hasobject:
        raise TypeError(f"argument {i}: arrays of Python objects are not device memory")
    if not a.dtype.isnative:
        raise TypeError(f"argument {i}: {a.dtype} is not in the machine's byte order")
    if not (a.flags.c_contiguous and root.flags.c_contiguous):
        raise TypeError(
            f"argument {i}: device memory is a C-contiguous array or a C-contiguous view of "
            "one; pass np.ascontiguousarray(...) of it"
        )
    return root


def _scalar(v: object, i: int) -> bytes:
    if isinstance(v, SCALAR_TYPES):
        raw = np.asarray(v).astype(v.dtype.newbyteorder("<")).tobytes()
        return struct.pack("<BB", 2, len(raw)) + raw
    raise TypeError(
        f"argument {i}: {type(v).__name__} is not a kernel argument; pass a numpy array, None "
        "(a null pointer) or a numpy scalar whose width is the kernel parameter's "
        "(np.int32, np.uint32, np.float32, np.int64, np.uint64, np.float64)"
    )


class Emulator:
    """Launches the kernels of one harness executable (build_harness)."""

    def __init__(
        self, harness: Path, env: Mapping[str, str] | None = None, timeout: float = 300.0
    ) -> None:
        self.harness = Path(harness)
        # The sanitizer options override the inherited environment's (a report must end the
        # run with a message on stderr); `env` overrides both.
        self.env = {**os.environ, **SANITIZER_ENV, **(env or {})}
        self.timeout = timeout

    def launch(
        self,
        name: str,
        grid: int | Sequence[int],
        block: int | Sequence[int],
        args: Sequence[object],
        *,
        shared_bytes: int = 0,
        cooperative: bool = False,
    ) -> None:
        """Runs kernel `name` over `grid` x `block` with `args` (numpy arrays as pointers to
        their data, None as a null pointer, numpy scalars by value). Views of one array share
        its memory in the kernel, as they do on the host; afterwards every array the kernel
        could reach holds what it wrote. What the kernel printed goes to sys.stdout.
        `shared_bytes` of dynamic shared memory per block; `cooperative` runs every block at
        once (cudaLaunchCooperativeKernel)."""
        if isinstance(shared_bytes, (bool, np.bool_)) or not isinstance(
            shared_bytes, (int, np.integer)
        ):
            raise TypeError(f"shared_bytes is an int, not {type(shared_bytes).__name__}")
        if not 0 <= shared_bytes < 2**64:
            raise ValueError(f"shared_bytes {shared_bytes} is not 0 .. 2**64 - 1")
        if not isinstance(cooperative, (bool, np.bool_)):
            raise TypeError(f"cooperative is a bool, not {type(cooperative).__name__}")
        roots: list[np.ndarray] = []
        index: dict[int, int] = {}  # id(root) -> buffer number
        encoded = []
        for i, a in enumerate(args):
            if a is None:
                encoded.append(struct.pack("<B", 1))
            elif isinstance(a, np.ndarray):
                root = _root(a, i)
                b = index.setdefault(id(root), len(roots))
                if b == len(roots):
                    roots.append(root)
                offset = _address(a) - _address(root)
                if not 0 <= offset <= root.nbytes - a.nbytes:
                    raise TypeError(f"argument {i}: the view lies outside its base array")
                encoded.append(struct.pack("<BIQ", 0, b, offset))
            else:
                encoded.append(_scalar(a, i))
        raw_name = name.encode()
        call = [MAGIC, struct.pack("<I", len(raw_name)), raw_name]
        call.append(struct.pack("<6I", *_dim3(grid, "grid"), *_dim3(block, "block")))
        call.append(struct.pack("<QB", int(shared_bytes), bool(cooperative)))
        call.append(struct.pack("<I", len(roots)))
        for root in roots:
            call += [struct.pack("<Q", root.nbytes), _bytes_of(root).tobytes()]
        call += [struct.pack("<I", len(encoded)), *encoded]

        out = self._run(name, b"".join(call))
        if len(out) != sum(r.nbytes for r in roots):
            raise EmulatorError(f"kernel {name}: the harness returned {len(out)} bytes")
        pos = 0
        for root in roots:
            new = np.frombuffer(out, np.uint8, root.nbytes, pos)
            pos += root.nbytes
            old = _bytes_of(root)
            if not np.array_equal(old, new):
                if not root.flags.writeable:
                    raise EmulatorError(f"kernel {name} wrote into a read-only array")
                old[...] = new

    def _run(self, name: str, call: bytes) -> bytes:
        """One run of the harness: the buffers' bytes after the launch."""
        with tempfile.TemporaryDirectory(prefix="emu-launch-") as tmp:
            call_file, out_file = Path(tmp) / "call.bin", Path(tmp) / "out.bin"
            call_file.write_bytes(call)
            try:
                done = subprocess.run(
                    [str(self.harness), str(call_file), str(out_file)],
                    env=self.env,
                    capture_output=True,
                    timeout=self.timeout,
                )
            except subprocess.TimeoutExpired as exc:
                raise EmulatorError(
                    f"kernel {name} ran past {self.timeout} s (an endless loop?)"
                ) from exc
            printed = done.stdout.decode(errors="replace")
            if printed:
                sys.stdout.write(printed)
            if done.returncode != 0:
                lines = done.stderr.decode(errors="replace").splitlines(keepends=True)
                raise EmulatorError(
                    f"kernel {name} failed (exit status {done.returncode}):\n"
                    + "".join(line for line in lines if ASAN_FIBER_WARNING not in line)
                )
            return out_file.read_bytes()


def _bytes_of(root: np.ndarray) -> np.ndarray:
    """The memory of a C-contiguous array as a flat uint8 view (a view: writes land in it)."""
    return root.reshape(-1).view(np.uint8)


class EmulatedLauncher:
    """fusebridge.cuda.device's Launcher on the emulator: numpy arrays for device memory, and a
    launch shape of our choosing (the kernels must give the same bits for any)."""

    xp = np

    def __init__(self, emulator: Emulator, block: int, max_grid: int, resident: int = 4) -> None:
        self.emulator, self.block, self.max_grid = emulator, block, max_grid
        self.resident = resident
        # Part of every descriptor, so primitives cached for one shape never serve another.
        self.device = f"emulated:{block}x{max_grid}r{resident}"
        self.launches: list[tuple[str, int, int]] = []

    def launch(self, source: str, kernel: str, warps: int, args: Sequence[object]) -> None:
        grid = max(1, min(-(-warps // (self.block // 32)), self.max_grid))
        self.launches.append((kernel, grid, self.block))
        self.emulator.launch(kernel, grid, self.block, args)

    def launch_grid(self, source, kernel, grid, block, args, *, shared_bytes=0, cooperative=False):
        self.launches.append((kernel, grid, block))
        self.emulator.launch(
            kernel, grid, block, args, shared_bytes=shared_bytes, cooperative=cooperative
        )

    def resident_blocks(self, source, kernel, block, shared_bytes):
        # As a GPU of `resident` SMs holding one such block each: the callers' grids then
        # differ from test to test as they do from one GPU model to another.
        return self.resident

    def empty(self, shape, dtype, *, zeros=False):
        # Poisoned, not zero: a kernel that leaves an element unwritten shows.
        if zeros:
            return np.zeros(shape, dtype)
        out = np.empty(shape, dtype)
        out.reshape(-1).view(np.uint8)[...] = 0xA5
        return out

    def upload(self, host):
        return np.array(host, copy=True)

    def download(self, device_array):
        return np.array(device_array, copy=True)
