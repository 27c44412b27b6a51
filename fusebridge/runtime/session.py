"""Session: runs an IR model. Cut into steps once at creation (program.py): maximal runs of
standard ONNX nodes become ONNX Runtime sessions (built once, reused every run), fusebridge
nodes call the compiled kernels with weights packed once, Identity nodes are aliases. Arrays
pass between steps as they are (ONNX Runtime takes contiguous numpy inputs and returns outputs
without copies).
What run() returns belongs to the caller, as ONNX Runtime's results do: no later run writes
into it, and it shares no memory with a feed, the Session's initializers or another result.

backend="reference" runs the whole model on onnx.reference with the NumPy oracle of our ops.

device="cuda" runs the program on the cuda engine's device (program.py says which steps run
there and where the transfers are); run() hands out device arrays unless to_host=True."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import NamedTuple

import numpy as np
import onnx
import onnx_ir as ir

from fusebridge import conventions, ops
from fusebridge import random as fbrandom
from fusebridge.cuda.device import Launcher, current_launcher
from fusebridge.errors import (
    ArgumentError,
    ArgumentTypeError,
    Error,
    ExecutionError,
)
from fusebridge.graph.builder import model_opset
from fusebridge.graph.checks import check_graph, describe, feed_behind
from fusebridge.graph.type_inference import InferTypes
from fusebridge.integrations import load
from fusebridge.kernels.arguments import as_flag
from fusebridge.kernels.sequence_layout import as_offsets
from fusebridge.lod_tensor import LoDTensor
from fusebridge.ops.lowering import lower_to_standard
from fusebridge.runtime.device_ops import is_metadata
from fusebridge.runtime.feeds import Dims, FeedSpec, as_feed, check_lengths, check_names
from fusebridge.runtime.onnx_partition import ort_runner
from fusebridge.runtime.placement import Decision, Placement
from fusebridge.runtime.program import Program
from fusebridge.runtime.rank_checks import defer_run_checks
from fusebridge.runtime.step import Step

Feeds = Mapping[str, np.ndarray | LoDTensor]
# Bounds of the per-Session caches: programs by placement (each holds ONNX Runtime sessions
# and packed weights), placements by what decides them (symbol sizes and lengths fed).
PROGRAMS_KEPT = 8
PLACEMENTS_KEPT = 1024
PLACEMENTS = ("cost", "kernels", "onnxruntime")


class _Quick(NamedTuple):
    """The quick path's run of one signature: run(feeds, None) -> the graph outputs in order;
    subset: the feeds it takes, where it does not take them all."""

    run: Callable[[dict, None], list]
    subset: list[str] | None


class _Built:
    """A program built for one placement, with what _hand_out needs of it."""

    __slots__ = ("fed_out", "fresh", "kept", "program")

    def __init__(self, program: Program, graph_inputs: Sequence[str]) -> None:
        self.program = program
        self.fed_out = [n for n in graph_inputs if n in program.handed_out]
        self.kept = program.kept()
        # One ONNX Runtime session makes every output: each an array of its own, allocated by
        # that run (schedule.handed_out), so _hand_out has nothing to look at.
        self.fresh = [s.kind for s in program.steps] == ["onnx"] and not self.fed_out
        self.fresh = self.fresh and not self.kept


class Session:
    """Session(model) runs `model` (an onnx_ir.Model, or a model file fb.load reads);
    run(feeds) -> {name: array | LoDTensor}.

    A LoD input or output `x` is the pair of graph values `x` and `x.offsets`; feed it as
    LoDTensor(data, lengths=...) and it comes back as a LoDTensor.

    Feeds are numpy arrays of the input's declared dtype (another dtype is cast when numpy
    calls it same-kind and no value overflows), rank and static dimensions, one size per named
    dimension across inputs; run() checks all that before it runs anything. Feeds are never
    written. An input that has an initializer of the same name is a constant, not a feed.

    placement: where each GRU with a standard ONNX form runs (runtime/placement.py): "cost"
    decides per run from the feeds' shapes and lengths (explain() says how), "kernels" puts
    every one on our kernel, "onnxruntime" every one in ONNX Runtime. With device="cuda"
    every one stays on our kernel (the device's), whatever placement says: the costs are the
    CPU's.

    device: "cpu" (the default), or "cuda" / "cuda:N": our ops and the standard ops of
    runtime/device_ops.py run on the cuda engine's device, the rest in ONNX Runtime on the host
    with transfers around it; feeds may be host or device arrays, outputs are device arrays
    (LoDTensor outputs: device data, host offsets) unless run(..., to_host=True). The engine's
    CudaUnavailableError where it cannot run."""

    def __init__(
        self,
        model: ir.Model | str | os.PathLike,
        *,
        backend: str = "kernels",
        placement: str = "cost",
        device: str = "cpu",
    ) -> None:
        if isinstance(model, (str, os.PathLike)):
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
        if placement not in PLACEMENTS:
            raise ArgumentError(
                f"Session: placement must be one of {list(PLACEMENTS)}, got {placement!r}"
            )
        self.backend = backend
        self._mode = placement
        self.device = device
        self._launcher = _launcher_of(device, backend)
        if self._launcher is not None:
            placement = "kernels"  # the costs are the CPU's: on the device, our kernel
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
        # On a device, the feeds read on the host: offsets, lengths, the random state.
        self._host_feeds = {n for n in self._specs if is_metadata(n) or n in self._lengths_feeds}
        self._fed_offsets = self._offsets_from_feeds(graph)
        self._plain_outputs = all(
            conventions.offsets_name(n) not in self._graph_outputs for n in self.output_names
        )
        state = (fbrandom.SEED_INPUT, fbrandom.OFFSET_INPUT)
        self._draws = all(n in self._graph_inputs for n in state)
        # The quick path (_run_quick): feed signature -> the run of a program that is one ONNX
        # Runtime session making every output, for a model with plain array inputs and outputs.
        self._quick: dict[tuple, _Quick] = {}
        self._feed_names = tuple(self._specs)
        self._lengths_checked = tuple(self._lengths_feeds.items())
        self._labels = {name: f"input {name!r}" for name in self._specs}  # made once, not per run
        if backend == "reference":
            from onnx.reference import ReferenceEvaluator

            try:
                proto = ir.serde.serialize_model(model)
                self._evaluator = ReferenceEvaluator(proto, new_ops=ops.reference_ops())
            except Exception as exc:
                raise ExecutionError(f"Session: onnx.reference refused the model: {exc}") from exc
            return
        nodes = ir.traversal.RecursiveGraphIterator(model.graph)
        if any(v.dtype is None for n in nodes for v in n.outputs):
            # Partitions need their boundary types: inferred on a copy (our schemas are in
            # onnx's registry, so inference runs through our ops too).
            model = ir.from_proto(ir.to_proto(model))
            InferTypes()(model)
            graph = model.graph
        model, self._axes_checks = defer_run_checks(model)
        graph = model.graph
        # The inputs of this graph (a copy after inference): feed_behind matches by identity.
        feeds = {v.name: v for v in graph.inputs if v.name in self._graph_inputs}
        self._model = model
        self.placement = Placement(graph, feeds)
        self._programs: dict[tuple[bool, ...], _Built] = {}
        self._placements: dict[tuple, tuple[bool, ...]] = {}
        self._lock = threading.Lock()
        self.builds = 0  # programs built so far: one per distinct placement a run needed
        # Every candidate on our kernel: the program of the graph as given, built now, so that
        # a model our steps cannot run fails here, as it always did.
        count = len(self.placement.candidates)
        self._last = self._build((True,) * count)
        if placement == "onnxruntime":
            self._last = self._build((False,) * count)
        # Without a choice to make, every run takes one program without a look-up.
        self._fixed = self._last if placement != "cost" or not count else None
        self._forced = None if placement == "cost" else (placement == "kernels",) * count
        self._quick_ok = (
            self._launcher is None
            and self._plain_outputs
            and not self._draws
            and self._logical(self._graph_inputs) == list(self._graph_inputs)
        )

    @staticmethod
    def _logical(names: Sequence[str]) -> list[str]:
        return [
            n
            for n in names
            if not (
                n.endswith(conventions.OFFSETS_SUFFIX)
                and n[: -len(conventions.OFFSETS_SUFFIX)] in names
            )
        ]

    def _offsets_from_feeds(self, graph: ir.Graph) -> set[str]:
        """The LoD outputs whose offsets are a feed's, handed through unchanged (Identity
        only): checked when the feed was, so not again at each run."""
        found = set()
        for out in graph.outputs:
            name = out.name[: -len(conventions.OFFSETS_SUFFIX)]
            if not out.name.endswith(conventions.OFFSETS_SUFFIX) or name not in self.output_names:
                continue
            fed = feed_behind(out, self._graph_inputs)
            if fed is not None and set(fed[1]) <= {"Identity"}:
                found.add(name)
        return found

    def _lengths_of_kernels(self, graph: ir.Graph) -> dict[str, str]:
        """feed name -> the recurrence node (OpDef.recurrence) of a padded layout that takes it
        (through Identity or Cast) as its lengths."""
        found: dict[str, str] = {}
        for node in ir.traversal.RecursiveGraphIterator(graph):
            if not conventions.is_fusebridge(node) or node.op_type not in ops.REGISTRY:
                continue
            d = ops.op(node.op_type)
            if d.recurrence is None:
                continue
            layout = d.schema.attribute_values(node)[d.recurrence.layout]
            lengths = d.input(node, d.recurrence.lengths)
            if layout == "lod" or lengths is None:
                continue
            fed = feed_behind(lengths, self._graph_inputs)
            if fed is not None:
                cast = " (cast to int64)" if "Cast" in fed[1] else ""
                found.setdefault(fed[0], describe(node) + cast)
        return found

    # -- running ------------------------------------------------------------------------------
    def _flatten_feeds(self, feeds: Feeds, dims: Dims) -> dict[str, np.ndarray]:
        """The feeds checked, as the graph's inputs by name; fills `dims` (symbol -> size)."""
        check_names(feeds, self.input_names, self._constant_inputs)
        env: dict[str, np.ndarray] = {}
        for name in self.input_names:
            value = feeds[name]
            offsets = conventions.offsets_name(name)
            lod = offsets in self._graph_inputs
            if lod != isinstance(value, LoDTensor):
                expected = "a LoDTensor(data, lengths=...)" if lod else "an array, not a LoDTensor"
                raise ArgumentTypeError(
                    f"Session.run: input {name!r} must be {expected}, got {type(value).__name__}"
                )
            label = self._labels[name]
            if lod:
                data = as_feed(label, value.data, self._specs[name], dims)
                # A LoDTensor's fields are plain attributes: checked again against its data.
                split = as_offsets(value.offsets, f"Session.run: {label}", data.shape[0])
                env[offsets] = as_feed(f"{label} (its offsets)", split, self._specs[offsets], dims)
                env[name] = data
            elif self._launcher is not None:
                env[name] = self._device_feed(label, name, value, dims)
            else:
                env[name] = as_feed(label, value, self._specs[name], dims)
            if name in self._lengths_feeds:
                check_lengths(label, env[name], self._lengths_feeds[name])
        return env

    def _device_feed(self, label: str, name: str, value: object, dims: Dims) -> object:
        """A feed of a Session on a device: a host array checked as on the cpu (the program
        uploads it where a device step reads it, once a run), or a device array checked here
        (cast only where no value changes), taken as it is. Feeds read on the host (offsets,
        lengths, the random state) are downloaded."""
        xp, spec = self._launcher.xp, self._specs[name]
        arr = value if isinstance(value, xp.ndarray) and xp is not np else None
        interfaces = ("__cuda_array_interface__", "__dlpack__")
        if arr is None and not isinstance(value, (np.ndarray, np.generic)):
            if any(hasattr(value, a) for a in interfaces):
                try:
                    cuda = hasattr(value, interfaces[0])
                    arr = xp.asarray(value) if cuda else xp.from_dlpack(value)
                except Exception as exc:  # the array module's own types
                    raise ArgumentTypeError(
                        f"Session.run: {label} is neither a numpy array nor an array on "
                        f"{self._launcher.device}: {exc}"
                    ) from None
        if arr is None:
            return as_feed(label, value, spec, dims)
        if name in self._host_feeds:
            return as_feed(label, self._launcher.download(arr), spec, dims)
        want = spec.dtype or arr.dtype  # no declared type: any numeric array
        if arr.dtype != want or want.kind not in "biufc":
            # Cast only where no value can change: as_feed's checks of each value would read
            # the whole array back to the host.
            if want.kind not in "biufc" or not np.can_cast(arr.dtype, want, "safe"):
                raise ArgumentTypeError(
                    f"Session.run: {label} must be {spec.dtype or 'numeric'}, got a device "
                    f"array of {arr.dtype}"
                )
            arr = arr.astype(want)
        _check_dims(label, tuple(arr.shape), spec, dims)
        return arr if arr.flags.c_contiguous else xp.ascontiguousarray(arr)

    def _rng_feeds(self, feeds: Feeds, rng: fbrandom.Key | None) -> Feeds:
        """feeds with rng_seed and rng_offset from the key, for a model explicit_rng made."""
        if (rng is None and not self._draws) or not isinstance(feeds, Mapping):
            return feeds  # nothing to add (_flatten_feeds says what is wrong with a non-Mapping)
        state = (fbrandom.SEED_INPUT, fbrandom.OFFSET_INPUT)
        has_state = self._draws
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
        to_host: bool = False,
    ) -> dict[str, np.ndarray | LoDTensor]:
        """Outputs by name. With `profile`, adds each step's seconds under its label.

        A model with the inputs rng_seed and rng_offset (fuse_passes.explicit_rng) takes them
        from `rng`, a fusebridge.random.Key, and returns the next free offset as
        rng_offset_out: Key(rng.seed, out["rng_offset_out"]) continues the stream.

        to_host: on a device, download every output (numpy arrays, LoDTensors of host data);
        without it outputs stay on the device, except offsets and rng_offset_out, which are
        host arrays. A Session on the cpu hands out host arrays either way."""
        if profile is not None and not isinstance(profile, dict):
            raise ArgumentTypeError(
                f"Session.run: profile must be a dict (label -> seconds), got "
                f"{type(profile).__name__}"
            )
        if to_host is not False:  # the default costs no call
            to_host = as_flag(to_host, "Session.run", "to_host")
        if self._quick and rng is None and profile is None:
            quick = self._run_quick(feeds)
            if quick is not None:
                return quick
        if self._launcher is None:
            return self._run(feeds, rng, profile, False)
        with _device_scope(self._launcher):
            return self._run(feeds, rng, profile, to_host)

    def _run(
        self,
        feeds: Feeds,
        rng: fbrandom.Key | None,
        profile: dict[str, float] | None,
        to_host: bool,
    ) -> dict[str, np.ndarray | LoDTensor]:
        feeds = self._rng_feeds(feeds, rng)
        dims: Dims = {}
        env = self._flatten_feeds(feeds, dims)
        if self.backend == "reference":
            try:
                computed = self._evaluator.run(None, env)
            except Error:
                raise  # the op's reference names the node
            except Exception as exc:
                raise ExecutionError(f"Session: onnx.reference failed: {exc}") from exc
            # onnx.reference's ops may return their inputs or its initializers (a Loop that
            # runs zero times); the oracle is slow by design, so a copy of each result is free.
            results = [np.array(r, copy=True) for r in computed]
            owned = dict(zip(self._graph_outputs, results))
        else:
            built = self._fixed or self._built_for(dims, env)
            built.program.run(env, profile)
            if self._launcher is None:
                owned = self._hand_out(env, built)
            else:
                owned = self._hand_out_placed(env, built, to_host)
            taken = all(env[n] is feeds.get(n) for n in self._feed_names)  # no cast, no copy
            # Not for empty feeds: the quick path would hand them to ONNX Runtime's plain
            # session, which ends the process on some (the guarded one runs them:
            # empty_inputs.py).
            taken = taken and all(env[n].size for n in self._feed_names)
            if built.fresh and taken and self._quick_ok and len(self._quick) < PLACEMENTS_KEPT:
                self._quick[self._signature(feeds)] = self._quick_run(built.program.steps[0])
        if self._plain_outputs:  # no LoD output: the arrays as they are
            return owned
        out = {}
        for name in self.output_names:
            offsets = conventions.offsets_name(name)
            if offsets not in self._graph_outputs:
                out[name] = owned[name]
            elif name in self._fed_offsets:  # a feed's offsets, checked when it was fed
                out[name] = LoDTensor._checked_already(owned[name], owned[offsets])
            else:  # computed in the graph (lod_reset): checked here
                try:
                    if self._launcher is None:
                        out[name] = LoDTensor(owned[name], offsets=owned[offsets])
                    else:  # LoDTensor() takes host data only; the offsets are on the host
                        split = as_offsets(owned[offsets], "LoDTensor", owned[name].shape[0])
                        out[name] = LoDTensor._checked_already(owned[name], split)
                except Error as exc:
                    raise ExecutionError(
                        f"Session: the model's output {name!r} and its offsets {offsets!r} "
                        f"disagree: {exc}"
                    ) from exc
        return out

    def _hand_out(self, env: dict[str, np.ndarray], built: _Built) -> dict[str, np.ndarray]:
        """The graph outputs as arrays the caller owns. Most were allocated by this run and go
        out as they are; one is copied only when it may share memory with a feed (the caller
        keeps it), an array the Session keeps between runs (an initializer), or an output
        already handed out (a value and its Identity). Only the feeds and initializers that
        _handed_out found on a path to an output are looked at, so this is a few bounds checks.
        Kernel buffers reused across runs never get here: their steps allocate when their
        output is handed out (_Program._step)."""
        if built.fresh:
            return {name: env[name] for name in self._graph_outputs}
        guarded = [env[n] for n in built.fed_out] + built.kept
        owned = {}
        for name in self._graph_outputs:
            a = env[name]
            if any(np.may_share_memory(a, g) for g in guarded):
                a = a.copy()
            guarded.append(a)
            owned[name] = a
        return owned

    def _hand_out_placed(self, env: dict, built: _Built, to_host: bool) -> dict[str, object]:
        """_hand_out on a device: each output moved where it goes (the device, the host for
        metadata and with to_host), then copied where it may share memory with a feed, an
        array the Session keeps (an initializer or its device copy) or another output."""
        xp = self._launcher.xp
        guarded = [env[n] for n in built.fed_out] + built.kept
        owned, moved = {}, {}
        for name in self._graph_outputs:
            where = "host" if to_host or is_metadata(name) else "device"
            a = built.program.place(name, env[name], where, moved)
            if any(_shares(xp, a, g) for g in guarded):
                a = a.copy()
            guarded.append(a)
            owned[name] = a
        return owned

    def _signature(self, feeds: Mapping[str, np.ndarray]) -> tuple:
        """What run()'s checks of the feeds and the program of a run depend on: each feed's type,
        dtype, shape and strides (C-contiguous or not), and the bytes of the lengths the
        placement reads. Feeds of a signature that run() took as they are (no cast, no copy)
        pass its checks again, except the lengths' values (check_lengths)."""
        key = tuple(
            [
                (type(a), a.dtype, a.shape, a.strides)
                for a in map(feeds.__getitem__, self._feed_names)
            ]
        )
        if self.placement.lengths_feeds:
            key += tuple([feeds[n].tobytes() for n in self.placement.lengths_feeds])
        return key

    def _quick_run(self, step: Step) -> _Quick:
        """The quick path's run of `step`, a program's one ONNX Runtime session (through its
        binding: run() checked the feeds of this signature once)."""
        run = ort_runner(step.session)
        # A graph input nothing reads is left out: ONNX Runtime refuses a feed it does not declare.
        subset = None if set(step.inputs) == set(self._feed_names) else list(step.inputs)
        return _Quick(functools.partial(run, list(self._graph_outputs)), subset)

    def _run_quick(self, feeds: Feeds) -> dict[str, np.ndarray] | None:
        """A run whose feed signature was seen before with a program that is one ONNX Runtime
        session making every output: the session runs the feeds as they are. None where the
        signature is new, a lengths check fails or the session does: run() then goes the long
        way (naming what is wrong)."""
        if type(feeds) is not dict or len(feeds) != len(self._feed_names):
            return None
        try:
            quick = self._quick.get(self._signature(feeds))
        except (AttributeError, KeyError, TypeError):  # a missing feed, or not an array
            return None
        if quick is None:
            return None
        try:
            for name, consumer in self._lengths_checked:
                check_lengths(f"input {name!r}", feeds[name], consumer)
            if quick.subset is not None:
                feeds = {n: feeds[n] for n in quick.subset}
            results = quick.run(feeds, None)
        except Exception:  # ONNX Runtime raises its own types; the long way names it
            return None
        return dict(zip(self._graph_outputs, results))

    # -- placement ----------------------------------------------------------------------------
    @property
    def _program(self) -> Program:
        """The program of the last run (the only one, for a model without candidates)."""
        return self._last.program

    def _built_for(self, dims: Dims, env: Mapping[str, np.ndarray]) -> _Built:
        """The program of this run's placement: a dict look-up once its key was seen."""
        key = self.placement.key(dims, env)
        placement = self._placements.get(key)
        if placement is None:
            placement = self.placement.decide(self.placement.shapes(dims, env))
            with self._lock:  # runs on other threads may be filling it too
                if len(self._placements) >= PLACEMENTS_KEPT:
                    self._placements.pop(next(iter(self._placements)))
                self._placements[key] = placement
        built = self._programs.get(placement)
        if built is None:
            built = self._build(placement)
        self._last = built
        return built

    def _build(self, placement: tuple[bool, ...]) -> _Built:
        """The program with each candidate placed in ONNX Runtime lowered to its standard
        form (in a copy of the graph): it joins the partition around it. Kept in a small cache
        by placement, the least recently built leaving first."""
        with self._lock:
            if placement in self._programs:  # another thread built it meanwhile
                return self._programs[placement]
            model = self._model
            lowered = {c.index for c, k in zip(self.placement.candidates, placement) if not k}
            if lowered:
                model = ir.from_proto(ir.to_proto(model))
                nodes = list(model.graph)
                chosen = {nodes[i] for i in lowered}
                lower_to_standard(model.graph, model_opset(model), lambda n: n in chosen)
                InferTypes()(model)  # the lowered nodes' values need their types
            graph = model.graph
            feeds = {v.name: v for v in graph.inputs if v.name in self._graph_inputs}
            program = Program(
                graph,
                {},
                feeds,
                model.opset_imports,
                main=True,
                checks=self._axes_checks,
                launcher=self._launcher,
            )
            built = _Built(program, list(self._graph_inputs))
            self.builds += 1
            if len(self._programs) >= PROGRAMS_KEPT:
                self._programs.pop(next(iter(self._programs)))
            self._programs[placement] = built
            return built

    def explain(self, feeds: Feeds, *, rng: fbrandom.Key | None = None) -> list[Decision]:
        """Where each fusebridge node would run for these feeds, and why (checked as run()
        checks them; nothing runs)."""
        if self.backend == "reference":
            raise ArgumentError("Session.explain: the reference backend places nothing")
        dims: Dims = {}
        env = self._flatten_feeds(self._rng_feeds(feeds, rng), dims)
        shapes = self.placement.shapes(dims, env)
        if self._launcher is not None:
            chosen = f"Session(device={self.device!r}) puts every candidate on our kernel"
            return self.placement.explain(shapes, self._forced, chosen)
        if self._forced is not None:
            chosen = f"Session(placement={self._mode!r}) puts every candidate there"
            return self.placement.explain(shapes, self._forced, chosen)
        return self.placement.explain(shapes, self.placement.decide(shapes))


