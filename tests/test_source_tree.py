"""A source tree without a built core, met by Python started inside it (sys.path[0]) after a
non-editable `pip install .`: a clear error, and the bench's Paddle peers never meet it."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]
# The child keeps only the interpreter's own import finders: an editable install adds one
# ahead of sys.path, which would hide the copy just as a non-editable install does not.
PLAIN_FINDERS = (
    "import sys; sys.meta_path[:] = [f for f in sys.meta_path if f.__module__ in "
    "('_frozen_importlib', '_frozen_importlib_external')]; "
)


def source_tree_without_core(tmp_path: Path) -> Path:
    tree = tmp_path / "checkout"
    ignore = shutil.ignore_patterns("_C.*", "__pycache__")
    shutil.copytree(ROOT / "fusebridge", tree / "fusebridge", ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tree)
    return tree


def test_importing_from_a_source_tree_without_core_says_so(tmp_path):
    tree = source_tree_without_core(tmp_path)
    code = PLAIN_FINDERS + "import fusebridge"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tree, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last == (
        f"fusebridge.errors.CoreImportError: you are importing fusebridge from its source tree "
        f"at {tree}, which has no compiled core (fusebridge/kernels/_C); run from another "
        "directory to use the installed fusebridge, or build the core in place with "
        "`pip install -e .` there"
    )
    assert "circular import" not in out.stderr


def test_bench_peers_start_outside_the_source_tree(tmp_path, monkeypatch):
    """`fusebridge bench` run in a checkout: its Paddle peers must not start there, where
    `python -m` would put the core-less source tree first on their sys.path."""
    from fusebridge.bench import paddle_comparison

    tree = source_tree_without_core(tmp_path)
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "where_am_i.py").write_text(
        "import json, os, sys\nprint(json.dumps({'cwd': os.getcwd(), 'path': sys.path}))\n"
    )
    monkeypatch.setattr(paddle_comparison, "PEER_MODULE", "where_am_i")
    monkeypatch.chdir(tree)
    work = tmp_path / "work"
    work.mkdir()
    env = {"PYTHONPATH": str(probe), "PATH": "/usr/bin:/bin"}
    done = paddle_comparison.peer_process([], work, env)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert Path(seen["cwd"]) == work
    assert [p for p in seen["path"] if Path(p or ".").resolve() == tree] == []
