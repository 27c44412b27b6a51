"""The fuzz cases: mutations of every target (fuzz/targets.py) by input class, drawn from one
seed so that a run can be repeated case for case.

Input classes: truncation, byte flip, size field (huge lengths and sizes), wire type,
attribute (out-of-range values), name (hostile names), graph (cycles, dangling references),
feed (bad inputs to a good model), kernel (bad arguments to the kernels' Python faces). The
quick form takes a few cases of each per target; the long form many more.
"""

from __future__ import annotations

import copy
import json
import random
import struct
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from fuzz import wire
from fuzz.harness import Case
from fuzz.targets import Target, run_model, targets, zero_size_targets

HOSTILE_NAMES = (
    "../../escaped",
    "/tmp/fusebridge-escaped",
    "a/b",
    "..",
    ".",
    "",
    "x\x00y",
    "C:\\x",
    "n" * 5000,
    "\u00e9\u202e",
)
HUGE = (2**31 - 1, 2**32, 2**62, 2**63 - 1, 2**64 - 1)
BAD_PROBABILITIES = ("1.5", "-3", "nan", "inf")
SIZES = {"quick": 2, "long": 40}
HOLDER_SLOTS = {
    ("feed", "without inputs"),
    ("feed", "input renamed ghost"),
    ("fetch", "without outputs"),
}  # cases per target and generator


def _model_case(
    input_class: str,
    target: Target,
    label: str,
    files: dict[str, bytes],
    expect: str,
    feeds: dict | None = None,
    action: Callable[[Path], object] | None = None,
) -> Case:
    def prepare(work: Path) -> None:
        for name, data in files.items():
            (work / name).write_bytes(data)

    def run(work: Path) -> None:
        run_model(work / target.entry, target.feeds if feeds is None else feeds)

    return Case(input_class, f"{target.name}: {label}", action or run, prepare, expect)


def _replace(target: Target, file: str, data: bytes) -> dict[str, bytes]:
    return {**target.files, file: data}


def _file_case(
    input_class: str, target: Target, file: str, label: str, data: bytes, expect: str
) -> Case:
    """The target with one file's bytes replaced by `data`."""
    return _model_case(input_class, target, f"{file} {label}", _replace(target, file, data), expect)


# -- byte-level mutations, any format -------------------------------------------------------


