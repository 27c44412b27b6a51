"""A partition of standard ONNX nodes, run by an ONNX Runtime session built once."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort

from fusebridge import conventions, kernels
from fusebridge.errors import ArgumentError, ExecutionError
from fusebridge.graph.checks import describe
from fusebridge.ops.standard import is_empty_unsafe
from fusebridge.runtime.empty_inputs import guard_recurrences
from fusebridge.runtime.partition_work import multiply_adds, work_terms
from fusebridge.runtime.rank_checks import Checks
from fusebridge.runtime.schedule import captured, ort_opsets
from fusebridge.runtime.step import Step

# A partition beside our kernels gets threads in a run where its MatMuls, Gemms and Convs do at
# least this many multiply-adds (partition_work.py): enough work that a second thread saves more
# than waking a second pool costs, which a small partition does not have (docs/performance.md,
# "Measurements behind the code").
THREADED_MIN_MACS = 1 << 23


def ort_error(what: str, label: str, group: list[ir.Node], exc: Exception) -> ExecutionError:
    """ONNX Runtime's exception as ours, naming the partition and, where ONNX Runtime's text
    names one by its name only ("... node. Name:'x' ..."), the node with its op type."""
    # Looked up by the whole quoted name: a name may hold quotes itself (Paddle's id check).
    node = next((n for n in group if n.name and f"Name:'{n.name}'" in str(exc)), None)
    at = f", at {describe(node)}" if node is not None else ""
    return ExecutionError(f"Session: {what} {label}{at}: {exc}")


_ORT_TYPES = {
    f"tensor({name.lower()})": ir.DataType(number)
    for name, number in onnx.TensorProto.DataType.items()
    if number != onnx.TensorProto.UNDEFINED
}


def _type_from_ort(outputs: list[ir.Value], sess: ort.InferenceSession) -> None:
    """The element types ONNX Runtime inferred for outputs of no known type: the partitions
    after this one, built later in the same order, read them as typed inputs."""
    typed = []
    for v, meta in zip(outputs, sess.get_outputs()):
        if v.dtype is None and meta.type in _ORT_TYPES:
            v.dtype = _ORT_TYPES[meta.type]
            typed.append(v)
    _type_our_readers(typed)


def _type_our_readers(typed: list[ir.Value]) -> None:
    """Output types of our nodes that read values just typed, and so on downstream, by our
    schemas' type inference (in onnx's registry)."""
    while typed:
        for use in typed.pop().uses():
            node = use.node
            known = [v for v in node.inputs if v is not None]
            if (
                not conventions.is_fusebridge(node)
                or all(v.dtype is not None for v in node.outputs)
                or any(v.dtype is None for v in known)
            ):
                continue
            schema = onnx.defs.get_schema(
                node.op_type, conventions.DOMAIN_VERSION, conventions.DOMAIN
            )
            types = {v.name: onnx.helper.make_tensor_type_proto(v.dtype.value, None) for v in known}
            try:
                inferred = onnx.shape_inference.infer_node_outputs(
                    schema, ir.serde.serialize_node(node), types
                )
            except Exception:  # onnx raises its own types: the value stays untyped
                continue
            for v in node.outputs:
                elem = inferred[v.name].tensor_type.elem_type if v.name in inferred else 0
                if v.dtype is None and elem:
                    v.dtype = ir.DataType(elem)
                    typed.append(v)


def ort_runner(sess: ort.InferenceSession) -> Callable[[list[str], dict, None], list]:
    """sess.run(output_names, feeds, None) through ONNX Runtime's binding (`_sess`) where the
    session has one: its Python `run` checks, per call, the feed names and types that a step's
    fixed inputs and the Session's feed checks already settled (a microsecond a call)."""
    return getattr(getattr(sess, "_sess", None), "run", sess.run)


