"""Runs paddle2onnx in a child process, installed in a directory of its own.

paddle2onnx 2.1.0 pins onnx<=1.17 and aborts its whole process (SIGABRT) on ops it cannot
convert, such as the legacy LoD `gru` op. So it is never installed into our environment nor
imported here: run_paddle2onnx() puts it (with its onnx) into install_dir() by
`pip install --target` on first use, then runs its command line with that directory first on
PYTHONPATH, so that its onnx shadows ours while paddle still comes from our environment.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ENV_DIR = "FUSEBRIDGE_PADDLE2ONNX_DIR"
# polygraphy, paddle2onnx's default optimizer, needs onnx_graphsurgeon; without it, it would
# pip-install it into the interpreter's environment (paddle2onnx turns autoinstall on).
REQUIREMENTS = ("paddle2onnx==2.1.0", "onnx-graphsurgeon==0.6.1")
_INSTALLED_MARK = "paddle2onnx-2.1.0.dist-info"


@dataclass(frozen=True)
class Paddle2OnnxResult:
    ok: bool
    returncode: int
    message: str  # the last meaningful lines of paddle2onnx's output, or why it did not run
    save_file: Path | None  # the ONNX file written, when ok
    op_types: dict[str, int] = field(default_factory=dict)  # op type -> count, when ok


def install_dir() -> Path:
    """Where paddle2onnx is installed: $FUSEBRIDGE_PADDLE2ONNX_DIR or
    ~/.cache/fusebridge/paddle2onnx."""
    return Path(os.environ.get(ENV_DIR) or Path.home() / ".cache" / "fusebridge" / "paddle2onnx")


def _install() -> tuple[Path | None, str]:
    target = install_dir()
    if (target / _INSTALLED_MARK).is_dir():
        return target, ""
    # Installed beside the target, then renamed: an interrupted install is never taken for a
    # complete one, and two processes installing at once do not mix their files.
    partial = target.with_name(f"{target.name}.partial-{os.getpid()}")
    target.parent.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(partial)]
    try:
        proc = subprocess.run(
            [*cmd, *REQUIREMENTS], capture_output=True, text=True, timeout=600, check=False
        )
    except subprocess.TimeoutExpired:
        proc = None
    if proc is None or proc.returncode != 0:
        shutil.rmtree(partial, ignore_errors=True)
        if proc is None:
            return None, "pip install timed out after 600 s"
        return None, f"pip install failed ({proc.returncode}): {_tail(proc.stderr + proc.stdout)}"
    try:
        partial.rename(target)
    except OSError:  # another process got there first (or a stale, incomplete target)
        shutil.rmtree(partial, ignore_errors=True)
        if not (target / _INSTALLED_MARK).is_dir():
            return None, f"{target} exists but holds no paddle2onnx 2.1.0; remove it"
    return target, ""


# Lines of Paddle's crash report and of warnings that say nothing about the conversion.
_NOISE = re.compile(
    r"^(-+|C\+\+ Traceback.*|Error Message Summary:|\[TimeInfo:.*|\[SignalInfo:.*"
    r"|\d+\s+\S+::.*|FatalError: `Process abort signal`.*|.*ccache.*|\s*warnings\.warn\(.*"
    r"|\[Paddle2ONNX\]\s*)$"
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _tail(output: str, n: int = 3) -> str:
    """The last n meaningful lines of output, preferring error lines."""
    lines = [_ANSI.sub("", line).strip() for line in output.splitlines()]
    lines = [line for line in lines if line and not _NOISE.match(line)]
    errors = [line for line in lines if re.search(r"error|fail|abort|not supported", line, re.I)]
    return "\n".join((errors or lines)[-n:])


def _model_files(model_dir_or_prefix: str | os.PathLike) -> tuple[Path, Path | None]:
    """(model file, params file or None) of a model directory, model file or path prefix: a
    PIR program (.json, what paddle.jit.save writes in Paddle 3) or a legacy .pdmodel."""
    path = Path(model_dir_or_prefix)
    if path.is_dir():
        models = sorted(path.glob("*.json")) + sorted(path.glob("*.pdmodel"))
    elif path.is_file():
        models = [path]
    else:
        models = [path.with_name(path.name + s) for s in (".json", ".pdmodel")]
        models = [p for p in models if p.is_file()]
    if len(models) != 1:
        found = ", ".join(p.name for p in models) or "nothing"
        raise FileNotFoundError(f"{path}: expected one .json or .pdmodel model, found {found}")
    params = models[0].with_suffix(".pdiparams")
    return models[0], params if params.is_file() else None


def run_paddle2onnx(
    model_dir_or_prefix: str | os.PathLike,
    save_file: str | os.PathLike,
    opset: int = 17,
    timeout: float = 300,
) -> Paddle2OnnxResult:
    """Converts a saved Paddle inference model to save_file with paddle2onnx's command line, in
    a child process. Failures, crashes and timeouts come back as a result with ok False."""
    model, params = _model_files(model_dir_or_prefix)
    save_file = Path(save_file)
    target, reason = _install()
    if target is None:
        return Paddle2OnnxResult(False, 1, f"paddle2onnx is not available: {reason}", None)
    save_file.parent.mkdir(parents=True, exist_ok=True)
    save_file.unlink(missing_ok=True)  # paddle2onnx can exit 0 without writing: see below
    cmd = [sys.executable, "-m", "paddle2onnx.command", "--model_dir", str(model.parent)]
    cmd += ["--model_filename", model.name, "--save_file", str(save_file)]
    cmd += ["--opset_version", str(opset)]
    if params is not None:
        cmd += ["--params_filename", params.name]
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(target), env.get("PYTHONPATH")) if p)
    # paddle2onnx sets POLYGRAPHY_AUTOINSTALL_DEPS=1; a command that installs nothing keeps
    # polygraphy from pip-installing into our environment if it ever misses a module.
    env["POLYGRAPHY_INSTALL_CMD"] = f"{sys.executable} -c raise(SystemExit(1))"
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, env=env, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return Paddle2OnnxResult(False, -signal.SIGKILL, f"timed out after {timeout} s", None)
    message = _tail(proc.stderr + "\n" + proc.stdout)
    if proc.returncode < 0:
        try:
            name = signal.Signals(-proc.returncode).name
        except ValueError:
            name = f"signal {-proc.returncode}"
        message = f"killed by {name}: {message}"
    # paddle2onnx logs some conversion errors and still exits 0: trust the file, not the code.
    if proc.returncode != 0 or not save_file.is_file():
        return Paddle2OnnxResult(False, proc.returncode, message or "no ONNX file written", None)
    import onnx

    op_types = Counter(node.op_type for node in onnx.load(str(save_file)).graph.node)
    return Paddle2OnnxResult(True, 0, message, save_file, dict(sorted(op_types.items())))