def truncation(target: Target, rng: random.Random, n: int) -> Iterator[Case]:
    for file, data in target.files.items():
        cuts = {0, 1, len(data) // 2, len(data) - 1} | {rng.randrange(len(data)) for _ in range(n)}
        for cut in sorted(cuts)[: n + 2]:
            # A protobuf cut between two fields is a smaller valid message; anything else that
            # lost bytes is broken, and so is an empty file of any kind.
            expect = "any" if target.kind(file) == "protobuf" and cut else "error"
            yield _file_case("truncation", target, file, f"cut at {cut}", data[:cut], expect)


def byte_flip(target: Target, rng: random.Random, n: int) -> Iterator[Case]:
    for file, data in target.files.items():
        for _ in range(n):
            mutated = bytearray(data)
            spots = [rng.randrange(len(data)) for _ in range(rng.randint(1, 4))]
            for spot in spots:
                mutated[spot] ^= 1 << rng.randrange(8)
            yield _file_case(
                "byte flip", target, file, f"bits flipped at {spots}", bytes(mutated), "any"
            )


# -- protobuf files (ONNX models, Paddle ProgramDescs) ------------------------------------


def _protobuf_files(target: Target) -> Iterator[tuple[str, list[wire.Field]]]:
    for file, data in target.files.items():
        if target.kind(file) == "protobuf":
            yield file, wire.decode(data)


def size_field(target: Target, rng: random.Random, n: int) -> Iterator[Case]:
    for file, fields in _protobuf_files(target):
        everything = wire.walk(fields)
        lengths = [k for k, (p, i) in enumerate(everything) if p[i].wire_type == wire.BYTES]
        numbers = [k for k, (p, i) in enumerate(everything) if p[i].wire_type == wire.VARINT]
        for _ in range(n):
            tree = copy.deepcopy(fields)
            k = rng.choice(lengths)
            p, i = wire.walk(tree)[k]
            p[i].length_override = rng.choice(HUGE)
            # A length that runs past the file breaks it, unless it lies inside a field the
            # reader skips (a nested one: Paddle's op_version_map, say).
            yield _file_case(
                "size field",
                target,
                file,
                f"length of field #{k} (number {p[i].number}) = {p[i].length_override}",
                wire.encode(tree),
                "error" if p is tree else "any",
            )
            tree = copy.deepcopy(fields)
            k = rng.choice(numbers)
            p, i = wire.walk(tree)[k]
            p[i].value = rng.choice((*HUGE, -1, -(2**63)))
            yield _file_case(
                "size field",
                target,
                file,
                f"varint field #{k} (number {p[i].number}) = {p[i].value}",
                wire.encode(tree),
                "any",
            )
    for file, data in target.files.items():
        if target.kind(file) != "binary":
            continue
        for _ in range(n):
            # Header fields (counts, sizes, dims) sit in the first bytes of each record.
            spot = rng.randrange(0, min(len(data), 256) - 8, 4)
            value = rng.choice(HUGE)
            mutated = bytearray(data)
            mutated[spot : spot + 8] = struct.pack("<Q", value)
            yield _file_case(
                "size field", target, file, f"8 bytes at {spot} = {value}", bytes(mutated), "any"
            )
        # A header that declares little inside a file of 6 GiB: nothing may read it whole.
        yield Case(
            "size field",
            f"{target.name}: {file} followed by 6 GiB (sparse)",
            lambda work: run_model(work / target.entry, target.feeds),
            lambda work, file=file: _sparse_tail(work, target, file),
            "any",
        )


def _sparse_tail(work: Path, target: Target, file: str) -> None:
    for name, data in target.files.items():
        (work / name).write_bytes(data)
    with open(work / file, "r+b") as f:
        f.truncate(6 << 30)


def wire_type(target: Target, rng: random.Random, n: int) -> Iterator[Case]:
    for file, fields in _protobuf_files(target):
        everything = wire.walk(fields)
        for _ in range(n):
            tree = copy.deepcopy(fields)
            k = rng.randrange(len(everything))
            p, i = wire.walk(tree)[k]
            new = rng.choice([w for w in (0, 1, 2, 5) if w != p[i].wire_type])
            p[i].wire_type = new
            p[i].children = None
            if new != wire.BYTES and isinstance(p[i].value, bytes):
                p[i].value = int.from_bytes(p[i].value[:8].ljust(8, b"\0"), "little")
            yield _file_case(
                "wire type",
                target,
                file,
                f"field #{k} (number {p[i].number}) retyped to wire type {new}",
                wire.encode(tree),
                "any",
            )


# -- format-aware mutations -----------------------------------------------------------------


def _onnx_model(target: Target):
    import onnx

    return onnx.load_model_from_string(target.files["model.onnx"])


def _onnx_case(input_class: str, target: Target, label: str, model, expect: str, **kw) -> Case:
    return _model_case(
        input_class, target, label, {"model.onnx": model.SerializeToString()}, expect, **kw
    )


def _mxnet_symbol(target: Target) -> dict:
    return json.loads(target.files["m-symbol.json"])


def _mxnet_case(input_class: str, target: Target, label: str, symbol: dict, expect: str) -> Case:
    text = json.dumps(symbol).encode()
    return _model_case(input_class, target, label, _replace(target, "m-symbol.json", text), expect)


def _paddle_attrs(fields: list[wire.Field]) -> list[tuple[str, wire.Field]]:
    """(op type, attribute) for every op attribute of every block of a ProgramDesc."""
    found = []
    for block in (f for f in fields if f.number == 1 and f.children):
        for op in (f for f in block.children if f.number == 4 and f.children):
            op_type = next((f.value.decode() for f in op.children if f.number == 3), "?")
            found += [(op_type, a) for a in op.children if a.number == 4 and a.children]
    return found


def _attr_name(attr: wire.Field) -> str:
    return next((f.value.decode(errors="replace") for f in attr.children if f.number == 1), "")


def attribute(target: Target, rng: random.Random, n: int) -> Iterator[Case]:
    if target.format == "onnx":
        from onnx import helper, numpy_helper

        base = _onnx_model(target)
        for k, node in enumerate(base.graph.node):
            if node.op_type == "GRU":
                for name, value in (
                    ("hidden_size", 0),
                    ("hidden_size", -1),
                    ("hidden_size", 2**40),
                    ("hidden_size", 2.5),
                    ("direction", "sideways"),
                    ("linear_before_reset", 2),
                    ("activations", ["Sigmoid"]),
                    ("clip", -1.0),
                ):
                    model = copy.deepcopy(base)
                    g = model.graph.node[k]
                    del g.attribute[:]
                    g.attribute.extend(
                        [a for a in base.graph.node[k].attribute if a.name != name]
                        + [helper.make_attribute(name, value)]
                    )
                    yield _onnx_case("attribute", target, f"GRU {name}={value!r}", model, "error")
            if node.op_type == "Dropout" and len(node.input) > 1:
                for ratio in (1.5, -3.0, float("nan"), float("inf")):
                    model = copy.deepcopy(base)
                    ratio_name = node.input[1]
                    for init in model.graph.initializer:
                        if init.name == ratio_name:
                            init.CopyFrom(numpy_helper.from_array(np.float32(ratio), ratio_name))
                    constant = np.array(ratio, np.float32)
                    for c in model.graph.node:
                        if c.op_type == "Constant" and c.output[0] == ratio_name:
                            c.attribute[0].t.CopyFrom(numpy_helper.from_array(constant))
                    yield _onnx_case("attribute", target, f"Dropout ratio {ratio}", model, "error")
    elif target.format == "mxnet":
        base = _mxnet_symbol(target)
        for k, node in enumerate(base["nodes"]):
            attrs = node.get("attrs", {})
            changes = []
            if node["op"] == "Dropout":
                # Axes are checked against the rank where the rank is known: at load when the
                # input's rank is declared, else where the dropout runs (an inference dropout
                # too: it is not folded away while its rank is unknown).
                changes += [("p", v) for v in BAD_PROBABILITIES]
                changes += [("axes", "(99,)"), ("axes", "(0, 0)")]
            if node["op"] == "RNN":
                changes += [
                    *(("state_size", v) for v in ("0", "-1", "99999999999")),
                    *(("num_layers", v) for v in ("0", "-1")),
                    *(("p", v) for v in BAD_PROBABILITIES),
                    ("mode", "lstm"),
                ]
            if node["op"] == "Dropout":
                symbol = copy.deepcopy(base)
                symbol["nodes"][k]["attrs"] = {**attrs, "mode": "always", "axes": "(99,)"}
                yield _mxnet_case(
                    "attribute", target, "Dropout(mode=always, axes=(99,))", symbol, "error"
                )
            for key, value, *expect in changes:
                symbol = copy.deepcopy(base)
                symbol["nodes"][k].setdefault("attrs", dict(attrs))[key] = value
                yield _mxnet_case(
                    "attribute",
                    target,
                    f"{node['op']} {key}={value}",
                    symbol,
                    expect[0] if expect else "error",
                )
        # A few bytes that ask for 1.6 GB of zeros: must stay symbolic or be refused.
        symbol = copy.deepcopy(base)
        symbol["nodes"].append(
            {"op": "_zeros", "name": "big", "attrs": {"shape": "(20000, 20000)"}, "inputs": []}
        )
        symbol["heads"].append([len(symbol["nodes"]) - 1, 0, 0])
        yield _mxnet_case("attribute", target, "_zeros(20000, 20000) as an output", symbol, "any")
    elif target.format == "paddle":
        fields = wire.decode(target.files["inference.pdmodel"])
        changes = {
            "dropout_prob": [(4, v) for v in (1.5, -3.0, float("nan"), float("inf"))],
            "origin_mode": [(5, b"False"), (5, b"True")],
            "is_reverse": [(5, b"False")],
            "gate_activation": [(5, b"swish")],
            "activation": [(5, b"gelu")],
            "padding_idx": [(3, 2**31 - 1)],
        }
        # Paddle compares ids with padding_idx and never indexes with it: one outside the
        # table changes nothing (docs/paddle.md), so the model may load.
        harmless = {"padding_idx"}
        attrs = _paddle_attrs(fields)
        for k, (op_type, attr) in enumerate(attrs):
            for field, value in changes.get(_attr_name(attr), []):
                tree = copy.deepcopy(fields)
                mutated = _paddle_attrs(tree)[k][1]
                kept = [f for f in mutated.children if f.number in (1, 2)]
                if field == 4:
                    payload = wire.Field(
                        4, wire.FIXED32, struct.unpack("<I", struct.pack("<f", value))[0]
                    )
                elif field == 5:
                    payload = wire.Field(5, wire.BYTES, value)
                    kept = [f for f in kept if f.number == 1] + [wire.Field(2, wire.VARINT, 2)]
                else:
                    payload = wire.Field(field, wire.VARINT, value)
                mutated.children = kept + [payload]
                yield _model_case(
                    "attribute",
                    target,
                    f"{op_type} {_attr_name(attr)}={value!r}",
                    _replace(target, "inference.pdmodel", wire.encode(tree)),
                    "any" if _attr_name(attr) in harmless else "error",
                )


def _onnx_outputs(target: Target) -> Iterator[tuple[str, object]]:
    """The graph outputs of an ONNX target renamed to each hostile name, producer included."""
    base = _onnx_model(target)
    old = base.graph.output[0].name
    for hostile in HOSTILE_NAMES:
        model = copy.deepcopy(base)
        model.graph.output[0].name = hostile
        for node in model.graph.node:
            node.output[:] = [hostile if o == old else o for o in node.output]
            node.input[:] = [hostile if i == old else i for i in node.input]
        yield hostile, model


def name(target: Target, rng: random.Random, n: int) -> Iterator[Case]:
    """Hostile output names must not make `fusebridge run -o DIR` write outside DIR."""
    if target.format != "onnx":
        return
    for hostile, model in _onnx_outputs(target):

        def cli_run(work: Path) -> None:
            from fusebridge.cli import command as cli

            inputs = []
            for k, (feed, value) in enumerate(target.feeds.items()):
                np.save(work / f"in{k}.npy", value)
                inputs.append(f"{feed}=in{k}.npy")
            (work / "out").mkdir()
            cli.run_command("model.onnx", inputs, [], str(work / "out"), "kernels")

        yield _onnx_case(
            "name", target, f"output named {hostile[:20]!r}", model, "any", action=cli_run
        )


def graph(target: Target, rng: random.Random, n: int) -> Iterator[Case]:
    if target.format == "onnx":
        base = _onnx_model(target)
        nodes = base.graph.node

        def mutated(change: Callable) -> object:
            model = copy.deepcopy(base)
            change(model.graph)
            return model

        def dangling_input(g):
            [x for x in g.node if x.input][-1].input[0] = "ghost"

        def dangling_output(g):
            g.output[0].name = "ghost"

        def cycle(g):
            g.node[0].input.append(g.node[-1].output[0])
            g.node[0].input[0] = g.node[-1].output[0]

        def duplicate_producer(g):
            g.node[-1].output[0] = g.node[0].output[0]

        def no_graph(g):
            g.ClearField("node")

        def reversed_order(g):
            order = list(g.node)[::-1]
            g.ClearField("node")
            g.node.extend(order)

        def drop_input(g):
            victim = next((x for x in g.node if len(x.input) > 1), g.node[0])
            del victim.input[:]

        for change, expect in (
            (dangling_input, "error"),
            (dangling_output, "error"),
            (cycle, "error"),
            (duplicate_producer, "error"),
            (no_graph, "error"),
            (reversed_order, "any"),
            (drop_input, "error"),
        ):
            if nodes:
                yield _onnx_case("graph", target, change.__name__, mutated(change), expect)
    elif target.format == "mxnet":
        base = _mxnet_symbol(target)
        count = len(base["nodes"])
        ops = [k for k, node in enumerate(base["nodes"]) if node["op"] != "null" and node["inputs"]]

        def edit(label: str, change: Callable[[dict], None], expect: str = "error") -> Case:
            symbol = copy.deepcopy(base)
            change(symbol)
            return _mxnet_case("graph", target, label, symbol, expect)

        k = ops[len(ops) // 2]
        yield edit(
            "input node out of range",
            lambda s: s["nodes"][k]["inputs"][0].__setitem__(0, count + 5),
        )
        yield edit("input output index 7", lambda s: s["nodes"][k]["inputs"][0].__setitem__(1, 7))
        yield edit("self reference", lambda s: s["nodes"][k]["inputs"][0].__setitem__(0, k))
        yield edit(
            "forward reference", lambda s: s["nodes"][k]["inputs"][0].__setitem__(0, count - 1)
        )
        yield edit("head out of range", lambda s: s["heads"].__setitem__(0, [count + 1, 0, 0]))
        yield edit("arg_nodes out of range", lambda s: s["arg_nodes"].append(count + 9))
        yield edit("negative input", lambda s: s["nodes"][k]["inputs"][0].__setitem__(0, -1))
        yield edit("no heads", lambda s: s.__setitem__("heads", []))
        for hostile in HOSTILE_NAMES[:5]:
            yield edit(
                f"node named {hostile!r}",
                lambda s, h=hostile: s["nodes"][k].__setitem__("name", h),
                "any",
            )
    elif target.format == "paddle":
        fields = wire.decode(target.files["inference.pdmodel"])
        ops = [
            (b, o)
            for b in fields
            if b.number == 1 and b.children
            for o in b.children
            if o.number == 4 and o.children
        ]

        def op_type(op: wire.Field) -> str:
            return next((f.value.decode() for f in op.children if f.number == 3), "?")

        for k, (_, op) in enumerate(ops):
            if (
                op_type(op)
                not in (
                    "feed",
                    "fetch",
                    "gru",
                    "lookup_table",
                    "lookup_table_v2",
                    "mul",
                    "crf_decoding",
                )
                and rng.random() > 0.2
            ):
                continue
            for label, change in (
                ("without inputs", lambda o: [f for f in o.children if f.number != 1]),
                ("without outputs", lambda o: [f for f in o.children if f.number != 2]),
                ("input renamed ghost", _rename_first_argument),
                (
                    "type unknown",
                    lambda o: (
                        [f for f in o.children if f.number != 3]
                        + [wire.Field(3, wire.BYTES, b"no_such_op")]
                    ),
                ),
            ):
                tree = copy.deepcopy(fields)
                victim = [
                    o
                    for b in tree
                    if b.number == 1 and b.children
                    for o in b.children
                    if o.number == 4 and o.children
                ][k]
                victim.children = change(victim)
                # A feed op reads the executor's holder variable 'feed' and a fetch op writes
                # 'fetch': bookkeeping the loader does not need (a feed means its Out and col).
                holder = (op_type(op), label) in HOLDER_SLOTS
                yield _model_case(
                    "graph",
                    target,
                    f"op {k} ({op_type(op)}) {label}",
                    _replace(target, "inference.pdmodel", wire.encode(tree)),
                    "any" if holder else "error",
                )


def _rename_first_argument(op: wire.Field) -> list[wire.Field]:
    for var in (f for f in op.children if f.number == 1 and f.children):
        for arg in var.children:
            if arg.number == 2:
                arg.value = b"ghost"
                return op.children
    return op.children


def feed(target: Target, rng: random.Random, n: int) -> Iterator[Case]:
    """Bad feeds to a good model, and good ones in odd forms (read-only, strided)."""
    import fusebridge

    good = target.feeds
    name0, value0 = next(iter(good.items()))
    data0 = value0.data if isinstance(value0, fusebridge.LoDTensor) else value0

    def with_feed(value) -> dict:
        return {**good, name0: value}

    def case(label: str, feeds: dict | Callable[[], dict], expect: str = "error") -> Case:
        def run(work: Path) -> None:
            run_model(work / target.entry, feeds() if callable(feeds) else feeds)

        return _model_case("feed", target, label, target.files, expect, action=run)

    yield case("missing feed", {k: v for k, v in good.items() if k != name0})
    yield case("unknown feed", {**good, "nonexistent": data0})
    yield case("feed of rank + 1", with_feed(data0[None]))
    yield case("feed as a list", with_feed(data0.tolist()), "any")  # np.asarray's meaning
    yield case("feed of dtype object", with_feed(data0.astype(object)))
    yield case("feed of dtype complex", with_feed(data0.astype(np.complex64)))
    if isinstance(value0, fusebridge.LoDTensor):
        ids = value0.data
        vocab_probe = np.full_like(ids, 2**40)
        yield case("negative ids", with_feed(fusebridge.LoDTensor(-ids - 1, value0.lengths)))
        yield case(
            "ids beyond any vocabulary",
            with_feed(fusebridge.LoDTensor(vocab_probe, value0.lengths)),
        )
        yield case(
            "ids shaped [words, 2]",
            with_feed(fusebridge.LoDTensor(np.repeat(ids, 2, 1), value0.lengths)),
        )
        yield case("a plain array for a LoD input", with_feed(ids))
        wrapping = [2**63 - 1, 2**63 - 1, 304]
        yield case("lengths wrapping int64", lambda: with_feed(fusebridge.LoDTensor(ids, wrapping)))
        readonly = ids.copy()
        readonly.flags.writeable = False
        yield case(
            "read-only LoD data", with_feed(fusebridge.LoDTensor(readonly, value0.lengths)), "ok"
        )
    else:
        readonly = data0.copy()
        readonly.flags.writeable = False
        yield case("read-only feed", with_feed(readonly), "ok")
        strided = np.repeat(data0, 2, axis=-1)[..., ::2]
        yield case("strided feed", with_feed(strided), "ok")
        if data0.dtype == np.float32:
            # float64 rounds to float32 (as a float32 model computes anyway), but no value may
            # overflow to inf.
            yield case("float64 for float32", with_feed(data0.astype(np.float64) + 1e-12), "ok")
            yield case("float64 beyond float32", with_feed(data0.astype(np.float64) * 1e300))
        if target.format == "onnx":  # MXNet symbols declare no shapes: a longer row may be fine
            yield case("wrong last dim", with_feed(np.concatenate([data0, data0], -1)))
    if target.name == "mxnet/gru_tagger":
        for bad in (np.nan, 1e30, -1.0, 2.5, np.inf):
            yield case(f"sequence length {bad}", {**good, "data1": np.array([7, bad], np.float32)})


def _zeroed(target: Target) -> Iterator[tuple[str, dict, str]]:
    """(label, feeds, expect): the target's feeds with one dimension at 0. A dimension the model
    declares static must be refused; a named one goes to 0 in every input that declares it, an
    unnamed axis 0 (Paddle 3's batch) in every input, any other unnamed one in its input alone.
    Zero-size feeds may run or be refused by name, as the model's own runtime does (ONNX
    Runtime refuses a Reshape of an empty tensor to -1; MXNet symbols have no zero-size shapes):
    tests/runtime/test_session_empty_inputs.py compares the results with ONNX Runtime's and
    Paddle's."""
    import tempfile

    import fusebridge

    if target.format == "mxnet":
        for name, value in target.feeds.items():
            for axis in range(value.ndim):
                # axis 0 is every input's batch; 0 steps come with lengths of 0
                feeds = {k: _zero_axis(v, 0) if axis == 0 else v for k, v in target.feeds.items()}
                feeds[name] = _zero_axis(value, axis)
                if "data1" in feeds and axis == 1:
                    feeds["data1"] = np.zeros_like(feeds["data1"])
                yield f"{name} axis {axis} at 0", feeds, "any"
        return
    if target.format == "paddle" and "words" in target.feeds:  # LoD: no word in the batch
        ids = target.feeds["words"].data
        for label, words, lengths in (
            ("0 sentences", ids[:0], []),
            ("every sentence empty", ids[:0], [0, 0, 0]),
            ("empty sentences among others", ids[:8], [0, 5, 0, 3, 0]),
        ):
            yield label, {"words": fusebridge.LoDTensor(words, lengths)}, "ok"
        return
    with tempfile.TemporaryDirectory() as folder:
        for file, data in target.files.items():
            (Path(folder) / file).write_bytes(data)
        model = fusebridge.load(Path(folder) / target.entry)
    groups: dict[object, list[tuple[str, int]]] = {}
    for v in model.graph.inputs:
        for axis, dim in enumerate(v.shape if v.name in target.feeds else ()):
            if isinstance(dim, int):
                feeds = {**target.feeds, v.name: _zero_axis(target.feeds[v.name], axis)}
                yield f"{v.name}[{axis}] (static) at 0", feeds, "error"
                continue
            key = dim.value if dim.value is not None else (0 if axis == 0 else (v.name, axis))
            groups.setdefault(key, []).append((v.name, axis))
    for members in groups.values():
        feeds = dict(target.feeds)
        for name, axis in members:
            feeds[name] = _zero_axis(feeds[name], axis)
        yield ", ".join(f"{n}[{a}]" for n, a in members) + " at 0", feeds, "any"


def _zero_axis(a: np.ndarray, axis: int) -> np.ndarray:
    shape = list(a.shape)
    shape[axis] = 0
    return np.zeros(shape, a.dtype)


def zero_size() -> Iterator[Case]:
    """Empty inputs (a batch of 0, 0 steps, 0 sentences, empty sentences) to every model, and
    every kernel on 0 rows: no crash, no untyped error, whatever ONNX Runtime or Paddle does."""
    for target in zero_size_targets():
        for label, feeds, expect in _zeroed(target):
            yield _model_case("zero size", target, label, target.files, expect, feeds)
    for label, call in _empty_kernel_calls():
        yield Case("zero size", f"kernel {label}", lambda work, call=call: call(), None, "ok")


def _empty_kernel_calls() -> list[tuple[str, Callable[[], object]]]:
    from fusebridge import kernels as k

    x0, w = np.zeros((0, 8), np.float32), np.ones((8, 4), np.float32)
    empty, k0 = np.array([0], np.int64), np.ones((3, 0), np.float32)
    weights = k.pack_gru_weights(np.ones((2, 8, 12), np.float32), np.ones((2, 4, 12), np.float32))

    def gru(shape, layout, **kw):
        x = np.zeros(shape, np.float32)
        return k.fusion_gru(x, weights, layout=layout, direction="bidirectional", **kw)

    return [
        ("dropout", lambda: k.dropout(x0, 0.5, seed=1, return_mask=True)),
        ("dropout axes=(0,)", lambda: k.dropout(x0, 0.5, seed=1, axes=(0,), return_mask=True)),
        ("dropout_mask", lambda: k.dropout_mask((0, 8), 0.5, seed=1)),
        ("dropout_backward", lambda: k.dropout_backward(x0, 0.5, seed=1, offset=0)),
        ("softmax", lambda: k.softmax(x0)),
        ("softmax of 0 columns", lambda: k.softmax(k0)),
        ("softmax_dropout", lambda: k.softmax_dropout(x0, 0.5, seed=1, return_mask=True)),
        ("matmul", lambda: k.matmul(x0, w)),
        ("matmul of inner size 0", lambda: k.matmul(k0, k0.T)),
        ("sgemm", lambda: k.sgemm(x0, w)),
        ("matmul_dropout", lambda: k.matmul_dropout(x0, w, 0.5, seed=1, return_mask=True)),
        ("crf_decoding", lambda: k.crf_decoding(x0[:, :4], np.ones((6, 4), np.float32), empty)),
        ("sequence_pool", lambda: k.sequence_pool(x0, np.array([0, 0, 0]), "MAX")),
        ("lod_to_padded", lambda: k.lod_to_padded(x0, np.array([0, 0]))),
        ("padded_to_lod", lambda: k.padded_to_lod(np.zeros((0, 2, 8), np.float32), [0, 0])),
        ("fusion_gru of 0 words", lambda: gru((0, 8), "lod", offsets=np.array([0, 0, 0]))),
        ("fusion_gru of 0 steps", lambda: gru((0, 2, 8), "tnc", return_last=True)),
        ("fusion_gru of 0 sequences", lambda: gru((3, 0, 8), "tnc", return_last=True)),
        ("fusion_gru ntc of 0 steps", lambda: gru((2, 0, 8), "ntc", seq_lens=[0, 0])),
    ]


def kernel(rng: random.Random, n: int) -> Iterator[Case]:
    """Bad arguments to the kernels' Python faces (no model), and read-only inputs (fine)."""
    from fusebridge import kernels

    x = np.ones((6, 4), np.float32)
    ro = _readonly
    wrapped = np.array([0, 2**63 - 1, -2, 6])  # lengths 2**63-1, 2**63-1, 8: sums wrap around
    mask, pool, pad = kernels.dropout_mask, kernels.sequence_pool, kernels.lod_to_padded
    calls: list[tuple[str, Callable[[], object], str]] = [
        *(
            (f"set_num_threads({n!r})", lambda n=n: kernels.set_num_threads(n), "error")
            for n in (100000, 0, -1, 2**40, "2", 1.5, None)
        ),
        ("dropout_mask((2**32, 2**32))", lambda: mask((2**32, 2**32), 0.5, seed=0), "error"),
        (
            "dropout_mask shard of (2**62, 2**62)",
            lambda: mask((4, 4), 0.5, seed=0, shard=((2**62, 2**62), (0, 0))),
            "error",
        ),
        ("dropout p=nan", lambda: kernels.dropout(x, float("nan"), seed=0), "error"),
        ("dropout axes=(99,)", lambda: kernels.dropout(x, 0.5, seed=0, axes=(99,)), "error"),
        ("lod_to_padded offsets wrapping", lambda: pad(x, wrapped), "error"),
        ("lod_to_padded offsets past the rows", lambda: pad(x, np.array([0, 9])), "error"),
        ("sequence_pool offsets wrapping", lambda: pool(x, wrapped, "SUM"), "error"),
        ("crf_decoding offsets wrapping", lambda: kernels.crf_decoding(x, x[:6], wrapped), "error"),
        ("fusion_gru seq_lens INT64_MIN", lambda: _gru(np.array([-(2**63), 2])), "error"),
        (
            "fusion_gru offsets wrapping",
            lambda: _gru(None, np.array([0, 2**63 - 1, -2, 4])),
            "error",
        ),
        ("sequence_pool read-only", lambda: pool(ro(x), ro(np.array([0, 2, 6])), "SUM"), "ok"),
        ("lod_to_padded read-only", lambda: pad(ro(x), ro(np.array([0, 2, 6]))), "ok"),
        ("sgemm read-only", lambda: kernels.sgemm(ro(x), ro(x.T)), "ok"),
        ("softmax read-only", lambda: kernels.softmax(ro(x)), "ok"),
        ("dropout read-only", lambda: kernels.dropout(ro(x), 0.5, seed=0), "ok"),
        ("crf_decoding read-only", lambda: kernels.crf_decoding(ro(x), ro(x), ro([0, 6])), "ok"),
        ("fusion_gru read-only", lambda: _gru(None, np.array([0, 1, 4]), readonly=True), "ok"),
    ]
    for label, call, expect in calls:
        yield Case("kernel", label, lambda work, call=call: call(), None, expect)


def _readonly(a: np.ndarray) -> np.ndarray:
    a = np.array(a)
    a.flags.writeable = False
    return a


def _gru(seq_lens, offsets=None, readonly=False):
    from fusebridge import kernels

    oc, ic = 4, 3
    rng = np.random.default_rng(0)
    wx = rng.standard_normal((ic, 3 * oc)).astype(np.float32)
    wh = rng.standard_normal((oc, 3 * oc)).astype(np.float32)
    if offsets is not None:
        x = rng.standard_normal((4, ic)).astype(np.float32)
        args = (x, wx, wh)
        args = tuple(_readonly(a) for a in args) if readonly else args
        return kernels.fusion_gru(*args, offsets=_readonly(offsets) if readonly else offsets)
    x = rng.standard_normal((3, 2, ic)).astype(np.float32)
    return kernels.fusion_gru(x, wx, wh, seq_lens=seq_lens, layout="tnc")


GENERATORS: dict[str, Callable] = {
    "truncation": truncation,
    "byte flip": byte_flip,
    "size field": size_field,
    "wire type": wire_type,
    "attribute": attribute,
    "name": name,
    "graph": graph,
    "feed": feed,
}
CLASSES = (*GENERATORS, "zero size", "kernel")


def baseline() -> list[Case]:
    """Every target unmutated, run as the cases run it: each must be accepted, or the cases
    test nothing."""
    return [_model_case("baseline", t, "unmutated", t.files, "ok") for t in targets()]


def generate(size: str, seed: int, classes: list[str] | None = None) -> list[Case]:
    """The cases of `size` (quick or long) for the chosen input classes (all by default)."""
    n = SIZES[size]
    rng = random.Random(seed)
    chosen = classes or [*CLASSES, "baseline"]
    cases: list[Case] = []
    if "baseline" in chosen:
        cases += baseline()
    for t in targets():
        for cls, generator in GENERATORS.items():
            if cls in chosen:
                made = list(generator(t, rng, n))
                # The quick form keeps a sample of each generator's cases per target.
                limit = {"quick": 6, "long": 10**6}[size]
                cases += made if len(made) <= limit else rng.sample(made, limit)
    if "zero size" in chosen:
        cases += list(zero_size())  # every case in both forms: they are few
    if "kernel" in chosen:
        cases += list(kernel(rng, n))
    return cases
