"""ONNX file -> canonical IR, by a pipeline of passes (IMPORT_PIPELINE): constant subgraphs
folded, then standard GRU becomes FusionGRU (it carries input weights) and Dropout becomes our
Dropout, so that the fuse passes and kernels see them; everything else, and a GRU or Dropout
our op does not take (the report says why), stays standard ONNX, run by ONNX Runtime."""

from __future__ import annotations

import os
from pathlib import Path

import onnx_ir as ir
from onnx_ir.passes.common import LiftConstantsToInitializersPass

from fusebridge import conventions, ops
from fusebridge.errors import (
    ArgumentError,
    Error,
    ModelFormatError,
    in_model_file,
)
from fusebridge.fuse_passes.constant_folding import FoldConstants
from fusebridge.fuse_passes.passes import IrPass
from fusebridge.fuse_passes.pipelines import Pipeline
from fusebridge.fuse_passes.report import OptimizeReport
from fusebridge.graph.type_inference import InferTypes
from fusebridge.integrations.onnx.dropout_import import import_dropout
from fusebridge.integrations.onnx.gru_import import import_gru
from fusebridge.integrations.onnx.import_passes import ImportOp
from fusebridge.integrations.onnx.model_file import read_model_proto


def load_onnx(path: str | os.PathLike) -> ir.Model:
    """An ONNX file as canonical IR (GRU and Dropout imported as fusebridge ops where they can
    be; `model.meta[LOAD_REPORT]` says what was and why not). A malformed file raises
    ModelFormatError, what we cannot take UnsupportedOpError, each naming the file and the
    node, value or attribute (model_file.py lists the checks)."""
    p = Path(path)
    if not p.is_file():
        raise ArgumentError(f"load: no such ONNX file {str(p)!r}")
    proto = read_model_proto(p)
    try:
        model = ir.serde.deserialize_model(proto)
    except Exception as exc:  # onnx_ir raises ValueError and others
        raise ModelFormatError(f"load: {str(p)!r} is not a readable ONNX model: {exc}") from exc
    try:
        _check_text(model)
        import_onnx(model)
        check_fusebridge_nodes(model.graph)
    except Error as exc:
        raise in_model_file(exc, f"load: {str(p)!r}") from exc
    return model


def _check_text(model: ir.Model) -> None:
    """Names and strings are UTF-8 in ONNX; protobuf's proto2 strings do not check that, and
    onnx_ir hands invalid ones over as bytes, which it then cannot write back."""
    texts = [("model doc_string", model.doc_string), ("producer", model.producer_name)]
    graphs = [
        model.graph,
        *(g for n in model.graph.all_nodes() for _, g in conventions.subgraphs(n)),
    ]
    for graph in graphs:
        texts += [("graph name", graph.name), ("graph doc_string", graph.doc_string)]
        texts += [("value name", v.name) for v in [*graph.inputs, *graph.outputs]]
        texts += [("initializer name", name) for name in graph.initializers]
        for node in graph:
            texts += [("node name", node.name), ("op type", node.op_type)]
            texts += [("domain", node.domain), ("node doc_string", node.doc_string)]
            texts += [("value name", v.name) for v in [*node.inputs, *node.outputs] if v]
    for what, text in texts:
        if text is not None and not isinstance(text, str):
            raise ModelFormatError(f"{what} {text!r} is not valid UTF-8")


def check_fusebridge_nodes(graph: ir.Graph) -> None:
    """Every fusebridge node (subgraphs included) against its op (ops.check_node)."""
    for node in ir.traversal.RecursiveGraphIterator(graph):
        if conventions.is_fusebridge(node):
            ops.check_node(node)


LOAD_REPORT = "fusebridge.load_report"
"""The key of `model.meta` under which load_onnx and import_onnx leave the import's
OptimizeReport (what each pass folded, imported, refused and why); `fusebridge optimize
--explain` prints it. Kept in memory only: a saved file does not carry it."""

IMPORT_PIPELINE = Pipeline(
    "onnx_import",
    [
        FoldConstants(kept=("GRU", "Dropout")),  # the import's, to take or to refuse
        # Weights given by Constant nodes (some exporters) become initializers, as torch's are.
        IrPass(
            "lift_constants",
            lambda: LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0),
        ),
        ImportOp("import_gru", "GRU", import_gru, kept=("LSTM", "RNN")),
        ImportOp("import_dropout", "Dropout", import_dropout),
        IrPass("infer_types", InferTypes),  # types for the values the import made
    ],
    "ONNX file -> canonical IR: constants folded, GRU and Dropout imported as our ops",
)


def import_onnx(model: ir.Model) -> ir.Model:
    """Rewrites `model` in place by IMPORT_PIPELINE (ONNX GRU -> FusionGRU, ONNX Dropout ->
    Dropout, where they take the node); its report goes to `model.meta[LOAD_REPORT]`."""
    if conventions.DOMAIN in model.opset_imports:
        # written by us: our ops are there already
        model.meta[LOAD_REPORT] = OptimizeReport(IMPORT_PIPELINE.name, ())
        return model
    model.meta[LOAD_REPORT] = IMPORT_PIPELINE.apply(model)
    return model
