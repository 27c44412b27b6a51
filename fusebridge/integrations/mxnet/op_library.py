"""fusebridge's ops inside a running MXNet 1.9, natively: a C++ library built against the
lib_api.h the mxnet wheel ships (MX_LIBRARY_VERSION 11), compiled with g++ on first use, cached,
and loaded with mx.library.load. It registers

- `fusebridge_dropout(x, p=0.5, seed, offset=0, axes=(), mode='upscale_in_train',
  is_test=False) -> (y, mask)` with backward: the bits of fusebridge.kernels.dropout;
- `fusebridge_fusion_gru(x, seq_lens, wx, wh, bias, bias_h[, h0], direction='forward',
  layout='tnc', linear_before_reset=False, origin_mode=True, activation='tanh',
  gate_activation='sigmoid', has_h0=False) -> y`, for inference: its backward raises an
  MXNetError when a gradient is computed (registered so that gluon's SymbolBlock, which
  builds the backward graph up front, takes it).

See csrc/mxnet_ops.cc for the exact contracts. `register` is fusebridge.integrations.mxnet's.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fusebridge.errors import ExecutionError

LIBRARY_NAME = "libfusebridge_mxnet.so"
_KEY_NAME = "libfusebridge_mxnet.key"
_CSRC = Path(__file__).resolve().parent / "csrc"
_KERNELS = Path(__file__).resolve().parents[2] / "kernels" / "csrc"

# The kernel sources _C is built from (CMakeLists.txt) minus the nanobind glue and the CRF, each
# ISA's file with that ISA's flags only: isa.cpp picks the widest the CPU runs, at run time.
_AVX2 = ("-mavx2", "-mfma", "-mbmi2", "-mf16c")
_AVX512 = ("-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", *_AVX2)
_KERNEL_SOURCES = {  # slowest first: the build runs them in parallel in this order
    "gru_avx512.cpp": _AVX512,
    "gru_scalar.cpp": (),
    "gru_avx2.cpp": _AVX2,
    "dropout_avx512.cpp": _AVX512,
    "dropout_avx2.cpp": _AVX2,
    "gru.cpp": (),
    "dropout.cpp": (),
    "dropout_scalar.cpp": (),
    "runtime.cpp": (),
    "isa.cpp": (),
}
_CXXFLAGS = ("-O3", "-std=c++17", "-fopenmp", "-fPIC")
# Only lib_api's C entry points leave the library: our copy of the kernels must not bind to (or
# be bound by) the same symbols in fusebridge.kernels._C or another MXNet library.
_EXPORTS = "{ global: _op*; _part*; _pass*; _msg*; initialize; local: *; };\n"
# Measured on a 2-core VM (parallel compile, then link).
_BUILD_ESTIMATE = "about 20 s"

_lock = threading.Lock()
_loaded: Path | None = None


def _mxnet_files(mx: object) -> tuple[Path, Path]:
    root = Path(mx.__file__).resolve().parent
    include, lib_api_cc = root / "include", root / "src" / "lib_api.cc"
    if not (include / "mxnet" / "lib_api.h").is_file() or not lib_api_cc.is_file():
        raise ExecutionError(
            f"fusebridge: the mxnet install at {root} lacks include/mxnet/lib_api.h or "
            "src/lib_api.cc, which the op library is built against (the mxnet 1.9 wheels "
            "ship both)"
        )
    return include, lib_api_cc


def _build_key(mx: object, lib_api_cc: Path, include: Path, openblas_lib: str) -> str:
    """Hash of everything the library is made from, so a changed source or MXNet rebuilds."""
    h = hashlib.sha256()
    files = sorted(_CSRC.rglob("*")) + sorted(_KERNELS.glob("*.hpp"))
    files += [_KERNELS / name for name in _KERNEL_SOURCES]
    files += [include / "mxnet" / "lib_api.h", lib_api_cc]
    for f in files:
        if f.is_file():
            h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    meta = [mx.__version__, _compiler(), *_CXXFLAGS, repr(_KERNEL_SOURCES), _EXPORTS, openblas_lib]
    h.update("\0".join(meta).encode())
    return h.hexdigest()[:16]


def _compiler() -> str:
    return os.environ.get("CXX", "g++")


def _default_dir(key: str) -> Path:
    import fusebridge

    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fusebridge"
    return root / f"mxnet-{fusebridge.__version__}-{key}"


def _run(cmd: list[str]) -> str | None:
    """None on success, else the command and the compiler's last lines."""
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True)
    except OSError as exc:  # no such compiler
        return f"$ {' '.join(cmd)}\n{exc}"
    if proc.returncode == 0:
        return None
    tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-30:])
    return f"$ {' '.join(cmd)}\n{tail}"


