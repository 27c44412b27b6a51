"""docs/ops-coverage.md: which ops of the two conversion peers (paddle2onnx 2.1.0's mappers,
MXNet 1.9.1's ONNX exporter) fusebridge converts today, and why not where the op's family says.
Regenerated from the repository root by

    python -m tools.ops_coverage

from the peers' op lists committed in docs/data/ (tools/extract_peer_op_lists.py) and
fusebridge's converter tables, read at run time, so neither peer nor paddle nor mxnet is needed.
tests/test_ops_coverage.py fails when the committed file differs from what this writes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

# The MXNet table from the package, which imports every family so that the table is complete.
from fusebridge.integrations.mxnet.converters import CONVERTERS as MXNET_TABLE
from fusebridge.integrations.paddle import pir_program
from fusebridge.integrations.paddle.load import CONVERTERS as PADDLE_TABLE

ROOT = Path(__file__).parents[1]
DATA = ROOT / "docs" / "data"
OUT = ROOT / "docs" / "ops-coverage.md"
PADDLE_LEGACY = DATA / "paddle2onnx_2.1.0_ops.txt"
PADDLE_PIR = DATA / "paddle2onnx_2.1.0_pir_ops.txt"
MXNET = DATA / "mxnet_1.9.1_onnx_export_ops.txt"
COMMAND = "python -m tools.ops_coverage"

# Why a peer's op is not converted, for the families whose reason is known (first match wins);
# any other op is "not yet converted".
REASONS: list[tuple[tuple[str, ...], str]] = [
    (("*_grad",), "training only: a gradient op"),
    (
        ("softmax_with_cross_entropy", "cross_entropy_with_softmax", "MakeLoss"),
        "training only: a loss",
    ),
    (("sgd", "adam*", "momentum", "lamb", "rmsprop", "adagrad"), "training only: an optimizer"),
    (("c_*", "all_reduce*", "all_gather*", "send_v2", "recv_v2"), "distributed: a collective"),
    (
        ("quantize_linear", "dequantize_linear", "fake_*"),
        "quantization: quantized (QDQ) models are not converted",
    ),
    (
        ("while", "conditional_block", "if", "select_input", "create_array", "array_*"),
        "control flow or tensor arrays: PIR if/while blocks are not converted (docs/paddle.md)",
    ),
    (
        (
            "multiclass_nms*",
            "yolo_box",
            "roi_align",
            "ROIPooling",
            "_contrib_ROIAlign",
            "_contrib_box_*",
        ),
        "detection: boxes, regions and NMS",
    ),
    (
        ("gaussian*", "uniform", "multinomial", "_random_*", "_sample_*"),
        "random sampling",
    ),
]
NOT_YET = "not yet converted"

# Peer entries that are program structure, not ops: fusebridge's loaders read them without a
# converter, so they are shown but left out of the counts.
PADDLE_STRUCTURE = {
    "builtin_combine": "structure: builtin.combine, read by the PIR reader (a list of variables)",
    "builtin_split": "structure: builtin.split, read by the PIR reader (names a list's parts)",
}
MXNET_STRUCTURE = {"null": "structure: a variable (an input or a weight), read by the loader"}


@dataclass(frozen=True)
class Row:
    op: str
    converted: bool | None  # None: structure, not counted
    note: str
    where: str = ""  # which of the peer's lists holds the op (paddle2onnx: legacy, PIR)


def read_op_list(path: Path) -> list[str]:
    """The ops of a committed list: one a line, `#` lines are its header."""
    lines = path.read_text().splitlines()
    return [line for line in lines if line and not line.startswith("#")]


def read_header(path: Path) -> str:
    return path.read_text().splitlines()[0].removeprefix("# ")


def reason(op: str) -> str:
    for patterns, why in REASONS:
        if any(fnmatchcase(op, p) for p in patterns):
            return why
    return NOT_YET


def _row(op: str, how: str | None, structure: dict[str, str], where: str = "") -> Row:
    """how: None when fusebridge does not convert op, else a note on how it does ("" for its
    own converter)."""
    if op in structure:
        return Row(op, None, structure[op], where)
    if how is None:
        return Row(op, False, reason(op), where)
    return Row(op, True, how, where)


def paddle_rows() -> list[Row]:
    """One row per op of paddle2onnx's legacy or PIR mappers: converted when fusebridge's Paddle
    table has the name, or when it is a PIR op name that the PIR reader maps to a legacy op the
    table has (paddle2onnx names most PIR mappers by the legacy op: `elementwise_add`)."""
    # _OPS is the reader's private table; it is read here, outside the package, to say which
    # PIR op names it maps (the layering check covers the package's own imports).
    pir_ops = {name: spec.type for name, spec in pir_program._OPS.items()}
    legacy, pir = set(read_op_list(PADDLE_LEGACY)), set(read_op_list(PADDLE_PIR))
    rows = []
    for op in sorted(legacy | pir):
        where = ", ".join(k for k, names in (("legacy", legacy), ("PIR", pir)) if op in names)
        if op in PADDLE_TABLE:
            how = ""
        elif pir_ops.get(op) in PADDLE_TABLE:
            how = f"as PIR `pd_op.{op}` (read as `{pir_ops[op]}`)"
        else:
            how = None
        rows.append(_row(op, how, PADDLE_STRUCTURE, where))
    return rows


def paddle_only() -> list[str]:
    """Op types of fusebridge's Paddle table that neither of paddle2onnx's lists has."""
    peer = set(read_op_list(PADDLE_LEGACY)) | set(read_op_list(PADDLE_PIR))
    return sorted(set(PADDLE_TABLE) - peer)


def mxnet_rows() -> list[Row]:
    """One row per op MXNet's ONNX exporter registers: converted when fusebridge's MXNet table
    has the name."""
    return [
        _row(op, "" if op in MXNET_TABLE else None, MXNET_STRUCTURE)
        for op in sorted(read_op_list(MXNET))
    ]


def mxnet_only() -> list[str]:
    """Op types of fusebridge's MXNet table that the exporter does not register."""
    return sorted(set(MXNET_TABLE) - set(read_op_list(MXNET)))


