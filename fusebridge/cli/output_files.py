"""Files named after a model's values (`fusebridge run -o DIR` writes DIR/<output>.npy): the
names come from the model file, so they are encoded before they become file names, and the
files are written so that nothing lands outside DIR.

The encoding: every byte of the name's UTF-8 outside [A-Za-z0-9._-] becomes %XX (upper-case
hex), as does a leading '.' and the first letter of a name that Windows reserves (CON, NUL,
COM1, ... before the first '.'). So `../../x` -> `%2E.%2F..%2Fx`, `a/b` -> `a%2Fb`, `` is
refused; distinct names give distinct files. Two names whose files differ only in case (`Y`,
`y`) would be one file on a case-insensitive file system, and a name whose files would be
longer than 255 bytes cannot be written: both are refused before anything is written.

Writing: each file goes to a new temporary file in DIR (created with O_EXCL, so never through
a link), then is renamed over the final name: a symlink or hard link planted in DIR under that
name is replaced, never written through, and a file is never seen half written."""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import BinaryIO

from fusebridge.errors import ArgumentError

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
_RESERVED = {"con", "prn", "aux", "nul"} | {f"{p}{i}" for p in ("com", "lpt") for i in range(10)}
NAME_MAX = 255  # bytes of one file name on Linux, macOS and Windows


def encode(name: str) -> str:
    """`name` as a file name stem (see the module doc)."""
    data = name.encode("utf-8", "surrogatepass")
    out = [chr(b) if b in _SAFE else f"%{b:02X}" for b in data]
    if out and out[0] == ".":
        out[0] = "%2E"
    if name.split(".")[0].lower() in _RESERVED:
        out[0] = f"%{ord(name[0]):02X}"
    return "".join(out)


def stems(names: Iterable[str], suffixes: tuple[str, ...], what: str) -> dict[str, str]:
    """name -> encoded stem for each name; ArgumentError (naming `what`, the command) for an
    empty name, two names whose files differ only in case, or a file name too long with any
    of `suffixes`."""
    out: dict[str, str] = {}
    folded: dict[str, str] = {}
    for name in names:
        if not name:
            raise ArgumentError(f"{what}: an output has an empty name, which names no file")
        stem = encode(name)
        longest = len(stem) + max(map(len, suffixes))
        if longest > NAME_MAX:
            raise ArgumentError(
                f"{what}: output {name!r} would be written as a file name of {longest} bytes, "
                f"more than the {NAME_MAX} file systems allow"
            )
        other = folded.setdefault(stem.lower(), name)
        if other != name:
            raise ArgumentError(
                f"{what}: outputs {other!r} and {name!r} would be written to files whose names "
                f"differ only in case ({encode(other)}, {stem}): one file on a case-insensitive "
                "file system"
            )
        out[name] = stem
    return out


def write_new(directory: Path, filename: str, write: Callable[[BinaryIO], None]) -> Path:
    """directory/filename, written by write(file) to a new temporary file and renamed into
    place (replacing, never following, what was there)."""
    target = directory / filename
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for _ in range(100):
        tmp = directory / f".fusebridge-{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, flags, 0o666)  # the umask applies, as for any new file
            break
        except FileExistsError:
            continue
    else:
        raise ArgumentError(f"cannot create a temporary file in {str(directory)!r}")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        os.replace(tmp, target)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise ArgumentError(f"cannot write {str(target)!r}: {exc.strerror or exc}") from exc
        raise
    return target
