"""A graph cut into steps once, and run."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping

import numpy as np
import onnx_ir as ir

from fusebridge import ops
from fusebridge.errors import Error, ExecutionError, ModelFormatError
from fusebridge.graph.checks import describe, feed_phrase
from fusebridge.runtime.control_flow import control_step
from fusebridge.runtime.onnx_partition import onnx_step
from fusebridge.runtime.rank_checks import Checks
from fusebridge.runtime.schedule import handed_out, kind, schedule
from fusebridge.runtime.step import Step


class Program:
    """A graph cut into steps once: the main graph (`main`), or an If branch or Loop body that a
    control step runs. `constants` holds the initializers in scope (an enclosing graph's too);
    `opset_imports` are the model's, which its ONNX Runtime partitions declare."""

    def __init__(
        self,
        graph: ir.Graph,
        constants: Mapping[str, np.ndarray],
        feeds: Mapping[str, ir.Value],
        opset_imports: Mapping[str, int] | None = None,
        main: bool = False,
        checks: Checks | None = None,
    ) -> None:
        self.graph = graph
        # Checks of values (rank_checks.py): ONNX Runtime steps run those of the values they
        # make; run() those of the values other steps make.
        self._checks = checks or {}
        self._opset_imports = dict(opset_imports or {})
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
        groups = schedule(list(graph))
        self.handed_out = handed_out(groups, graph)
        self._bodies: list[Program] = []  # the If branches and Loop bodies of control steps
        # A main graph run by ONNX Runtime alone: it may spin its threads as plain ORT does.
        self._alone = main and all(kind(g[0]) in ("onnx", "alias") for g in groups)
        self.steps = [self._step(group) for group in groups]

    def kept(self) -> list[np.ndarray]:
        """The arrays that outlive a run and that a run may hand out: the initializers among
        handed_out, here and in the bodies of control steps."""
        own = [a for name, a in self._constants.items() if name in self.handed_out]
        return own + [a for body in self._bodies for a in body.kept()]

    def run(self, env: dict[str, np.ndarray], profile: dict[str, float] | None = None) -> None:
        """Runs every step, adding each one's outputs to env."""
        env.update(self._constant_outputs)
        for name, check in self._checks.items():  # a value that is a feed
            if name in env:
                check(env[name])
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
            if self._checks and step.kind != "onnx":
                for name, value in zip(step.outputs, results):
                    if name in self._checks:
                        self._checks[name](value)
            if profile is not None:
                profile[step.label] = profile.get(step.label, 0.0) + time.perf_counter() - start

    def _step(self, group: list[ir.Node]) -> Step:
        node = group[0]
        what = kind(node)
        if what == "alias":
            if len(node.inputs) != 1 or node.inputs[0] is None or len(node.outputs) != 1:
                raise ModelFormatError(
                    f"Session: {describe(node)} has {len(node.inputs)} input(s) and "
                    f"{len(node.outputs)} output(s), expected 1 and 1"
                )
            source = node.inputs[0].name
            fixed = [self._constants.get(source)]  # an Identity of an initializer (lod_reset)
            return Step(what, node.name, [source], [node.outputs[0].name], lambda xs: xs, fixed)
        if what == "control":
            body = functools.partial(Program, opset_imports=self._opset_imports)
            step, bodies = control_step(node, self._constants, self._feeds, body)
            self._bodies += bodies
            return step
        if what == "fusebridge":
            consts = {
                i: self._constants[v.name]
                for i, v in enumerate(node.inputs)
                if v is not None and v.name in self._constants
            }
            # A kernel may write each run into the buffer of the last only when no run hands
            # that buffer out: the caller would see its result change with the next run.
            reuse = not any(v.name in self.handed_out for v in node.outputs)
            run = ops.prepare(node, consts, reuse)
            # Every slot of the schema, an absent one as "" (None in a run's arguments).
            names = [v.name if v is not None else "" for v in node.inputs]
            names += [""] * (len(ops.schema(node.op_type).inputs) - len(names))
            outputs = [v.name for v in node.outputs]
            fixed = [consts.get(i) for i in range(len(names))]
            step = Step(what, f"{node.op_type} {node.name}", names, outputs, run, fixed)
            step.where = f"Session: {describe(node)}{self._fed(node)}"
            return step
        made = {v.name for n in group for v in n.outputs}
        checks = {k: c for k, c in self._checks.items() if k in made}
        return onnx_step(
            group, self._constants, self._feeds, self._opset_imports, self._alone, checks
        )

    def _fed(self, node: ir.Node) -> str:
        """' (lengths is input 'data1' through Cast)': which of node's inputs come straight
        from a feed, by the names of node's schema."""
        slots = ops.schema(node.op_type).inputs
        found = [
            f"{slot.rstrip('?')} is {phrase}"
            for slot, v in zip(slots, node.inputs)
            if (phrase := feed_phrase(v, self._feeds))
        ]
        return f" ({', '.join(found)})" if found else ""