def counted(rows: Iterable[Row], keep: Callable[[Row], bool] = lambda r: True) -> tuple[int, int]:
    """(converted, total) over the rows that count (structure left out)."""
    kept = [r for r in rows if r.converted is not None and keep(r)]
    return sum(r.converted for r in kept), len(kept)


def summary(paddle: list[Row], mxnet: list[Row]) -> list[tuple[str, int, int]]:
    """(peer, converted, total): the table at the top of the file."""
    return [
        ("paddle2onnx 2.1.0, legacy and PIR mappers", *counted(paddle)),
        ("paddle2onnx 2.1.0, legacy mappers", *counted(paddle, lambda r: "legacy" in r.where)),
        ("paddle2onnx 2.1.0, PIR mappers", *counted(paddle, lambda r: "PIR" in r.where)),
        ("MXNet 1.9.1 ONNX exporter", *counted(mxnet)),
    ]


def share(converted: int, total: int) -> str:
    return f"{converted} of {total} ({100 * converted / total:.0f}%)"


def _table(rows: list[Row], with_where: bool) -> list[str]:
    mark = {True: "yes", False: "no", None: "n/a"}
    head = ["op", "paddle2onnx mapper"] if with_where else ["op"]
    lines = ["| " + " | ".join([*head, "fusebridge", "note"]) + " |"]
    lines.append("|" + " --- |" * (len(head) + 2))
    for r in rows:
        cells = [f"`{r.op}`", r.where] if with_where else [f"`{r.op}`"]
        lines.append("| " + " | ".join([*cells, mark[r.converted], r.note]) + " |")
    return lines


def _names(ops: list[str]) -> str:
    return ", ".join(f"`{op}`" for op in ops) if ops else "none"


def render() -> str:
    """The whole of docs/ops-coverage.md, as this tree's tables make it."""
    paddle, mxnet = paddle_rows(), mxnet_rows()
    lines = [
        "# Op coverage against paddle2onnx and MXNet's ONNX exporter",
        "",
        f"Generated by `{COMMAND}` (tools/ops_coverage.py) from the peers' op lists in "
        "docs/data/ and fusebridge's converter tables as they are in this tree; do not edit by "
        "hand (tests/test_ops_coverage.py fails when this file is stale).",
        "",
        "Of the ops each peer converts to ONNX, how many fusebridge converts (loads) today:",
        "",
        "| peer | fusebridge converts |",
        "| --- | --- |",
        *(f"| {peer} | {share(n, total)} |" for peer, n, total in summary(paddle, mxnet)),
        "",
        "What counts: a Paddle op is converted when fusebridge's Paddle table (`CONVERTERS`, "
        "fusebridge/integrations/paddle/converters/) has its name, or when it is a PIR op that "
        "fusebridge's PIR reader (`_OPS` in fusebridge/integrations/paddle/pir_program.py) reads "
        "as a legacy op the table has; an MXNet op when fusebridge's MXNet table "
        "(fusebridge/integrations/mxnet/converters/) has its name. A `yes` says fusebridge "
        "has a converter for the op, not that it takes every attribute value the peer does. "
        "A `no` names the op's family where the reason is known, else says "
        f'"{NOT_YET}"; `n/a` marks program structure (not an op), left out of the counts.',
        "",
        "How the lists were made, once, by `python -m tools.extract_peer_op_lists "
        "PADDLE2ONNX_WHEEL MXNET_WHEEL` on the wheels `pip download --no-deps` fetches (its "
        "docstring says it in full):",
        "",
        f"- `{PADDLE_LEGACY.name}`: {read_header(PADDLE_LEGACY)}.",
        f"- `{PADDLE_PIR.name}`: {read_header(PADDLE_PIR)}.",
        f"- `{MXNET.name}`: {read_header(MXNET)}.",
        "",
        "## paddle2onnx 2.1.0",
        "",
        *_table(paddle, with_where=True),
        "",
        "Op types only fusebridge's Paddle table has (PIR names the reader maps are not listed: "
        f"paddle2onnx names those ops by their legacy op): {_names(paddle_only())}.",
        "",
        "## MXNet 1.9.1 ONNX exporter",
        "",
        *_table(mxnet, with_where=False),
        "",
        "Op types only fusebridge's MXNet table has (it takes some ops under several of MXNet's "
        f"names): {_names(mxnet_only())}.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    OUT.write_text(render())
    print(f"wrote {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
