"""The compiled kernels as code outside fusebridge.kernels._C links them: the static library
CMake installs beside _C (fusebridge/kernels/lib) with the flags it was compiled with, for the
framework op libraries built on first use (integrations/mxnet/op_library.py,
integrations/paddle/op_library.py; docs/design.md, "One native build")."""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from fusebridge import conventions
from fusebridge.errors import ExecutionError

# The kernels' headers, which the glues include.
KERNEL_HEADERS = Path(__file__).resolve().parents[1] / "kernels" / "csrc"
# Written by CMake (CMakeLists.txt) beside the kernels library it installs.
_MANIFEST_NAME = "fusebridge_kernels.json"


@dataclass(frozen=True)
class KernelsLibrary:
    """The kernels as CMake compiled them for _C: the static library installed beside _C
    (fusebridge/kernels/lib), and the flags from CMake's manifest that code linking it compiles
    and links with."""

    archive: Path
    manifest: Path
    compiler: str
    compile_flags: tuple[str, ...]
    link_flags: tuple[str, ...]


def installed_kernels() -> KernelsLibrary:
    """The kernels library that the imported fusebridge.kernels._C was built with."""
    from fusebridge.kernels import core

    manifest = Path(core._C.__file__).resolve().parent / "lib" / _MANIFEST_NAME
    try:
        spec = json.loads(manifest.read_text())
        archive = manifest.parent / spec["library"]
        flags = tuple(spec["compile_flags"]), tuple(spec["link_flags"])
        compiler = spec["compiler"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ExecutionError(
            f"fusebridge: the compiled kernels' manifest {manifest} is missing or unreadable "
            f"({exc}); `pip install` puts it and the kernels library beside "
            "fusebridge.kernels._C, in fusebridge/kernels/lib: reinstall fusebridge (or, "
            "where a built _C was copied into a source tree, copy that lib folder beside it)"
        ) from exc
    if not archive.is_file():
        raise ExecutionError(
            f"fusebridge: the compiled kernels library {archive} named by {manifest} is "
            "missing; reinstall fusebridge"
        )
    return KernelsLibrary(archive, manifest, compiler, *flags)


def compiler_for(kernels: KernelsLibrary) -> str:
    """$CXX, else the compiler CMake built the kernels with where it exists here, else g++."""
    if "CXX" in os.environ:
        return os.environ["CXX"]
    return kernels.compiler if Path(kernels.compiler).is_file() else "g++"


def library_dir(chosen: str | os.PathLike | None, env: str, kind: str, key: str) -> Path:
    """Where a framework's op library is built and kept: `chosen`, else $env, else
    ~/.cache/fusebridge/<kind>-<version>-<key> ($XDG_CACHE_HOME in place of ~/.cache)."""
    chosen = chosen or os.environ.get(env)
    if chosen:
        return Path(chosen).expanduser().resolve()
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "fusebridge"
    return root / f"{kind}-{conventions.PACKAGE_VERSION}-{key}"


def build_key(files: Iterable[Path], meta: Iterable[str]) -> str:
    """Hash of the files' names and bytes and of `meta`: a changed input means a new build."""
    h = hashlib.sha256()
    for f in files:
        h.update(f.name.encode() + b"\0" + f.read_bytes() + b"\0")
    h.update("\0".join(meta).encode())
    return h.hexdigest()[:16]


def follow_thread_count(library: Path) -> None:
    """The loaded op library at `library` takes fusebridge.kernels' thread count now and at every
    set_num_threads: it holds its own copy of the kernels' settings (csrc/glue.hpp)."""
    from fusebridge.kernels import core

    # The framework loaded it already: this finds the same copy (dlopen counts references).
    setter = ctypes.CDLL(str(library)).fusebridge_set_num_threads
    setter.argtypes, setter.restype = [ctypes.c_int], None
    core.follow_thread_count(setter)
