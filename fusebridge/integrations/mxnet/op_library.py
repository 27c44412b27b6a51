"""fusebridge's ops inside a running MXNet 1.9, natively: a C++ library built on first use (the
lib_api.h it is built against ships with the mxnet wheel, MX_LIBRARY_VERSION 11), cached, and
loaded with mx.library.load. Only its glue (csrc/mxnet_ops.cc) and lib_api.cc are compiled
here; the kernels are the shared library fusebridge.kernels._C loads, linked with the flags
CMake wrote next to it, so the ops share _C's thread pool, ISA setting and primitive cache
(docs/design.md, "One kernels runtime per process"). It registers

- `fusebridge_dropout(x, p=0.5, seed, offset=0, axes=(), mode='upscale_in_train',
  is_test=False) -> (y, mask)` with backward: the bits of fusebridge.kernels.dropout;
- `fusebridge_fusion_gru(x, seq_lens, wx, wh, bias_x, bias_hc[, h0], direction='forward',
  layout='tnc', linear_before_reset=False, origin_mode=True, activation='tanh',
  gate_activation='sigmoid', has_h0=False) -> y`, with the weights packed once by
  `fusebridge.kernels.pack_gru_weights` (save_mxnet writes them so), for inference: its
  backward raises an
  MXNetError when a gradient is computed (registered so that gluon's SymbolBlock, which
  builds the backward graph up front, takes it).

See csrc/mxnet_ops.cc for the exact contracts. `register` is fusebridge.integrations.mxnet's.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from fusebridge.errors import ExecutionError
from fusebridge.integrations.kernels_library import (
    KERNEL_HEADERS,
    KernelsLibrary,
    build_key,
    compiler_for,
    installed_kernels,
    library_dir,
    link_flags,
)
from fusebridge.kernels.arguments import as_flag

LIBRARY_NAME = "libfusebridge_mxnet.so"
_KEY_NAME = "libfusebridge_mxnet.key"
_GLUE = Path(__file__).resolve().parent / "csrc" / "mxnet_ops.cc"
# Only lib_api's C entry points leave the library: the glue's own symbols (and lib_api's C++
# helpers) must not bind to, or be bound by, another MXNet library's.
_EXPORTS = "{ global: _op*; _part*; _pass*; _msg*; initialize; local: *; };\n"
# Measured on a 2-core VM (the glue and lib_api.cc compiled in parallel, then the link).
_BUILD_ESTIMATE = "about 10 s"

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


def _build_key(mx: object, lib_api_cc: Path, include: Path, kernels: KernelsLibrary) -> str:
    """Hash of everything the library is made from (the glue, the kernels library and its
    headers and flags, MXNet's lib_api), so a changed input or MXNet rebuilds."""
    files = [_GLUE, *sorted(KERNEL_HEADERS.glob("*.hpp")), kernels.library, kernels.manifest]
    files += [include / "mxnet" / "lib_api.h", lib_api_cc]
    meta = [mx.__version__, compiler_for(kernels), _EXPORTS, str(kernels.library)]
    return build_key(files, meta)


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


def _build(target: Path, include: Path, lib_api_cc: Path, kernels: KernelsLibrary) -> None:
    """Compiles the glue and MXNet's lib_api.cc with the kernels' flags and links them with the
    kernels library: no kernel source is compiled here."""
    cxx = compiler_for(kernels)
    includes = [f"-I{include}", f"-I{KERNEL_HEADERS}"]
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=".build-") as tmp:
        work = Path(tmp)
        jobs = []
        for src in (lib_api_cc, _GLUE):
            obj = work / f"{src.stem}.o"
            jobs.append(
                (obj, [cxx, *kernels.compile_flags, *includes, "-c", str(src), "-o", str(obj)])
            )
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            errors = [e for e in pool.map(_run, [cmd for _, cmd in jobs]) if e]
        if not errors:
            exports = work / "exports.map"
            exports.write_text(_EXPORTS)
            link = [cxx, "-shared", *(str(obj) for obj, _ in jobs), *link_flags(kernels)]
            link += ["-o", str(work / LIBRARY_NAME), f"-Wl,--version-script={exports}"]
            error = _run(link)
            errors = [error] if error else []
        if errors:
            raise ExecutionError(f"fusebridge: building the MXNet op library failed:\n{errors[0]}")
        # Atomic: a concurrent process loads either the old library or the new, never half.
        os.replace(work / LIBRARY_NAME, target)


def register(cache_dir: str | os.PathLike | None = None, force_rebuild: bool = False) -> Path:
    """Loads fusebridge's MXNet op library into the running MXNet, building it first when the
    cache lacks it; returns its path. The cache directory is `cache_dir`, else
    $FUSEBRIDGE_MXNET_CACHE, else ~/.cache/fusebridge/mxnet-<version>-<hash of the glue, the
    kernels library and the MXNet version>. Idempotent within a process: MXNet cannot unload
    ops, so once loaded later calls (force_rebuild included) return the loaded library's
    path."""
    global _loaded
    force_rebuild = as_flag(force_rebuild, "mxnet.register", "force_rebuild")
    with _lock:
        if _loaded is not None:
            return _loaded
        import mxnet as mx

        include, lib_api_cc = _mxnet_files(mx)
        kernels = installed_kernels()
        key = _build_key(mx, lib_api_cc, include, kernels)
        directory = library_dir(cache_dir, "FUSEBRIDGE_MXNET_CACHE", "mxnet", key)
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
            _build(path, include, lib_api_cc, kernels)
            key_file.write_text(key + "\n")
        try:
            mx.library.load(str(path), verbose=False)
        except mx.base.MXNetError as exc:
            raise ExecutionError(f"fusebridge: MXNet could not load {path}: {exc}") from exc
        _loaded = path
        return path


__all__ = ["LIBRARY_NAME", "register"]
