"""The layer table of docs/design.md ("The layers"), enforced: every import of a fusebridge
module, those inside functions included, points to its own layer or one below, and no two
packages import each other. Nothing is exempted."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "fusebridge"

# Bottom first; a module may import its own layer and those below it. Names are the first part
# under fusebridge ("" is fusebridge/__init__.py itself).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("kernels", "cuda"),
    ("conventions", "random", "lod_tensor"),
    ("graph",),
    ("ops",),
    ("fuse_passes",),
    ("integrations",),
    ("runtime",),
    ("batch", "ray", "dask"),
    ("serve",),
    ("cli", "bench", "models", ""),
)
LAYER = {part: i for i, parts in enumerate(LAYERS) for part in parts}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(name: str) -> list[tuple[str, int]]:
    """(imported fusebridge module, line) for every import in module `name`, at any depth;
    `from a import b` counts as importing a.b when that is a module."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*parent, *([base] if base else [])])
            for a in node.names:
                target = f"{base}.{a.name}"
                found.append((target if target in MODULES else base, node.lineno))
    return [(t, line) for t, line in found if t == "fusebridge" or t.startswith("fusebridge.")]


def part(module: str) -> str:
    """The layer-table name of a module: the first part under fusebridge."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def test_every_module_is_in_the_table():
    assert sorted({part(m) for m in MODULES} - set(LAYER)) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_imports_point_down(name):
    upward = [
        f"line {line}: {target} (layer {LAYER[part(target)]} {LAYERS[LAYER[part(target)]]})"
        for target, line in imports(name)
        if LAYER[part(target)] > LAYER[part(name)]
    ]
    assert upward == [], f"{name} (layer {LAYER[part(name)]}) imports upward"


def test_no_package_imports_another_that_imports_it():
    edges = {
        (part(name), part(target))
        for name in MODULES
        for target, _ in imports(name)
        if part(name) != part(target)
    }
    assert sorted((a, b) for a, b in edges if (b, a) in edges) == []


def test_the_checker_sees_lazy_and_upward_imports(tmp_path, monkeypatch):
    """The checks above can fail: an import inside a function, pointing up, is found."""
    monkeypatch.setitem(MODULES, "fusebridge.ops.layers_probe", tmp_path / "probe.py")
    (tmp_path / "probe.py").write_text(
        "def f():\n    from fusebridge.runtime import session\n    return session\n"
    )
    found = imports("fusebridge.ops.layers_probe")
    assert found == [("fusebridge.runtime.session", 2)]
    with pytest.raises(AssertionError, match="imports upward"):
        test_imports_point_down("fusebridge.ops.layers_probe")
