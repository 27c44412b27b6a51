"""docs/ops-coverage.md is what tools/ops_coverage.py writes from the committed peer op lists
(docs/data/) and this tree's converter tables, and what it says of them holds. Neither paddle nor
mxnet is needed: only the lists and the tables are read."""

import re
import sys
from pathlib import Path

from fusebridge.integrations.mxnet.converters import CONVERTERS as MXNET
from fusebridge.integrations.paddle import pir_program
from fusebridge.integrations.paddle.load import CONVERTERS as PADDLE

# Appended, not prepended: the installed fusebridge must stay ahead of the source tree.
sys.path.append(str(Path(__file__).parents[1]))

from tools import ops_coverage as coverage

ROW = re.compile(r"^\| `([^`]+)` \|(?: [^|]* \|)? (yes|no|n/a) \|")
SHARE = re.compile(r"^\| (.+?) \| (\d+) of (\d+) \((\d+)%\) \|$", re.M)


def _committed() -> str:
    return coverage.OUT.read_text()


def _marks(section: str) -> dict[str, str]:
    """op -> yes / no / n/a, from the table of the committed file's section `## {section}`."""
    text = _committed().split(f"\n## {section}\n")[1].split("\n## ")[0]
    return {m[1]: m[2] for line in text.splitlines() if (m := ROW.match(line))}


def _paddle_converts(op: str) -> bool:
    """The rule the file states: the legacy table has the name, or the PIR reader reads the op
    as a legacy op the table has."""
    spec = pir_program._OPS.get(op)
    return op in PADDLE or (spec is not None and spec.type in PADDLE)


def test_the_committed_file_is_current():
    assert _committed() == coverage.render(), (
        "docs/ops-coverage.md is stale (a converter was added or removed, or a list changed): "
        f"run `{coverage.COMMAND}` from the repository root and commit the file"
    )


def test_every_paddle_op_the_table_converts_is_marked_yes():
    marks = _marks("paddle2onnx 2.1.0")
    ops = coverage.read_op_list(coverage.PADDLE_LEGACY) + coverage.read_op_list(coverage.PADDLE_PIR)
    assert set(marks) == set(ops)
    assert {op for op in ops if op in PADDLE and marks[op] != "yes"} == set()


def test_ops_marked_yes_are_in_the_tables():
    paddle, mxnet = _marks("paddle2onnx 2.1.0"), _marks("MXNet 1.9.1 ONNX exporter")
    assert {
        op for op, mark in paddle.items() if mark == "yes" and not _paddle_converts(op)
    } == set()
    assert {op for op, mark in mxnet.items() if mark == "yes" and op not in MXNET} == set()
    assert {op for op, mark in mxnet.items() if mark == "no" and op in MXNET} == set()
    assert len(mxnet) == len(coverage.read_op_list(coverage.MXNET))


def test_the_shares_at_the_top_are_the_computed_ones():
    legacy = set(coverage.read_op_list(coverage.PADDLE_LEGACY))
    pir = set(coverage.read_op_list(coverage.PADDLE_PIR))
    mxnet = set(coverage.read_op_list(coverage.MXNET)) - set(coverage.MXNET_STRUCTURE)
    legacy, pir = (ops - set(coverage.PADDLE_STRUCTURE) for ops in (legacy, pir))
    expected = {
        "paddle2onnx 2.1.0, legacy and PIR mappers": legacy | pir,
        "paddle2onnx 2.1.0, legacy mappers": legacy,
        "paddle2onnx 2.1.0, PIR mappers": pir,
    }
    expected = {peer: (sum(map(_paddle_converts, ops)), len(ops)) for peer, ops in expected.items()}
    expected["MXNet 1.9.1 ONNX exporter"] = (len(mxnet & set(MXNET)), len(mxnet))
    stated = {m[1]: (int(m[2]), int(m[3]), int(m[4])) for m in SHARE.finditer(_committed())}
    assert set(stated) == set(expected)
    for peer, (converted, total) in expected.items():
        assert stated[peer] == (converted, total, round(100 * converted / total)), peer
    # The tables below say the same: one `yes` row per converted op.
    yes = sum(mark == "yes" for mark in _marks("paddle2onnx 2.1.0").values())
    assert yes == expected["paddle2onnx 2.1.0, legacy and PIR mappers"][0]


def test_a_known_family_gets_its_reason_and_others_are_not_yet_converted():
    assert coverage.reason("elementwise_add_grad") == "training only: a gradient op"
    assert coverage.reason("_contrib_box_nms").startswith("detection")
    assert coverage.reason("acos") == coverage.NOT_YET
