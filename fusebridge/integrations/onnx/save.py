"""IR -> .onnx file: the optimized graph with fusebridge-domain ops (fusebridge.Session runs it),
or, portable, standard ONNX ops only (plain ONNX Runtime runs it).

ONNX Runtime's pip wheels ship no C/C++ headers, so no native ORT custom-op library for our ops
can be built against them: plain-ORT users take the portable file."""

from __future__ import annotations

import os

import onnx
import onnx_ir as ir

from fusebridge import conventions
from fusebridge.errors import ArgumentError, ModelFormatError
from fusebridge.integrations.onnx.external_data import all_tensors, is_external
from fusebridge.integrations.onnx.model_file import check_declared_dims
from fusebridge.kernels.arguments import as_flag


def model_proto(model: ir.Model) -> onnx.ModelProto:
    """The model as a checked ModelProto: our opsets declared, the IR version the lowest the
    opsets allow (ONNX Runtime refuses IR versions newer than it knows; onnx writes its own
    newest by default), and onnx.checker's full check (shape inference included) passed."""
    proto = ir.to_proto(model)
    uses_ours = any(conventions.is_fusebridge(n) for n in model.graph.all_nodes())
    wanted = {
        "": conventions.ONNX_OPSET,
        **({conventions.DOMAIN: conventions.DOMAIN_VERSION} if uses_ours else {}),
    }
    present = {o.domain for o in proto.opset_import}
    for domain, version in wanted.items():
        if domain not in present:
            proto.opset_import.add(domain=domain, version=version)
    proto.ir_version = onnx.helper.find_min_ir_version_for(proto.opset_import, ignore_unknown=True)
    proto.graph.name = proto.graph.name or "fusebridge"
    external = [t.name for t in all_tensors(proto.graph) if is_external(t)]
    if external:
        # Written as they are, their locations would be read relative to the new file.
        raise ArgumentError(
            f"save_onnx: tensor(s) {external} refer to external data; the file is written with "
            "its weights inline: read them in first (fusebridge.load does; for a model from "
            "onnx_ir.load, onnx_ir.external_data.load_to_model)"
        )
    size, limit = proto.ByteSize(), onnx.checker.MAXIMUM_PROTOBUF
    if size > limit:
        raise ArgumentError(
            f"save_onnx: the model takes {size} bytes with its weights inline, more than the "
            f"{limit} one protobuf file can hold"
        )
    try:
        # Inferred types and ranks for outputs the frontends left without (the checker wants
        # them).
        check_declared_dims(proto.graph, "save_onnx")
        proto = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
        _require_ranks(proto.graph)
        onnx.checker.check_model(proto, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        raise ModelFormatError(f"save_onnx: the model is not valid ONNX: {exc}") from exc
    return proto


def _require_ranks(graph: onnx.GraphProto) -> None:
    """ONNX files need a rank on every graph input and output (onnx.checker: "Field 'shape' of
    'type' is required"); fusebridge runs models without (MXNet symbols declare no shapes)."""
    missing = [
        v.name
        for v in [*graph.input, *graph.output]
        if v.type.HasField("tensor_type") and not v.type.tensor_type.HasField("shape")
    ]
    if missing:
        raise ArgumentError(
            f"save_onnx: graph inputs/outputs {missing} have no shape, not even a rank, and an "
            "ONNX file needs one for each (MXNet symbols declare none): give the inputs theirs "
            "first (model.graph.inputs[i].shape = onnx_ir.Shape(['N', 'T', 16]), symbolic "
            "dims as names), or save an MXNet model with fusebridge.save_mxnet"
        )


def save_onnx(model: ir.Model, path: str | os.PathLike, *, portable: bool = False) -> None:
    """Writes `model` as one .onnx file, weights inline; the model itself is left as it is, and
    nothing is fused here. portable=True writes the model in standard ONNX ops only: it runs
    the `lowering` pipeline (fuse_passes.PIPELINES: our ops replaced by standard ones, no
    fusions) on a copy; what ONNX cannot express raises UnsupportedOpError naming the node and
    why. For a fused portable file, save `fusebridge.optimize(model, "portable")[0]` (what
    `fusebridge optimize --pipeline portable` writes)."""
    if as_flag(portable, "save_onnx", "portable"):
        from fusebridge.fuse_passes import optimize

        model = optimize(model, "lowering")[0]
    onnx.save(model_proto(model), os.fspath(path))