def _unique_names(nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """ONNX Runtime refuses two nodes of one name, which a graph may hold (converters reuse
    names; an Identity joins the partition of its source): a repeated name gets a suffix."""
    seen: set[str] = set()
    for node in nodes:
        name, k = node.name, 1
        while node.name and node.name in seen:
            node.name, k = f"{name}_{k}", k + 1
        seen.add(node.name)
    return nodes


def label_of(group: list[ir.Node]) -> str:
    ops = ", ".join(n.op_type for n in group[:6]) + (", ..." if len(group) > 6 else "")
    return f"ONNX partition [{ops}] (from node {group[0].name!r})"


def onnx_step(
    group: list[ir.Node],
    constants: Mapping[str, np.ndarray],
    feeds: Mapping[str, ir.Value],
    opset_imports: Mapping[str, int] | None = None,
    alone: bool = False,
    checks: Checks | None = None,
) -> Step:
    """A run of ONNX Runtime's nodes as one ONNX Runtime session, built once, at the model's
    opset imports (of the domains ONNX Runtime implements; opset 17 without them). `alone`: the
    session is the whole program (no kernel of ours runs), so it keeps ORT's default threads and
    spinning; beside our kernels it runs on the calling thread. `checks`: of values the
    partition makes (rank_checks.py), run in the first run of each signature of input ranks,
    when ONNX Runtime is asked for those values too."""
    members = set(group)
    produced = {v.name for n in group for v in n.outputs}
    inputs, initializers = [], {}
    for n in group:
        for v in [*n.inputs, *captured(n)]:
            if v is None or v.name in produced or v in inputs:
                continue
            if v.name in constants:
                initializers[v.name] = v.const_value
            else:
                inputs.append(v)
    checks = checks or {}
    outputs = [
        v
        for n in group
        for v in n.outputs
        if v.is_graph_output() or any(u.node not in members for u in v.uses())
    ]
    probes = [v for n in group for v in n.outputs if v.name in checks and v not in outputs]
    label = label_of(group)

    def info(v: ir.Value) -> onnx.ValueInfoProto:
        # The whole type, not only the element type: a boundary value may be a sequence.
        if v.type is None or v.dtype is None:
            raise ArgumentError(f"Session: value {v.name!r} of {label} has no known type")
        return onnx.helper.make_value_info(v.name, ir.serde.serialize_type(v.type))

    def output_info(v: ir.Value) -> onnx.ValueInfoProto:
        # ONNX Runtime infers what onnx's shape inference cannot (its contrib ops' outputs).
        known = v.type is not None and v.dtype is not None
        return info(v) if known else onnx.helper.make_value_info(v.name, onnx.TypeProto())

    graph = onnx.helper.make_graph(
        _unique_names([ir.serde.serialize_node(n) for n in group]),
        "partition",
        [info(v) for v in inputs],
        [output_info(v) for v in outputs + probes],
        initializer=[ir.serde.serialize_tensor(t) for t in initializers.values()],
    )
    model = onnx.helper.make_model(
        graph,
        opset_imports=[
            onnx.helper.make_opsetid(domain, version)
            for domain, version in ort_opsets(dict(opset_imports or {})).items()
        ],
        ir_version=conventions.IR_VERSION,
    )
    proto = model.SerializeToString()

    def session(threads: int, spin_after_run: bool, proto: bytes = proto) -> ort.InferenceSession:
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        if not spin_after_run:
            # Beside our kernels, ONNX Runtime's workers spin between the parallel sections of
            # one run (faster than workers that sleep between them: docs/performance.md), then
            # stop when its run returns: left spinning, they would take a core from the kernel
            # that runs next.
            options.add_session_config_entry("session.force_spinning_stop", "1")
        # Its errors reach the caller as ExecutionError: logged too, they would print twice.
        options.log_severity_level = 4
        try:
            return ort.InferenceSession(proto, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # ONNX Runtime raises its own exception types
            raise ort_error("ONNX Runtime refused", label, group, exc) from exc

    # Alone (the whole program): ONNX Runtime's defaults. Beside our kernels: the calling thread
    # alone (an ORT pool of its own per partition would wake at every cut), except in a run with
    # THREADED_MIN_MACS of work, which goes to a second session of the kernels' thread count,
    # built at the first such run, whose workers stop spinning when its run returns.
    threads = kernels.get_num_threads()
    sess = session(threads if alone else 1, alone)
    _type_from_ort(outputs, sess)
    in_names, out_names = [v.name for v in inputs], [v.name for v in outputs]
    fed = [n for n in in_names if n in feeds]
    reads = f" (it reads input(s) {fed})" if fed else ""
    terms = [] if alone or threads == 1 else work_terms(group, in_names, constants)
    # [the session, the threaded one, the one for empty inputs (empty_inputs.py)], the last two
    # made at the first run that needs them
    runners = [ort_runner(sess), None, None]
    # The element type of each recurrent op's X, for the zeros the guard makes
    recurrent = {n.inputs[0].name: n.inputs[0].dtype for n in group if is_empty_unsafe(n)}
    checked: set[tuple] = set()  # the signatures of input ranks whose values were checked
    probed = [v.name for v in outputs + probes if v.name in checks]
    with_probes = out_names + [v.name for v in probes]

    def runner(xs: list[np.ndarray]) -> Callable:
        if recurrent and any(type(x) is np.ndarray and not x.size for x in xs):
            if runners[2] is None:
                types = {name: t.value for name, t in recurrent.items() if t is not None}
                guarded = guard_recurrences(onnx.load_from_string(proto), types)
                runners[2] = ort_runner(session(1, False, guarded.SerializeToString()))
            return runners[2]
        if bool(terms) and multiply_adds(terms, xs) >= THREADED_MIN_MACS:
            if runners[1] is None:
                runners[1] = ort_runner(session(threads, False))
            return runners[1]
        return runners[0]

    def call(names: list[str], xs: list[np.ndarray]) -> list[np.ndarray]:
        try:
            return runner(xs)(names, dict(zip(in_names, xs)), None)
        except Exception as exc:
            raise ort_error("ONNX Runtime failed in", label + reads, group, exc) from exc

    def run(xs: list[np.ndarray]) -> list[np.ndarray]:
        return call(out_names, xs)

    def run_checked(xs: list[np.ndarray]) -> list[np.ndarray]:
        ranks = tuple(np.ndim(x) for x in xs)
        if ranks in checked:
            return call(out_names, xs)
        results = call(with_probes, xs)
        made = dict(zip(with_probes, results))
        for name in probed:
            checks[name](made[name])
        checked.add(ranks)
        return results[: len(out_names)]

    step = Step("onnx", label, in_names, out_names, run_checked if probed else run)
    step.session = sess
    return step
