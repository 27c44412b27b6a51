"""The README's Python examples run as written."""

import re
from pathlib import Path


def test_readme_python_blocks_run(tmp_path, monkeypatch):
    text = (Path(__file__).parents[1] / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 2
    monkeypatch.chdir(tmp_path)  # the examples write files
    exec(compile("\n".join(blocks), "README.md", "exec"), {})
