"""Runs fuzz cases, each in a child process with a 4 GiB address-space limit and a timeout, and
sorts what happened into outcomes. A crash, a hang or a blow-up kills the child, never the
caller.

The worker (`python -m fuzz.harness`) imports fusebridge once, then forks one child per case:
hundreds of cases run in seconds instead of one interpreter start each. It must be a fresh
process: a fork after ONNX Runtime (or another library's OpenMP) started threads can hang the
child, so the worker never runs a model itself and pytest (whose process has) starts a worker
instead of forking. (The kernels' own pool is fork-safe: a child gets a new one.)
"""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import resource
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ADDRESS_SPACE_LIMIT = 4 << 30
TIMEOUT_S = 20.0

# What a case may end in. The first two are fine when the case allows them (`expect`).
TYPED = "typed error"  # a fusebridge.Error
ACCEPTED = "accepted"  # ran to the end
UNTYPED = "untyped exception"
CRASH = "crash"  # killed by a signal, or died without reporting
HANG = "hang"  # still running at the timeout
MEMORY = "memory"  # MemoryError, or an allocation the address-space limit refused
ESCAPE = "path escape"  # read outside its folder and the installation, or wrote outside its folder
OUTCOMES = (TYPED, ACCEPTED, UNTYPED, CRASH, HANG, MEMORY, ESCAPE)


@dataclass(frozen=True)
class Case:
    """One bad input. `prepare` writes the input's files into an empty folder (the child's
    working directory); `action` then feeds them to fusebridge. expect: "error" when the input
    is wrong and must be refused with a typed error, "any" when it may also be accepted (a
    flipped bit inside weight data), "ok" when it must be accepted (a read-only feed)."""

    input_class: str
    name: str
    action: Callable[[Path], object]
    prepare: Callable[[Path], None] | None = None
    expect: str = "error"


@dataclass(frozen=True)
class Outcome:
    input_class: str
    name: str
    expect: str
    kind: str
    detail: str
    seconds: float

    @property
    def failed(self) -> bool:
        if self.kind == TYPED:
            return self.expect == "ok"
        if self.kind == ACCEPTED:
            return self.expect == "error"
        return True


def _allowed_roots(work: Path) -> tuple[str, ...]:
    """Where a case may open files: its own folder, and what the interpreter and the installed
    packages need (imports done lazily, locale and timezone data, /proc for CPU facts)."""
    import fusebridge

    roots = {
        str(work),
        sys.prefix,
        sys.base_prefix,
        sys.exec_prefix,
        str(Path(fusebridge.__file__).parent),
        *sys.path,
        "/proc",
        "/sys",
        "/dev",
    }
    return tuple(r.rstrip("/") + "/" for r in roots if r and r != "/")


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
# Audit events that change the file system, and which of their arguments are paths.
_CHANGES = {
    "os.rename": (0, 1),  # os.replace too
    "os.remove": (0,),
    "os.rmdir": (0,),
    "os.mkdir": (0,),
    "os.truncate": (0,),
    "os.link": (0, 1),
    "os.symlink": (1,),
    "os.chmod": (0,),
}


def _audit_paths(work: Path, escapes: list[str]) -> None:
    """Records (in escapes) the first file operation outside what a case may touch: it may
    read inside its folder and the installation, and write inside its folder alone."""
    readable, writable = _allowed_roots(work), (str(work).rstrip("/") + "/",)

    def outside(path: object, roots: tuple[str, ...]) -> bool:
        if not isinstance(path, (str, bytes, os.PathLike)):
            return False  # a file descriptor: opened (and checked) before
        full = os.path.join(str(work), os.fsdecode(path))
        return not (os.path.realpath(full) + "/").startswith(roots)

    def hook(event: str, args: tuple) -> None:
        if escapes:
            return
        if event == "open":
            path, mode, flags = args
            writes = any(c in (mode or "") for c in "wax+") or bool(flags & _WRITE_FLAGS)
            if outside(path, writable if writes else readable):
                escapes.append(f"opened {path!r} (mode {mode or flags!r})")
        elif event in _CHANGES:
            for i in _CHANGES[event]:
                if outside(args[i], writable):
                    escapes.append(f"{event} on {args[i]!r}")

    sys.addaudithook(hook)  # for the rest of the child's life, which is this case


