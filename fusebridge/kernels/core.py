"""The compiled core `_C` and its process-wide settings: instruction set and threads."""

from __future__ import annotations

import ctypes
import importlib
from pathlib import Path

import numpy as np
import scipy_openblas32

from fusebridge.errors import ArgumentError, ArgumentTypeError, CoreImportError


def _load_openblas() -> None:
    # _C also carries an rpath to this library; loading it first covers installs where the
    # relative layout differs (editable installs, build trees).
    lib = Path(scipy_openblas32.get_lib_dir()) / f"lib{scipy_openblas32.get_library()}.so"
    if lib.exists():
        ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)


def _missing_core(exc: ImportError) -> CoreImportError:
    """Why `_C` did not import, in words a user can act on. The usual cause: Python started in
    the repository root after `pip install .` finds the source tree (sys.path[0]) before the
    install, and the source tree holds no built `_C`."""
    here = Path(__file__).parent
    root = here.parents[1]
    built = list(here.glob("_C.*"))
    if not built and (root / "pyproject.toml").is_file():
        return CoreImportError(
            f"you are importing fusebridge from its source tree at {root}, which has no "
            "compiled core (fusebridge/kernels/_C); run from another directory to use the "
            "installed fusebridge, or build the core in place with `pip install -e .` there"
        )
    return CoreImportError(f"fusebridge's compiled core in {here} did not load: {exc}")


_load_openblas()
# Every module reaches the core as `core._C`: this is the one import of it, so that a missing
# core is reported here, before any other kernels module half-imports the package.
try:
    # import_module: its error names the missing module, where `from fusebridge.kernels import
    # _C` inside the half-imported package blames a circular import.
    _C = importlib.import_module("fusebridge.kernels._C")
except ImportError as exc:
    raise _missing_core(exc) from exc

ISAS = ("scalar", "avx2", "avx512")


# The ISA setting lives in the compiled runtime (csrc/runtime.hpp), shared with the framework op
# libraries: set_isa here reaches their ops too. FUSEBRIDGE_ISA may lower the widest allowed
# (the process then behaves as on a CPU without the wider ones: an AVX2-only AMD Zen 3 on an
# AVX-512 machine, say); a value this CPU cannot run is an error at import.
_ISA_LIMIT = ISAS[_C.isa_limit()]


def available_isas() -> tuple[str, ...]:
    """The instruction sets this process can run, from the portable fallback up."""
    return ISAS[: ISAS.index(_ISA_LIMIT) + 1]


def isa() -> str:
    """The instruction set new primitives are created for."""
    return ISAS[_C.current_isa()]


def set_isa(name: str) -> None:
    """Force an instruction set, for the whole process (tests use it to run every path the CPU
    can)."""
    if name not in available_isas():
        raise ArgumentError(
            f"set_isa: name must be one of {available_isas()} on this CPU, got {name!r}"
        )
    _C.set_isa(ISAS.index(name))


# Extensions beside an ISA (csrc/isa.hpp): VNNI (VPDPBUSD: AVX512_VNNI for avx512 code,
# AVX-VNNI for avx2 code) and BF16 (VDPBF16PS: AVX512_BF16). The quantized GRU uses them where
# allowed and emulates them to the same bits where not; FUSEBRIDGE_ISA=avx512-novnni-nobf16 (or
# set_extensions(())) runs the emulation.
EXTENSIONS = ("vnni", "bf16")  # bit i of the core's mask


def _names(mask: int) -> tuple[str, ...]:
    return tuple(name for i, name in enumerate(EXTENSIONS) if mask >> i & 1)


def available_extensions() -> tuple[str, ...]:
    """The extensions this CPU runs for the current ISA, less those FUSEBRIDGE_ISA masks."""
    return _names(_C.cpu_extensions(_C.current_isa()) & _C.extension_limit())


def extensions() -> tuple[str, ...]:
    """The extensions new primitives use (within available_extensions())."""
    return _names(_C.current_extensions())


def set_extensions(names: tuple[str, ...] | list[str]) -> None:
    """Allow only these extensions (for the whole process; () emulates them all). A name
    FUSEBRIDGE_ISA masks is an error; one the current ISA lacks is simply unused."""
    if isinstance(names, str) or not all(n in EXTENSIONS for n in names):
        raise ArgumentError(
            f"set_extensions: names must be a sequence of {EXTENSIONS}, got {names!r}"
        )
    mask = sum(1 << EXTENSIONS.index(n) for n in set(names))
    if mask & ~_C.extension_limit():
        raise ArgumentError(
            f"set_extensions: FUSEBRIDGE_ISA masks {_names(mask & ~_C.extension_limit())}"
        )
    _C.set_extensions(mask)


def thread_cap() -> int:
    """The most threads set_num_threads accepts: the usable cores, or up to 8 times them within
    256 threads (why: csrc/runtime.cpp). OMP_NUM_THREADS, the count the core starts with when it
    is set, is lowered to it."""
    return _C.thread_cap()


def set_num_threads(n: int) -> None:
    """Threads for every kernel, BLAS included: GEMMs run as row slices on the kernels' pool
    (csrc/parallel.hpp), each a single-threaded OpenBLAS call, so OpenBLAS's own pool (kept at
    one thread) never competes with ours for the cores. n lies in [1, thread_cap()]."""
    op = "set_num_threads"
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        raise ArgumentTypeError(f"{op}: n must be an integer, got {type(n).__name__} {n!r}")
    cap = thread_cap()
    if not 1 <= n <= cap:
        raise ArgumentError(
            f"{op}: n must lie in [1, {cap}] (thread_cap() on this machine), got {n}"
        )
    _C.set_num_threads(int(n))


def get_num_threads() -> int:
    return _C.max_threads()


def blas_info() -> dict[str, object]:
    return {
        "library": scipy_openblas32.get_library(),
        "version": scipy_openblas32.__version__,
        "config": _C.blas_config().strip(),
        "threads": _C.max_threads(),
        "openblas_pool_threads": _C.blas_threads(),
    }


_C.set_num_threads(_C.max_threads())  # parks OpenBLAS's pool at one thread from the start
