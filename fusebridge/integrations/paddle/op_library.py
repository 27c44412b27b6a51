"""fusebridge's ops inside a running Paddle, natively: Paddle custom operators (its wheel ships
paddle/extension.h), built on first use by paddle.utils.cpp_extension from the glue
(csrc/paddle_ops.cc) linked with the kernels library fusebridge.kernels._C loads (no kernel
source is compiled here, and the ops share _C's thread pool, ISA setting and primitive cache;
docs/design.md, "One kernels runtime per process"), cached on disk, and registered in the
process: dygraph, static programs and Paddle Inference see them.

- `fusebridge_dropout(X, Key; p, mode, is_test, axes, save_mask) -> (Out, Mask)` with its grad
  op: the bits of fusebridge.kernels.dropout for Key = (seed, offset); the grad reads the
  1-bit mask, or with save_mask false regenerates the bits from Key.
- `fusebridge_softmax_dropout(X, Key; p, mode, is_test, axis, save_mask) -> (Out, Mask)`
  with its grad op, which recomputes the probabilities from X.
- `fusebridge_matmul_dropout(A, B, Key; p, mode, is_test, transpose_a, transpose_b,
  save_mask) -> (Out, Mask)` with its grad op (Paddle's matmul on the dropped-out gradient).
- `fusebridge_fusion_gru(X, SeqLens, Wx, Wh, BiasX, BiasHc[, H0]; direction, layout,
  linear_before_reset, origin_mode, activation, gate_activation) -> Y`, forward only, with the
  weights packed once by `fusebridge.kernels.pack_gru_weights` (save_paddle writes them so, as
  persistable parameters): no call packs them again.

See csrc/paddle_ops.cc for the exact contracts.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

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

MODULE_NAME = "fusebridge_paddle_ops"
_GLUE = Path(__file__).resolve().parent / "csrc" / "paddle_ops.cc"
# Measured on a 2-core VM: Paddle's headers make the one file slow to compile.
_BUILD_ESTIMATE = "about 15 s"

_lock = threading.Lock()
_module: ModuleType | None = None


def _key(paddle: ModuleType, kernels: KernelsLibrary) -> str:
    """Hash of what the library is made from: the glue, the kernels library with its headers
    and flags, Paddle's version and the compiler."""
    files = [_GLUE, *sorted(KERNEL_HEADERS.glob("*.hpp")), kernels.library, kernels.manifest]
    return build_key(files, [paddle.__version__, compiler_for(kernels), str(kernels.library)])


def register(cache_dir: str | os.PathLike | None = None) -> ModuleType:
    """Builds the op library when the cache lacks it, loads it into the running Paddle and
    returns the module of its ops (paddle.utils.cpp_extension's: `fusebridge_dropout(x, key, p,
    mode, is_test, axes, save_mask)`, `fusebridge_softmax_dropout(...)`,
    `fusebridge_matmul_dropout(...)` and
    `fusebridge_fusion_gru(...)`, in dygraph and static
    mode). The cache is `cache_dir`, else $FUSEBRIDGE_PADDLE_CACHE, else
    ~/.cache/fusebridge/paddle-<version>-<hash of the glue, the kernels and Paddle's version>.
    Once per process: later calls return the loaded module."""
    global _module
    with _lock:
        if _module is not None:
            return _module
        import paddle

        with warnings.catch_warnings():  # "No ccache found", at import
            warnings.filterwarnings("ignore", "No ccache found")
            from paddle.utils import cpp_extension

        kernels = installed_kernels()
        key = _key(paddle, kernels)
        directory = library_dir(cache_dir, "FUSEBRIDGE_PADDLE_CACHE", "paddle", key)
        directory.mkdir(parents=True, exist_ok=True)
        if not any(directory.glob(f"{MODULE_NAME}/*.so")):
            print(
                f"fusebridge: building the Paddle op library ({_BUILD_ESTIMATE}, once) into "
                f"{directory}",
                file=sys.stderr,
                flush=True,
            )
        log: list[str] = []
        try:
            with _captured(log), _environ("CXX", compiler_for(kernels)):
                _module = cpp_extension.load(
                    name=MODULE_NAME,
                    sources=[str(_GLUE)],
                    extra_cxx_cflags=[*kernels.compile_flags, f"-I{KERNEL_HEADERS}"],
                    extra_ldflags=link_flags(kernels),
                    build_directory=str(directory),
                    verbose=False,
                )
        except (Exception, SystemExit) as exc:  # setuptools exits on a failed compile
            tail = "\n".join("".join(log).strip().splitlines()[-30:])
            raise ExecutionError(
                f"fusebridge: building or loading the Paddle op library in {directory} "
                f"failed: {exc!r}\n{tail}"
            ) from exc
        return _module


@contextlib.contextmanager
def _environ(name: str, value: str) -> Iterator[None]:
    """$name = value for the duration (unless it is set already)."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)


@contextlib.contextmanager
def _captured(log: list[str]) -> Iterator[None]:
    """stdout and stderr, down to the file descriptors (cpp_extension compiles in a child
    python that logs each setuptools step), go to `log` instead of the terminal: a failed
    build quotes their end."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    with tempfile.TemporaryFile(mode="w+") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", "No ccache found")
                yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            log.append(sink.read())


__all__ = ["MODULE_NAME", "register"]