def _child(case: Case, work: Path, report: int) -> None:
    import fusebridge

    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_LIMIT, ADDRESS_SPACE_LIMIT))
    # stderr stays: a crash's last words (an abort message) go into the report's detail.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.chdir(work)
    escapes: list[str] = []
    try:
        if case.prepare is not None:
            case.prepare(work)
        _audit_paths(work, escapes)
        case.action(work)
        kind, detail = ACCEPTED, ""
    except fusebridge.Error as exc:
        kind, detail = TYPED, f"{type(exc).__name__}: {exc}"
    except MemoryError as exc:
        kind, detail = MEMORY, f"MemoryError: {exc}"
    except BaseException as exc:
        kind, detail = UNTYPED, f"{type(exc).__name__}: {exc}"
    if escapes:
        kind, detail = ESCAPE, escapes[0]
    os.write(report, json.dumps({"kind": kind, "detail": detail[:2000]}).encode())
    os._exit(0)


def run_case(case: Case, root: Path, timeout: float = TIMEOUT_S) -> Outcome:
    """Runs case in a forked child under root (a fresh folder per case, removed after)."""
    work = Path(tempfile.mkdtemp(dir=root))
    stderr_path = work.parent / f"{work.name}.stderr"
    read_end, write_end = os.pipe()
    start = time.perf_counter()
    pid = os.fork()
    if pid == 0:  # the child never returns
        try:
            os.close(read_end)
            err = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(err, 2)
            # Where a crash is reported: here, not in the parent's terminal (pytest's
            # faulthandler holds a copy of the parent's stderr).
            faulthandler.enable()
            _child(case, work, write_end)
        finally:
            os._exit(70)
    os.close(write_end)
    data, deadline, hung = b"", start + timeout, False
    while True:
        left = deadline - time.perf_counter()
        ready, _, _ = select.select([read_end], [], [], max(left, 0))
        if not ready:
            hung = True
            os.kill(pid, signal.SIGKILL)
            break
        chunk = os.read(read_end, 65536)
        if not chunk:
            break
        data += chunk
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    seconds = time.perf_counter() - start
    stderr = stderr_path.read_text(errors="replace")[-600:] if stderr_path.exists() else ""
    shutil.rmtree(work, ignore_errors=True)
    stderr_path.unlink(missing_ok=True)
    if hung:
        kind, detail = HANG, f"still running after {timeout:.0f} s"
    elif data:
        reported = json.loads(data)
        kind, detail = reported["kind"], reported["detail"]
    elif os.WIFSIGNALED(status):
        sig = signal.Signals(os.WTERMSIG(status)).name
        # A refused allocation in C++ ends in std::bad_alloc -> abort when nothing catches it.
        memory = "bad_alloc" in stderr or "cannot allocate memory" in stderr.lower()
        kind, detail = (MEMORY if memory else CRASH), f"{sig}: {stderr.strip()[-300:]}"
    else:
        kind, detail = CRASH, f"exit status {os.waitstatus_to_exitcode(status)}: {stderr[-300:]}"
    return Outcome(case.input_class, case.name, case.expect, kind, detail, seconds)


def run_in_worker(args: list[str], timeout: float) -> list[Outcome]:
    """Runs `python -m fuzz.harness ARGS` from the repository root (a fresh process, see the
    module's doc) and returns its outcomes."""
    repo = Path(__file__).resolve().parents[1]
    # -I: neither the working directory nor PYTHONPATH goes on sys.path, so the fusebridge
    # imported is the installed one even when run from a source tree; the repository is
    # appended for this package alone.
    code = (
        "import sys; sys.path.append(sys.argv[1]); import fuzz.harness as h; h.main(sys.argv[2:])"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-B", "-c", code, str(repo), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"fuzz worker failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return [Outcome(**json.loads(line)) for line in done.stdout.splitlines() if line.strip()]


def main(argv: list[str] | None = None) -> None:
    from fuzz import cases as case_lists

    parser = argparse.ArgumentParser(description="runs fuzz cases; one JSON outcome a line")
    parser.add_argument("--size", choices=("quick", "long"), default="quick")
    parser.add_argument("--classes", nargs="*", help="only these input classes")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S)
    args = parser.parse_args(argv)
    import fusebridge.integrations.mxnet.load
    import fusebridge.integrations.onnx.load
    import fusebridge.integrations.paddle.load  # noqa: F401

    chosen = case_lists.generate(args.size, args.seed, args.classes)
    with tempfile.TemporaryDirectory(prefix="fusebridge-fuzz-") as root:
        for case in chosen:
            outcome = run_case(case, Path(root), args.timeout)
            print(json.dumps(outcome.__dict__), flush=True)


if __name__ == "__main__":
    main()