def _launcher_of(device: object, backend: str) -> Launcher | None:
    """None for device "cpu"; the cuda engine's launcher for "cuda" (CuPy's current device) or
    "cuda:N", or the engine's CudaUnavailableError where it cannot run here."""
    if isinstance(device, str) and device == "cpu":
        return None
    if not isinstance(device, str) or not re.fullmatch(r"cuda(:[0-9]+)?", device):
        raise ArgumentError(f"Session: device must be 'cpu', 'cuda' or 'cuda:N', got {device!r}")
    if backend == "reference":
        raise ArgumentError(
            "Session: backend='reference' runs on the host (onnx.reference); device="
            f"{device!r} needs backend='kernels'"
        )
    return current_launcher(int(device[5:]) if ":" in device else None)


def _device_scope(launcher: Launcher) -> contextlib.AbstractContextManager:
    """CuPy's device context of the launcher's GPU, so that the array module's own operations
    (device_ops, uploads) run on it with "cuda:N"; nothing under emulation."""
    cuda, index = getattr(launcher.xp, "cuda", None), getattr(launcher, "index", None)
    return contextlib.nullcontext() if cuda is None or index is None else cuda.Device(index)


def _shares(xp: object, a: object, b: object) -> bool:
    """np.may_share_memory for two host arrays, the array module's for two device arrays (CuPy
    compares no host array with a device one: they never share)."""
    a_device, b_device = isinstance(a, xp.ndarray), isinstance(b, xp.ndarray)
    if xp is not np and a_device and b_device:
        return bool(xp.may_share_memory(a, b))
    return a_device == b_device and bool(np.may_share_memory(a, b))


def _check_dims(label: str, got: tuple[int, ...], declared: FeedSpec, dims: Dims) -> None:
    """A device feed's shape against its input's declaration (as_feed's check, on a shape)."""
    if declared.dims is None:
        return
    if len(got) != len(declared.dims) or any(got[a] != d for a, d in declared.static):
        raise ArgumentError(
            f"Session.run: {label} is shaped {list(got)} where {declared.shape_text()} is declared"
        )
    for axis, d in declared.symbols:
        size, other, other_axis = dims.setdefault(d, (got[axis], label, axis))
        if size != got[axis]:
            raise ArgumentError(
                f"Session.run: {label} has {got[axis]} in dimension {axis}, but {other} has "
                f"{size} in dimension {other_axis}, and the model declares both as {d!r}"
            )
