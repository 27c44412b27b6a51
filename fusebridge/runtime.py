"""Session: runs an IR model. Partitioned once at creation: maximal runs of standard ONNX nodes
become ONNX Runtime sessions (built once, reused every run), fusebridge nodes call the compiled
kernels with weights packed once, Identity nodes are aliases. Arrays pass between steps as
they are (ONNX Runtime takes contiguous numpy inputs and returns outputs without copies).
What run() returns belongs to the caller, as ONNX Runtime's results do: no later run writes
into it, and it shares no memory with a feed, the Session's initializers or another result.

backend="reference" runs the whole model on onnx.reference with the NumPy oracle of our ops."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
from onnx_ir.passes.common import ShapeInferencePass

from fusebridge import ir as fir
from fusebridge import kernels
from fusebridge import random as fbrandom
from fusebridge.errors import (
    ArgumentError,
    ArgumentTypeError,
    Error,
    ExecutionError,
    ModelFormatError,
)
from fusebridge.kernels.sequence_layout import as_offsets
from fusebridge.lod_tensor import LoDTensor
from fusebridge.op_kernels import prepare
from fusebridge.session_feeds import Dims, FeedSpec, as_feed, check_lengths, check_names
from fusebridge.session_graph import check_graph, describe, feed_behind, feed_phrase

Feeds = Mapping[str, np.ndarray | LoDTensor]


class _Step:
    """One unit of execution: run(args) -> outputs, args read from env by name, except the
    initializers a step takes, which are bound once here (`constants`, aligned with inputs).
    `where` starts the message of an error the step raises: its node(s) and the feeds it reads."""

    __slots__ = ("constants", "inputs", "kind", "label", "outputs", "run", "where")

    def __init__(
        self,
        kind: str,
        label: str,
        inputs: list[str],
        outputs: list[str],
        run: Callable,
        constants: list[np.ndarray | None] | None = None,
    ) -> None:
        self.kind, self.label, self.inputs, self.outputs, self.run = (
            kind,
            label,
            inputs,
            outputs,
            run,
        )
        self.constants = constants or [None] * len(inputs)
        self.where = f"Session: {label}"

    def args(self, env: dict[str, np.ndarray]) -> list[np.ndarray | None]:
        return [env.get(n) if c is None else c for n, c in zip(self.inputs, self.constants)]


def _subgraphs(node: ir.Node) -> list[ir.Graph]:
    """Every graph inside node, nested ones included."""
    graphs = [g for _, g in fir.subgraphs(node)]
    return graphs + [g for graph in graphs for n in graph for g in _subgraphs(n)]


def _captured(node: ir.Node) -> list[ir.Value]:
    """The values node's subgraphs read from the scopes around node (ONNX outer-scope
    references): a step running node needs them as inputs, and runs after their producers."""
    inner = _subgraphs(node)
    if not inner:
        return []
    owned = {id(g) for g in inner}
    captured: dict[int, ir.Value] = {}
    for graph in inner:
        for v in [*(v for n in graph for v in n.inputs), *graph.outputs]:
            if v is None:
                continue
            owner = v.producer().graph if v.producer() is not None else v.graph
            if id(owner) not in owned:
                captured.setdefault(id(v), v)
    return list(captured.values())


def _kind(node: ir.Node) -> str:
    if fir.is_fusebridge(node):
        return "fusebridge"
    if node.domain in ("", "ai.onnx") and node.op_type == "Identity":
        return "alias"
    if node.domain in ("", "ai.onnx") and node.op_type in ("If", "Loop"):
        # Our ops inside: the control flow runs here, its bodies as programs of their own.
        inside = any(fir.is_fusebridge(n) for g in _subgraphs(node) for n in g)
        return "control" if inside else "onnx"
    if node.domain in ("", "ai.onnx"):
        return "onnx"
    raise ArgumentError(
        f"Session: node {node.name!r} has domain {node.domain!r}, which no backend runs"
    )


def _handed_out(groups: list[list[ir.Node]], graph: ir.Graph) -> set[str]:
    """The names of the values whose arrays a run of `graph` may hand out: its outputs and,
    walking back, every input of a step that may return an input as its output. Identity steps
    do; If and Loop steps do (a branch may return a value from around it, a Loop that runs zero
    times its initial values); so may our kernels (an inference Dropout of scale 1 returns its
    input; counting every kernel keeps this true for ops added later, at the price of buffer
    reuse for a kernel that only feeds another kernel's graph output). ONNX Runtime returns
    arrays it allocated in that run, never a feed, an initializer or another output's."""
    out = {v.name for v in graph.outputs}
    for group in reversed(groups):  # a topological order: every reader before its producer
        node = group[0]
        if _kind(node) != "onnx" and any(v.name in out for v in node.outputs):
            out.update(v.name for v in [*node.inputs, *_captured(node)] if v is not None)
    return out


def _schedule(nodes: Sequence[ir.Node]) -> list[list[ir.Node]]:
    """Nodes in a topological order that keeps ONNX nodes together as long as it can, cut into
    runs of one kind. A run of consecutive nodes of a topological order is executable as one
    unit, so each ONNX run becomes one ONNX Runtime session."""
    index = {n: i for i, n in enumerate(nodes)}
    waiting = {n: 0 for n in nodes}
    users: dict[ir.Node, list[ir.Node]] = {n: [] for n in nodes}
    for n in nodes:
        reads = [*n.inputs, *_captured(n)]
        producers = {v.producer() for v in reads if v is not None} & waiting.keys()
        waiting[n] = len(producers)
        for p in producers:
            users[p].append(n)
    ready = [n for n in nodes if waiting[n] == 0]
    groups: list[list[ir.Node]] = []
    while ready:
        current = groups[-1][0] if groups else None
        same = [n for n in ready if current is not None and _kind(n) == _kind(current) == "onnx"]
        # Continue an ONNX run if possible; otherwise run non-ONNX nodes before opening a new one.
        pick = min(same or [n for n in ready if _kind(n) != "onnx"] or ready, key=index.get)
        ready.remove(pick)
        if same and pick in same:
            groups[-1].append(pick)
        else:
            groups.append([pick])
        for u in users[pick]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    if sum(map(len, groups)) != len(nodes):
        raise ArgumentError("Session: the graph has a cycle")
    return groups


def _one(value: np.ndarray, what: str) -> object:
    """The single element of a Loop's or If's scalar input (ONNX allows shape [] or [1])."""
    flat = np.asarray(value).reshape(-1)
    if flat.size != 1:
        raise ArgumentError(f"Session: {what} must hold one value, got shape {np.shape(value)}")
    return flat[0]


def _truth(value: np.ndarray, what: str) -> bool:
    return bool(_one(value, what))


def _body(node: ir.Node, attribute: str) -> ir.Graph:
    """The If branch or Loop body `attribute` of node (an onnx_ir.Model need not have one)."""
    attr = node.attributes.get(attribute)
    if attr is None or attr.type != ir.AttributeType.GRAPH:
        raise ModelFormatError(f"Session: {describe(node)} has no graph attribute {attribute}")
    return attr.value


def _ort_error(what: str, label: str, group: list[ir.Node], exc: Exception) -> ExecutionError:
    """ONNX Runtime's exception as ours, naming the partition and, where ONNX Runtime's text
    names one by its name only ("... node. Name:'x' ..."), the node with its op type."""
    # Looked up by the whole quoted name: a name may hold quotes itself (Paddle's id check).
    node = next((n for n in group if n.name and f"Name:'{n.name}'" in str(exc)), None)
    at = f", at {describe(node)}" if node is not None else ""
    return ExecutionError(f"Session: {what} {label}{at}: {exc}")


def _outputs_match(node: ir.Node, body_outputs: int, expected: int) -> None:
    if body_outputs != expected:
        raise ModelFormatError(
            f"Session: a body of {describe(node)} has {body_outputs} output(s), expected "
            f"{expected} for the node's {len(node.outputs)}"
        )


def _stacked(values: list[np.ndarray], output: ir.Value, label: str) -> np.ndarray:
    """A Loop's scan output: the iterations' values on a new first axis."""
    if values:
        return np.stack(values)
    shape = output.shape
    if shape is None or output.dtype is None or not all(isinstance(d, int) for d in shape):
        raise ExecutionError(
            f"Session: {label} ran zero times, and the shape of its scan output "
            f"{output.name!r} is not known from the graph"
        )
    return np.empty((0, *shape), output.dtype.numpy())


class _Program:
    """A graph cut into steps once: the main graph, or an If branch or Loop body that a control
    step runs. `constants` holds the initializers in scope (an enclosing graph's too)."""

    def __init__(
        self,
        graph: ir.Graph,
        constants: Mapping[str, np.ndarray],
        feeds: Mapping[str, ir.Value],
    ) -> None:
        self.graph = graph
        self._feeds = feeds  # the Session's graph inputs, for messages that name a feed
        self._constants = {
            **constants,
            **{
                v.name: v.const_value.numpy()
                for v in graph.initializers.values()
                if v.const_value is not None
            },
        }
        # An initializer that is itself an output (no step makes it) enters env at each run.
        self._constant_outputs = {
            v.name: self._constants[v.name] for v in graph.outputs if v.name in self._constants
        }
        groups = _schedule(list(graph))
        self.handed_out = _handed_out(groups, graph)
        self._bodies: list[_Program] = []  # the If branches and Loop bodies of control steps
        self.steps = [self._step(group) for group in groups]

    def kept(self) -> list[np.ndarray]:
        """The arrays that outlive a run and that a run may hand out: the initializers among
        handed_out, here and in the bodies of control steps."""
        own = [a for name, a in self._constants.items() if name in self.handed_out]
        return own + [a for body in self._bodies for a in body.kept()]

    def run(self, env: dict[str, np.ndarray], profile: dict[str, float] | None = None) -> None:
        """Runs every step, adding each one's outputs to env."""
        env.update(self._constant_outputs)
        for step in self.steps:
            start = time.perf_counter() if profile is not None else 0.0
            try:
                results = step.run(step.args(env))
            except Error as exc:
                if step.kind != "fusebridge":
                    raise  # ONNX and control steps, and the steps of bodies, named their node
                # A kernel's message names its own argument: say which node and feed it was.
                raise type(exc)(f"{step.where}: {exc}") from exc
            except Exception as exc:
                raise ExecutionError(f"{step.where} failed: {exc}") from exc
            env.update(zip(step.outputs, results))
            if profile is not None:
                profile[step.label] = profile.get(step.label, 0.0) + time.perf_counter() - start

    def _step(self, group: list[ir.Node]) -> _Step:
        node = group[0]
        kind = _kind(node)
        if kind == "alias":
            if len(node.inputs) != 1 or node.inputs[0] is None or len(node.outputs) != 1:
                raise ModelFormatError(
                    f"Session: {describe(node)} has {len(node.inputs)} input(s) and "
                    f"{len(node.outputs)} output(s), expected 1 and 1"
                )
            source = node.inputs[0].name
            fixed = [self._constants.get(source)]  # an Identity of an initializer (lod_reset)
            return _Step(kind, node.name, [source], [node.outputs[0].name], lambda xs: xs, fixed)
        if kind == "control":
            return self._control_step(node)
        if kind == "fusebridge":
            consts = {
                i: self._constants[v.name]
                for i, v in enumerate(node.inputs)
                if v is not None and v.name in self._constants
            }
            # A kernel may write each run into the buffer of the last only when no run hands
            # that buffer out: the caller would see its result change with the next run.
            reuse = not any(v.name in self.handed_out for v in node.outputs)
            run = prepare(node, consts, reuse)
            names = [v.name if v is not None else "" for v in node.inputs]
            outputs = [v.name for v in node.outputs]
            fixed = [consts.get(i) for i in range(len(names))]
            step = _Step(kind, f"{node.op_type} {node.name}", names, outputs, run, fixed)
            step.where = f"Session: {describe(node)}{self._fed(node)}"
            return step
        return self._onnx_step(group)

    def _fed(self, node: ir.Node) -> str:
        """' (lengths is input 'data1' through Cast)': which of node's inputs come straight
        from a feed, by the names of node's schema."""
        slots = fir.schema(node.op_type).inputs
        found = [
            f"{slot.rstrip('?')} is {phrase}"
            for slot, v in zip(slots, node.inputs)
            if (phrase := feed_phrase(v, self._feeds))
        ]
        return f" ({', '.join(found)})" if found else ""

    def _onnx_step(self, group: list[ir.Node]) -> _Step:
        members = set(group)
        produced = {v.name for n in group for v in n.outputs}
        inputs, initializers = [], {}
        for n in group:
            for v in [*n.inputs, *_captured(n)]:
                if v is None or v.name in produced or v in inputs:
                    continue
                if v.name in self._constants:
                    initializers[v.name] = v.const_value
                else:
                    inputs.append(v)
        outputs = [
            v
            for n in group
            for v in n.outputs
            if v.is_graph_output() or any(u.node not in members for u in v.uses())
        ]
        label = self._label(group)

        def info(v: ir.Value) -> onnx.ValueInfoProto:
            if v.dtype is None:
                raise ArgumentError(f"Session: value {v.name!r} of {label} has no known type")
            return onnx.helper.make_tensor_value_info(v.name, v.dtype.value, None)

        graph = onnx.helper.make_graph(
            [ir.serde.serialize_node(n) for n in group],
            "partition",
            [info(v) for v in inputs],
            [info(v) for v in outputs],
            initializer=[ir.serde.serialize_tensor(t) for t in initializers.values()],
        )
        model = onnx.helper.make_model(
            graph,
            opset_imports=[onnx.helper.make_opsetid("", fir.ONNX_OPSET)],
            ir_version=fir.IR_VERSION,
        )
        options = ort.SessionOptions()
        options.intra_op_num_threads = kernels.get_num_threads()
        # Our OpenMP threads run between ORT calls: ORT's pool must not spin through them.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        # Its errors reach the caller as ExecutionError: logged too, they would print twice.
        options.log_severity_level = 4
        try:
            sess = ort.InferenceSession(
                model.SerializeToString(), options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:  # ONNX Runtime raises its own exception types
            raise _ort_error("ONNX Runtime refused", label, group, exc) from exc
        in_names, out_names = [v.name for v in inputs], [v.name for v in outputs]
        fed = [n for n in in_names if n in self._feeds]
        reads = f" (it reads input(s) {fed})" if fed else ""

        def run(xs: list[np.ndarray]) -> list[np.ndarray]:
            try:
                return sess.run(out_names, dict(zip(in_names, xs)))
            except Exception as exc:
                raise _ort_error("ONNX Runtime failed in", label + reads, group, exc) from exc

        return _Step("onnx", label, in_names, out_names, run)

    def _control_step(self, node: ir.Node) -> _Step:
        """An If or a Loop whose bodies hold our ops, run here: each body is a _Program, fed
        the values it reads from around it (ONNX outer-scope references) by name."""
        captured = [v.name for v in _captured(node)]
        names = [v.name if v is not None else "" for v in node.inputs] + captured
        fixed = [self._constants.get(n) if n else None for n in names]
        given, label = len(node.inputs), f"{node.op_type} {node.name}"
        cond = f"the cond of {describe(node)}"
        if node.op_type == "If":
            branches = [
                _Program(_body(node, b), self._constants, self._feeds)
                for b in ("then_branch", "else_branch")
            ]
            for branch in branches:
                _outputs_match(node, len(branch.graph.outputs), len(node.outputs))
            self._bodies += branches

            def run_if(xs: list[np.ndarray]) -> list[np.ndarray]:
                env = dict(zip(captured, xs[given:]))
                branch = branches[0 if _truth(xs[0], cond) else 1]
                branch.run(env)
                return [env[v.name] for v in branch.graph.outputs]

            return _Step("control", label, names, [v.name for v in node.outputs], run_if, fixed)
        body = _Program(_body(node, "body"), self._constants, self._feeds)
        self._bodies.append(body)
        carried = given - 2
        if carried < 0 or len(body.graph.inputs) != given or len(node.outputs) < carried:
            raise ModelFormatError(
                f"Session: {describe(node)} has {given} inputs (M, cond, N carried values) and "
                f"{len(node.outputs)} outputs; its body must take 2 + N inputs, got "
                f"{len(body.graph.inputs)}"
            )
        _outputs_match(node, len(body.graph.outputs), 1 + len(node.outputs))
        scan_values = body.graph.outputs[1 + carried :]

        def run_loop(xs: list[np.ndarray]) -> list[np.ndarray]:
            trips = None if xs[0] is None else int(_one(xs[0], f"the M of {describe(node)}"))
            going = True if xs[1] is None else _truth(xs[1], cond)
            state, scans = list(xs[2:given]), [[] for _ in scan_values]
            i = 0
            while going and (trips is None or i < trips):
                env = dict(zip(captured, xs[given:]))
                feeds = [np.array(i, np.int64), np.array(going), *state]
                env.update(zip((v.name for v in body.graph.inputs), feeds))
                body.run(env)
                results = [env[v.name] for v in body.graph.outputs]
                going = _truth(results[0], f"the cond the body of {describe(node)} returns")
                state = results[1 : 1 + carried]
                for scan, value in zip(scans, results[1 + carried :]):
                    scan.append(value)
                i += 1
            return [*state, *(_stacked(s, v, label) for s, v in zip(scans, scan_values))]

        return _Step("control", label, names, [v.name for v in node.outputs], run_loop, fixed)

    @staticmethod
    def _label(group: list[ir.Node]) -> str:
        ops = ", ".join(n.op_type for n in group[:6]) + (", ..." if len(group) > 6 else "")
        return f"ONNX partition [{ops}] (from node {group[0].name!r})"


class Session:
    """Session(model) runs `model` (an onnx_ir.Model, or a model file fb.load reads);
    run(feeds) -> {name: array | LoDTensor}.

    A LoD input or output `x` is the pair of graph values `x` and `x.offsets`; feed it as
    LoDTensor(data, lengths=...) and it comes back as a LoDTensor.

    Feeds are numpy arrays of the input's declared dtype (another dtype is cast when numpy
    calls it same-kind and no value overflows), rank and static dimensions, one size per named
    dimension across inputs; run() checks all that before it runs anything. Feeds are never
    written. An input that has an initializer of the same name is a constant, not a feed."""

    def __init__(self, model: ir.Model | str | os.PathLike, *, backend: str = "kernels") -> None:
        if isinstance(model, (str, os.PathLike)):
            from fusebridge.integrations import load

            model = load(model)
        if not isinstance(model, ir.Model):
            hint = " (onnx_ir.from_proto converts it)" if isinstance(model, onnx.ModelProto) else ""
            raise ArgumentTypeError(
                "Session: model must be an onnx_ir.Model or the path of a model file, got "
                f"{type(model).__name__}{hint}"
            )
        if not isinstance(backend, str) or backend not in ("kernels", "reference"):
            raise ArgumentError(
                f"Session: backend must be 'kernels' or 'reference', got {backend!r}"
            )
        self.backend = backend
        graph = model.graph
        check_graph(graph)
        # An input with an initializer of the same name (ONNX's default value) is a constant
        # here: feeding it is refused by name rather than silently ignored by our steps.
        self._constant_inputs = [v.name for v in graph.inputs if v.is_initializer()]
        self._graph_inputs = {v.name: v for v in graph.inputs if not v.is_initializer()}
        self._specs = {name: FeedSpec.of(v) for name, v in self._graph_inputs.items()}
        self._graph_outputs = [v.name for v in graph.outputs]
        self.input_names = self._logical(self._graph_inputs)
        self.output_names = self._logical(self._graph_outputs)
        self._lengths_feeds = self._lengths_of_kernels(graph)
        if backend == "reference":
            from onnx.reference import ReferenceEvaluator

            from fusebridge.op_reference import OPS

            try:
                proto = ir.serde.serialize_model(model)
                self._evaluator = ReferenceEvaluator(proto, new_ops=OPS)
            except Exception as exc:
                raise ExecutionError(f"Session: onnx.reference refused the model: {exc}") from exc
            return
        nodes = ir.traversal.RecursiveGraphIterator(model.graph)
        if any(v.dtype is None for n in nodes for v in n.outputs):
            # Partitions need their boundary types: inferred on a copy (our schemas are in
            # onnx's registry, so inference runs through our ops too).
            model = ir.from_proto(ir.to_proto(model))
            ShapeInferencePass()(model)
            graph = model.graph
        # The inputs of this graph (a copy after inference): feed_behind matches by identity.
        feeds = {v.name: v for v in graph.inputs if v.name in self._graph_inputs}
        self._program = _Program(graph, {}, feeds)
        self._fed_out = [n for n in self._graph_inputs if n in self._program.handed_out]
        self._kept = self._program.kept()

    @staticmethod
    def _logical(names: Sequence[str]) -> list[str]:
        return [
            n
            for n in names
            if not (n.endswith(fir.OFFSETS_SUFFIX) and n[: -len(fir.OFFSETS_SUFFIX)] in names)
        ]

    def _lengths_of_kernels(self, graph: ir.Graph) -> dict[str, str]:
        """feed name -> the GRU node that takes it (through Identity or Cast) as seq_lens."""
        found: dict[str, str] = {}
        for node in ir.traversal.RecursiveGraphIterator(graph):
            if node.domain != fir.DOMAIN or node.op_type not in ("GRU", "FusionGRU"):
                continue
            layout = node.attributes.get("layout")
            if layout is None or layout.value == "lod" or len(node.inputs) < 2:
                continue
            fed = (
                None if node.inputs[1] is None else feed_behind(node.inputs[1], self._graph_inputs)
            )
            if fed is not None:
                cast = " (cast to int64)" if "Cast" in fed[1] else ""
                found.setdefault(fed[0], describe(node) + cast)
        return found

    # -- running ------------------------------------------------------------------------------
    def _flatten_feeds(self, feeds: Feeds) -> dict[str, np.ndarray]:
        check_names(feeds, self.input_names, self._constant_inputs)
        env: dict[str, np.ndarray] = {}
        dims: Dims = {}
        for name in self.input_names:
            value = feeds[name]
            offsets = fir.offsets_name(name)
            lod = offsets in self._graph_inputs
            if lod != isinstance(value, LoDTensor):
                expected = "a LoDTensor(data, lengths=...)" if lod else "an array, not a LoDTensor"
                raise ArgumentTypeError(
                    f"Session.run: input {name!r} must be {expected}, got {type(value).__name__}"
                )
            label = f"input {name!r}"
            if lod:
                data = as_feed(label, value.data, self._specs[name], dims)
                # A LoDTensor's fields are plain attributes: checked again against its data.
                split = as_offsets(value.offsets, f"Session.run: {label}", data.shape[0])
                env[offsets] = as_feed(f"{label} (its offsets)", split, self._specs[offsets], dims)
                env[name] = data
            else:
                env[name] = as_feed(label, value, self._specs[name], dims)
            if name in self._lengths_feeds:
                check_lengths(label, env[name], self._lengths_feeds[name])
        return env

    def _rng_feeds(self, feeds: Feeds, rng: fbrandom.Key | None) -> Feeds:
        """feeds with rng_seed and rng_offset from the key, for a model explicit_rng made."""
        if not isinstance(feeds, Mapping):
            return feeds  # _flatten_feeds says what is wrong
        state = (fbrandom.SEED_INPUT, fbrandom.OFFSET_INPUT)
        has_state = all(n in self._graph_inputs for n in state)
        if rng is None:
            if has_state and not all(n in feeds for n in state):
                raise ArgumentError(
                    f"Session.run: the model draws random numbers from its inputs {list(state)}; "
                    "pass rng=fusebridge.random.key(seed) (or feed both)"
                )
            return feeds
        if not isinstance(rng, fbrandom.Key):
            raise ArgumentTypeError(
                f"Session.run: rng must be a fusebridge.random.Key, got {type(rng).__name__}"
            )
        if not has_state:
            raise ArgumentError(
                f"Session.run: rng= given, but the model has no inputs {list(state)} "
                "(it draws no random numbers, or explicit_rng has not run on it)"
            )
        if any(n in feeds for n in state):
            raise ArgumentError(f"Session.run: give rng= or feeds for {list(state)}, not both")
        # The model's inputs are int64: the 64-bit patterns of the key's uint64 numbers.
        return {
            **feeds,
            fbrandom.SEED_INPUT: np.array(fbrandom.as_int64(rng.seed), np.int64),
            fbrandom.OFFSET_INPUT: np.array(fbrandom.as_int64(rng.offset), np.int64),
        }

    def run(
        self,
        feeds: Feeds,
        *,
        rng: fbrandom.Key | None = None,
        profile: dict[str, float] | None = None,
    ) -> dict[str, np.ndarray | LoDTensor]:
        """Outputs by name. With `profile`, adds each step's seconds under its label.

        A model with the inputs rng_seed and rng_offset (fuse_passes.explicit_rng) takes them
        from `rng`, a fusebridge.random.Key, and returns the next free offset as
        rng_offset_out: Key(rng.seed, out["rng_offset_out"]) continues the stream."""
        if profile is not None and not isinstance(profile, dict):
            raise ArgumentTypeError(
                f"Session.run: profile must be a dict (label -> seconds), got "
                f"{type(profile).__name__}"
            )
        feeds = self._rng_feeds(feeds, rng)
        env = self._flatten_feeds(feeds)
        if self.backend == "reference":
            try:
                computed = self._evaluator.run(None, env)
            except Error:
                raise  # op_reference names the node
            except Exception as exc:
                raise ExecutionError(f"Session: onnx.reference failed: {exc}") from exc
            # onnx.reference's ops may return their inputs or its initializers (a Loop that
            # runs zero times); the oracle is slow by design, so a copy of each result is free.
            results = [np.array(r, copy=True) for r in computed]
            owned = dict(zip(self._graph_outputs, results))
        else:
            self._program.run(env, profile)
            owned = self._hand_out(env)
        fed = {id(v.offsets) for v in feeds.values() if isinstance(v, LoDTensor)}
        out = {}
        for name in self.output_names:
            offsets = fir.offsets_name(name)
            if offsets not in self._graph_outputs:
                out[name] = owned[name]
            elif id(env.get(offsets)) in fed:  # a feed's offsets, checked when it was made
                out[name] = LoDTensor._checked_already(owned[name], owned[offsets])
            else:  # computed in the graph (lod_reset): checked here
                try:
                    out[name] = LoDTensor(owned[name], offsets=owned[offsets])
                except Error as exc:
                    raise ExecutionError(
                        f"Session: the model's output {name!r} and its offsets {offsets!r} "
                        f"disagree: {exc}"
                    ) from exc
        return out

    def _hand_out(self, env: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The graph outputs as arrays the caller owns. Most were allocated by this run and go
        out as they are; one is copied only when it may share memory with a feed (the caller
        keeps it), an array the Session keeps between runs (an initializer), or an output
        already handed out (a value and its Identity). Only the feeds and initializers that
        _handed_out found on a path to an output are looked at, so this is a few bounds checks.
        Kernel buffers reused across runs never get here: their steps allocate when their
        output is handed out (_Program._step)."""
        guarded = [env[n] for n in self._fed_out] + self._kept
        owned = {}
        for name in self._graph_outputs:
            a = env[name]
            if any(np.may_share_memory(a, g) for g in guarded):
                a = a.copy()
            guarded.append(a)
            owned[name] = a
        return owned
