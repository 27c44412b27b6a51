"""The README's Python examples run as written."""

import re
from pathlib import Path


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    text = (Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)  # the examples write files
    exec(compile("\n".join(blocks), "README.md", "exec"), {})


def test_the_project_cites_only_its_own_files():
    """Nothing reads or cites files beside the checkout (a fresh clone has none), and every
    document cited in docs/ exists."""
    root = Path(__file__).parents[1]
    beside = ("shared" + "/reference", ".." + "/shared")  # split: this file must not match
    files = [root / "README.md", root / "pyproject.toml", root / "CMakeLists.txt"]
    files += [root / ".ci" / "run"]
    for folder in ("fusebridge", "tests", "benchmarks", "docs"):
        files += [p for p in (root / folder).rglob("*") if p.suffix in SOURCE_SUFFIXES]
    cited = set()
    for path in files:
        text = path.read_text(errors="replace")
        assert not any(b in text for b in beside), path
        cited |= set(re.findall(r"docs/(\w+\.md)", text))
    assert cited and {name for name in cited if not (root / "docs" / name).is_file()} == set()


SOURCE_SUFFIXES = {
    ".py",
    ".md",
    ".cc",
    ".hpp",
    ".h",
    ".cpp",
    ".cu",
    ".cuh",
    ".sh",
    ".txt",
    ".toml",
    ".json",
}
