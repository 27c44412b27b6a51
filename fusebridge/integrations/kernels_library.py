"""The compiled kernels as code outside fusebridge.kernels._C links them: the shared library
libfusebridge_kernels.so that CMake installs beside _C (fusebridge/kernels/lib), with the flags
it was compiled with, for the framework op libraries built on first use
(integrations/mxnet/op_library.py, integrations/paddle/op_library.py). An op library loads the
very copy _C loaded, so the process has one thread pool, ISA setting and primitive cache
(docs/design.md, "One kernels runtime per process")."""

from __future__ import annotations

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
    """The kernels as CMake compiled them for _C: the shared library installed beside _C
    (fusebridge/kernels/lib), and the flags from CMake's manifest that code linking it compiles
    and links with."""

    library: Path
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
        library = manifest.parent / spec["library"]
        flags = tuple(spec["compile_flags"]), tuple(spec["link_flags"])
        compiler = spec["compiler"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ExecutionError(
            f"fusebridge: the compiled kernels' manifest {manifest} is missing or unreadable "
            f"({exc}); `pip install` puts it and the kernels library beside "
            "fusebridge.kernels._C, in fusebridge/kernels/lib: reinstall fusebridge (or, "
            "where a built _C was copied into a source tree, copy that lib folder beside it)"
        ) from exc
    if not library.is_file():
        raise ExecutionError(
            f"fusebridge: the compiled kernels library {library} named by {manifest} is "
            "missing; reinstall fusebridge"
        )
    return KernelsLibrary(library, manifest, compiler, *flags)


def link_flags(kernels: KernelsLibrary) -> list[str]:
    """What an op library links with: the kernels' own link flags and the kernels library,
    found again at load time where it is installed (the loader then finds the copy _C loaded
    already, by its soname)."""
    directory = kernels.library.parent
    name = kernels.library.name.removeprefix("lib").removesuffix(".so")
    return [*kernels.link_flags, f"-L{directory}", f"-l{name}", f"-Wl,-rpath,{directory}"]


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
