"""What the passes need of a graph before they rewrite it: the Session's check (every value
read is defined, no two values share a name, no node depends on itself, no negative dim), with
the pass named in the message."""

from __future__ import annotations

import onnx_ir as ir

from fusebridge.session_graph import check_graph as _check_graph


def check_graph(model: ir.Model, where: str) -> None:
    """ModelFormatError naming the node and the value for the first problem found; `where`
    (the pass) starts the message."""
    _check_graph(model.graph, where)
