"""What save_mxnet's emitters share: the table WRITERS (IR op type, `domain.op` outside ONNX's
domain -> the function that writes the node as MXNet nodes), Refused (why a node cannot be
written: save.py turns it into UnsupportedOpError naming the node), and how attribute values
are read from the IR and written for MXNet."""

from __future__ import annotations

from typing import TYPE_CHECKING

import onnx_ir as ir

from fusebridge.integrations.converters import ConverterRegistry

if TYPE_CHECKING:
    from fusebridge.integrations.mxnet.save import Writer

WRITERS = ConverterRegistry("MXNet form")

# ONNX element types MXNet has: its dtype name and its __dtype__ code.
DTYPES = {
    ir.DataType.FLOAT: ("float32", 0),
    ir.DataType.DOUBLE: ("float64", 1),
    ir.DataType.FLOAT16: ("float16", 2),
    ir.DataType.UINT8: ("uint8", 3),
    ir.DataType.INT32: ("int32", 4),
    ir.DataType.INT8: ("int8", 5),
    ir.DataType.INT64: ("int64", 6),
}


class Refused(Exception):
    """Why the node being written cannot be (turned into UnsupportedOpError naming it)."""


def tuple_text(values) -> str:
    """values as MXNet writes a tuple attribute: (1,), (2, 3)."""
    values = [int(v) for v in values]
    return f"({values[0]},)" if len(values) == 1 else f"({', '.join(map(str, values))})"


def number_text(value: float) -> str:
    return repr(float(value))


def node_inputs(node: ir.Node, count: int) -> list[ir.Value | None]:
    return [*node.inputs, *[None] * count][:count]


def has_vector_inputs(w: Writer, node: ir.Node) -> bool:
    return any(v in w.vectors for v in node.inputs if v is not None)