def _build(target: Path, include: Path, lib_api_cc: Path) -> None:
    import scipy_openblas32

    blas_include, blas_lib = scipy_openblas32.get_include_dir(), scipy_openblas32.get_lib_dir()
    cxx = _compiler()
    includes = [f"-I{include}", f"-I{_KERNELS}", f"-I{blas_include}"]
    sources = [(lib_api_cc, ()), (_CSRC / "mxnet_ops.cc", ())]
    sources += [(_KERNELS / name, flags) for name, flags in _KERNEL_SOURCES.items()]
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        work = Path(tmp)
        jobs = []
        for i, (src, flags) in enumerate(sources):
            obj = work / f"{i:02d}_{src.stem}.o"
            jobs.append((obj, [cxx, *_CXXFLAGS, *flags, *includes, "-c", str(src), "-o", str(obj)]))
        with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:
            errors = [e for e in pool.map(_run, [cmd for _, cmd in jobs]) if e]
        if not errors:
            exports = work / "exports.map"
            exports.write_text(_EXPORTS)
            link = [cxx, "-shared", "-fopenmp", *(str(obj) for obj, _ in jobs)]
            link += ["-o", str(work / LIBRARY_NAME), f"-L{blas_lib}"]
            link += [f"-l{scipy_openblas32.get_library()}", f"-Wl,-rpath,{blas_lib}"]
            link += [f"-Wl,--version-script={exports}"]
            error = _run(link)
            errors = [error] if error else []
        if errors:
            raise ExecutionError(f"fusebridge: building the MXNet op library failed:\n{errors[0]}")
        # Atomic: a concurrent process loads either the old library or the new, never half.
        os.replace(work / LIBRARY_NAME, target)


def register(cache_dir: str | os.PathLike | None = None, force_rebuild: bool = False) -> Path:
    """Loads fusebridge's MXNet op library into the running MXNet, building it first when the
    cache lacks it; returns its path. The cache directory is `cache_dir`, else
    $FUSEBRIDGE_MXNET_CACHE, else ~/.cache/fusebridge/mxnet-<version>-<hash of the sources and
    the MXNet version>. Idempotent within a process: MXNet cannot unload ops, so once loaded
    later calls (force_rebuild included) return the loaded library's path."""
    global _loaded
    with _lock:
        if _loaded is not None:
            return _loaded
        import mxnet as mx
        import scipy_openblas32

        include, lib_api_cc = _mxnet_files(mx)
        key = _build_key(mx, lib_api_cc, include, scipy_openblas32.get_lib_dir())
        chosen = cache_dir or os.environ.get("FUSEBRIDGE_MXNET_CACHE")
        directory = Path(chosen).expanduser().resolve() if chosen else _default_dir(key)
        path, key_file = directory / LIBRARY_NAME, directory / _KEY_NAME
        # A directory given by the caller may hold a library built from other sources: the key
        # beside it says which.
        fresh = path.is_file() and key_file.is_file() and key_file.read_text().strip() == key
        if force_rebuild or not fresh:
            directory.mkdir(parents=True, exist_ok=True)
            print(
                f"fusebridge: building the MXNet op library ({_BUILD_ESTIMATE}, once) into "
                f"{directory}",
                file=sys.stderr,
                flush=True,
            )
            _build(path, include, lib_api_cc)
            key_file.write_text(key + "\n")
        try:
            mx.library.load(str(path), verbose=False)
        except mx.base.MXNetError as exc:
            raise ExecutionError(f"fusebridge: MXNet could not load {path}: {exc}") from exc
        _loaded = path
        return path


__all__ = ["LIBRARY_NAME", "register"]
