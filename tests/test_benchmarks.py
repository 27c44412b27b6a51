"""The benchmark runner (benchmarks/run.py) and its missing-peer rows, without running a
benchmark: stub sections stand in for the slow ones."""

import importlib.util
import sys
import types
from pathlib import Path

import pytest

# Appended, not prepended: the installed fusebridge must stay ahead of the source tree.
sys.path.append(str(Path(__file__).parents[1]))

from benchmarks import mxnet_models, paddle_training, run


def stub_section(monkeypatch, name, body):
    module = types.ModuleType(f"stub_{name}")
    module.run = body
    monkeypatch.setitem(sys.modules, module.__name__, module)
    return module.__name__


def test_each_section_is_written_when_it_is_done(tmp_path, monkeypatch):
    out = tmp_path / "report.md"
    seen = []

    def second(quick, threads):
        seen.append(out.read_text())  # the first section's table is already in the report
        return "### second"

    def broken(quick, threads):
        raise RuntimeError("this section broke")

    sections = {
        "first": stub_section(monkeypatch, "first", lambda quick, threads: "### first"),
        "second": stub_section(monkeypatch, "second", second),
        "broken": stub_section(monkeypatch, "broken", broken),
        "last": stub_section(monkeypatch, "last", lambda quick, threads: f"### last {threads}"),
    }
    monkeypatch.setattr(run, "SECTIONS", sections)
    assert run.run_sections(list(sections), out, quick=True, threads=3) == ["broken"]
    assert seen[0].endswith("\n### first\n")
    report = out.read_text()
    assert report.startswith("Machine: ") and report.endswith("\n### last 3\n")
    assert "\n### first\n\n### second\n\n### broken: failed\n\n```\nTraceback" in report
    assert "RuntimeError: this section broke\n```\n" in report


def peer_missing(monkeypatch, module):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a)
    )


@pytest.mark.parametrize(
    ("section", "module", "row"),
    [
        (
            mxnet_models,
            "mxnet",
            "| mxnet | not installed: runs in the MXNet venv (pip install '.[mxnet]'; "
            "--only mxnet_models) |",
        ),
        (paddle_training, "paddle", "| paddle | not installed: pip install -e '.[bench]' |"),
    ],
)
def test_a_missing_peer_is_a_row(monkeypatch, section, module, row):
    peer_missing(monkeypatch, module)
    text = section.run(quick=True, threads=1)
    assert text.startswith("### ") and text.endswith(f"| peer | status |\n|---|---|\n{row}")
