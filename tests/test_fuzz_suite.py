"""The quick fuzz run (fuzz/): every input class against every bundled model and fixture, each
case in a child with a timeout and a 4 GiB address-space limit, so a crash, a hang or a blow-up
fails a test here instead of killing pytest. The long form runs by hand: `python -m fuzz`."""

import ctypes
import os
import sys
import time
from pathlib import Path

import pytest

# Appended, not prepended: the installed fusebridge must stay ahead of the source tree.
sys.path.append(str(Path(__file__).parents[1]))

import fusebridge
from fuzz import harness, wire
from fuzz.cases import CLASSES
from fuzz.targets import targets


def _failures(outcomes):
    return "\n".join(
        f"[{o.kind}] {o.name} (expected {o.expect}): {o.detail[:400]}" for o in outcomes if o.failed
    )


def test_every_target_runs_unmutated():
    """The cases mutate models that load, optimize, run and save; were one broken already,
    its mutations would test nothing."""
    outcomes = harness.run_in_worker(["--classes", "baseline"], timeout=300)
    assert len(outcomes) == len(targets())
    assert not _failures(outcomes), _failures(outcomes)
    assert {o.kind for o in outcomes} == {harness.ACCEPTED}


@pytest.mark.parametrize("input_class", CLASSES)
def test_quick_fuzz(input_class):
    outcomes = harness.run_in_worker(["--size", "quick", "--classes", input_class], timeout=600)
    assert outcomes, f"no {input_class} cases were made"
    assert not _failures(outcomes), _failures(outcomes)


# The harness itself: each outcome it reports must come from the thing it names.


def _raise(exc):
    def action(work):
        raise exc

    return action


def _segfault(work):
    ctypes.string_at(0)


def _hang(work):
    time.sleep(60)


def _allocate(work):
    return bytearray(8 << 30)


def _read_outside(work):
    return (work.parent / "outside.txt").read_text()


def _write_through_dotdot(work):
    (work / ".." / "planted.txt").write_text("x")


def _rename_outside(work):
    (work / "made.txt").write_text("x")
    os.replace(work / "made.txt", work.parent / "planted.txt")


def _read_installed(work):
    return Path(fusebridge.__file__).read_text()  # reading the installation is fine


@pytest.mark.parametrize(
    "action, kind",
    [
        (lambda work: None, harness.ACCEPTED),
        (_raise(fusebridge.ModelFormatError("bad")), harness.TYPED),
        (_raise(KeyError("ghost")), harness.UNTYPED),
        (_segfault, harness.CRASH),
        (_hang, harness.HANG),
        (_allocate, harness.MEMORY),
        (_read_outside, harness.ESCAPE),
        (_write_through_dotdot, harness.ESCAPE),
        (_rename_outside, harness.ESCAPE),
        (_read_installed, harness.ACCEPTED),
    ],
)
def test_harness_reports_what_happened(tmp_path, action, kind):
    (tmp_path / "outside.txt").write_text("secret")
    outcome = harness.run_case(harness.Case("self", kind, action, expect="any"), tmp_path, 3)
    assert outcome.kind == kind, outcome.detail
    assert outcome.failed == (kind not in (harness.ACCEPTED, harness.TYPED))
    assert not (tmp_path / "planted.txt").exists() or kind == harness.ESCAPE


@pytest.mark.parametrize("target", targets(), ids=lambda t: t.name)
def test_wire_codec_round_trips_protobuf_files(target):
    """The mutations of protobuf files change one field of an otherwise exact copy."""
    for file, data in target.files.items():
        if target.kind(file) == "protobuf":
            fields = wire.decode(data)
            assert wire.encode(fields) == data
            assert any(f.children for f in fields)  # nested messages were found
