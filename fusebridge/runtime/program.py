"""A graph cut into steps once, and run: on the host, or on a device (Session(device="cuda")),
where each step reads its inputs where it runs them and the transfers between host and device
happen at the steps' boundaries (Program.place)."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx_ir as ir

from fusebridge import ops
from fusebridge.cuda.device import Launcher
from fusebridge.errors import Error, ExecutionError, ModelFormatError
from fusebridge.graph.checks import describe, feed_phrase
from fusebridge.runtime import device_ops
from fusebridge.runtime.control_flow import control_step
from fusebridge.runtime.onnx_partition import onnx_step
from fusebridge.runtime.rank_checks import Checks
from fusebridge.runtime.schedule import handed_out, kind, schedule
from fusebridge.runtime.step import Step


class Program:
    """A graph cut into steps once: the main graph (`main`), or an If branch or Loop body that a
    control step runs. `constants` holds the initializers in scope (an enclosing graph's too);
    `opset_imports` are the model's, which its ONNX Runtime partitions declare.

    With a `launcher` (Session(device="cuda")) the program runs on its device: standard nodes
    that device_ops implements and our ops with a "cuda" binding run there, on device arrays;
    ONNX Runtime partitions, our ops without one (on the cpu engine), If and Loop (their bodies
    on the host) read host arrays. Step.places says where each step reads each input; place()
    moves a value that is elsewhere, once a run. Small integer metadata (offsets, lengths,
    seeds: device_ops.HOST_SLOTS) is read on the host. Initializers read on the device are
    uploaded once, here."""

    def __init__(
        self,
        graph: ir.Graph,
        constants: Mapping[str, np.ndarray],
        feeds: Mapping[str, ir.Value],
        opset_imports: Mapping[str, int] | None = None,
        main: bool = False,
        checks: Checks | None = None,
        launcher: Launcher | None = None,
    ) -> None:
        self.graph = graph
        self._launcher = launcher
        self._uploaded: dict[str, Any] = {}  # initializer name -> its device copy
        self._constant_of: dict[str, str] = {}  # an Identity's output -> the initializer
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
        self._opset = device_ops.opset_of(self._opset_imports)
        self._kind = kind
        if launcher is not None:
            self._kind = functools.partial(kind, on_device=self._on_device)
        groups = schedule(list(graph), self._kind)
        self.handed_out = handed_out(groups, graph, self._kind)
        self._bodies: list[Program] = []  # the If branches and Loop bodies of control steps
        # A main graph run by ONNX Runtime alone: it may spin its threads as plain ORT does.
        self._alone = main and all(self._kind(g[0]) in ("onnx", "alias") for g in groups)
        self.steps = [self._step(group) for group in groups]

    def kept(self) -> list[np.ndarray]:
        """The arrays that outlive a run and that a run may hand out: the initializers among
        handed_out, here and in the bodies of control steps."""
        own = [a for name, a in self._constants.items() if name in self.handed_out]
        own += [a for name, a in self._uploaded.items() if name in self.handed_out]
        return own + [a for body in self._bodies for a in body.kept()]

    def _on_device(self, node: ir.Node) -> bool:
        return device_ops.supports(node, self._opset)

    def _constant(self, name: str, where: str | None) -> Any:
        """Initializer `name` (None if it is not one) where a step reads it: the host array, or
        its device copy, uploaded once (when the step that takes it is built)."""
        host = self._constants.get(name)
        if host is None or where != "device":
            return host
        if name not in self._uploaded:
            self._uploaded[name] = self._launcher.upload(host)
        return self._uploaded[name]

    def place(self, name: str, value: Any, where: str | None, moved: dict) -> Any:
        """env's value `name` where a reader wants it ("device", "host"; None: as it is). A
        value elsewhere is moved once a run (`moved` holds the copies of this run); an
        initializer, or an Identity of one, takes its copy made once (_constant)."""
        if value is None or where is None or placed(self._launcher, value, where):
            return value
        constant = self._constant_of.get(name, name)
        if constant in self._constants:
            return self._constant(constant, where)
        key = (name, where)
        if key not in moved:
            launcher = self._launcher
            moved[key] = launcher.upload(value) if where == "device" else launcher.download(value)
        return moved[key]

    def run(self, env: dict[str, np.ndarray], profile: dict[str, float] | None = None) -> None:
        """Runs every step, adding each one's outputs to env."""
        env.update(self._constant_outputs)
        for name, check in self._checks.items():  # a value that is a feed
            if name in env:
                check(env[name])
        moved: dict[tuple[str, str], Any] = {}  # this run's transfers (place)
        for step in self.steps:
            start = time.perf_counter() if profile is not None else 0.0
            try:
                args = step.args(env)
                if step.places is not None:
                    where = zip(step.inputs, args, step.places)
                    args = [self.place(name, a, p, moved) for name, a, p in where]
                results = step.run(args)
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
        step = self._make_step(group)
        if self._launcher is not None and step.places is None and step.kind != "alias":
            step.places = ["host"] * len(step.inputs)  # ONNX Runtime, the cpu engine, control
        return step

    def _make_step(self, group: list[ir.Node]) -> Step:
        node = group[0]
        what = self._kind(node)
        if what == "alias":
            if len(node.inputs) != 1 or node.inputs[0] is None or len(node.outputs) != 1:
                raise ModelFormatError(
                    f"Session: {describe(node)} has {len(node.inputs)} input(s) and "
                    f"{len(node.outputs)} output(s), expected 1 and 1"
                )
            source = node.inputs[0].name
            fixed = [self._constants.get(source)]  # an Identity of an initializer (lod_reset)
            if source in self._constants or source in self._constant_of:
                self._constant_of[node.outputs[0].name] = self._constant_of.get(source, source)
            return Step(what, node.name, [source], [node.outputs[0].name], lambda xs: xs, fixed)
        if what == "control":
            body = functools.partial(Program, opset_imports=self._opset_imports)
            step, bodies = control_step(node, self._constants, self._feeds, body)
            self._bodies += bodies
            return step
        if what == "device":
            return self._device_step(node)
        if what == "fusebridge":
            consts = {
                i: self._constants[v.name]
                for i, v in enumerate(node.inputs)
                if v is not None and v.name in self._constants
            }
            # A kernel may write each run into the buffer of the last only when no run hands
            # that buffer out: the caller would see its result change with the next run.
            reuse = not any(v.name in self.handed_out for v in node.outputs)
            # On a device, an op of ours without a "cuda" binding runs on the cpu engine with
            # transfers around it, as ONNX Runtime partitions do: a model always runs, and
            # profile shows what the op costs, rather than a model being refused until each
            # of its ops has a binding for the device.
            slots = ops.op(node.op_type).slots
            engine = "cpu"
            if self._launcher is not None and "cuda" in ops.op(node.op_type).bindings:
                engine = "cuda"
            # Bindings get the host initializers (one that packs weights packs them from the
            # host); a run's arguments are where the engine reads them.
            if engine == "cpu":
                run = ops.prepare(node, consts, reuse)
            else:
                run = ops.prepare(node, consts, reuse, engine)
            # Every slot of the schema, an absent one as "" (None in a run's arguments).
            names = [v.name if v is not None else "" for v in node.inputs]
            names += [""] * (len(slots) - len(names))
            packed = ops.op(node.op_type).packed
            places = [
                "host"
                if engine == "cpu"
                or s in device_ops.HOST_SLOTS
                or (s in packed and n in self._constants)
                else "device"
                for s, n in zip(slots, names)
            ]
            fixed = [self._constant(n, p) for n, p in zip(names, places)]
            outputs = [v.name for v in node.outputs]
            step = Step(what, f"{node.op_type} {node.name}", names, outputs, run, fixed)
            step.where = f"Session: {describe(node)}{self._fed(node)}"
            step.places = places if self._launcher is not None else None
            return step
        made = {v.name for n in group for v in n.outputs}
        checks = {k: c for k, c in self._checks.items() if k in made}
        return onnx_step(
            group, self._constants, self._feeds, self._opset_imports, self._alone, checks
        )

    def _device_step(self, node: ir.Node) -> Step:
        """A standard node on the device (device_ops.py), its initializers uploaded once."""
        names = [v.name if v is not None else "" for v in node.inputs]
        host = device_ops.host_inputs(node)
        places = ["host" if i in host else "device" for i in range(len(names))]
        fixed = [self._constant(n, p) for n, p in zip(names, places)]
        run = device_ops.prepare(node, self._launcher.xp, self._opset)
        outputs = [v.name for v in node.outputs]
        step = Step("device", f"{node.op_type} {node.name}", names, outputs, run, fixed)
        step.where = f"Session: {describe(node)}"
        step.places = places
        return step

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


def placed(launcher: Launcher, value: Any, where: str) -> bool:
    """Whether value is where a reader wants it: on the device, an array of the launcher's
    array module; on the host, any other value. Under emulation with numpy as the array module
    host and device are one memory, and every value is both."""
    on_device = isinstance(value, launcher.xp.ndarray)
    return on_device if where == "device" else not on_device or launcher.xp is np
