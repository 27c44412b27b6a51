"""MXNet's file formats read without mxnet: `.params` (every header version and dtype, written
here with struct from the format description) and `-symbol.json`; checked against mxnet itself
where it is installed (pytest -m mxnet in the venv that holds it)."""

import json
import struct
import tempfile
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fusebridge.errors import ModelFormatError
from fusebridge.integrations.mxnet.params import read_params, read_params_with_kind
from fusebridge.integrations.mxnet.symbol import (
    MXNode,
    parse_bool,
    parse_float,
    parse_int,
    parse_ints,
    parse_optional_int,
    parse_symbol,
    read_symbol,
)

V1, V2, V3 = 0xF993FAC8, 0xF993FAC9, 0xF993FACA
# mshadow type flags, written out again here on purpose: the reader's table is under test.
FLAGS = {
    0: np.dtype("<f4"),
    1: np.dtype("<f8"),
    2: np.dtype("<f2"),
    3: np.dtype("u1"),
    4: np.dtype("<i4"),
    5: np.dtype("i1"),
    6: np.dtype("<i8"),
    7: np.dtype("?"),
    8: np.dtype("<i2"),
    9: np.dtype("<u2"),
    10: np.dtype("<u4"),
    11: np.dtype("<u8"),
    12: np.dtype(ml_dtypes.bfloat16),
}
CPU = struct.pack("<ii", 1, 0)


def shape64(dims):
    return struct.pack(f"<i{len(dims)}q", len(dims), *dims)


def array_bytes(version, array, flag=None, stype=0, dims=None):
    """One array record: version "legacy", "v1", "v2" or "v3"."""
    flag = next(f for f, d in FLAGS.items() if d == array.dtype) if flag is None else flag
    dims = array.shape if dims is None else dims
    if version == "legacy":
        head = struct.pack(f"<I{len(dims)}I", len(dims), *dims)
    elif version == "v1":
        head = struct.pack("<I", V1) + shape64(dims)
    else:
        head = struct.pack("<Ii", V2 if version == "v2" else V3, stype) + shape64(dims)
    return head + CPU + struct.pack("<i", flag) + array.tobytes()


def params_bytes(records, names=None, magic=0x112, reserved=0):
    data = struct.pack("<QQQ", magic, reserved, len(records)) + b"".join(records)
    names = [] if names is None else names
    data += struct.pack("<Q", len(names))
    for name in names:
        raw = name.encode() if isinstance(name, str) else name
        data += struct.pack("<Q", len(raw)) + raw
    return data


def sample(dtype, shape=(2, 3)):
    rng = np.random.default_rng(0)
    if dtype == np.bool_:
        return rng.integers(0, 2, shape).astype(np.bool_)
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)
    return rng.standard_normal(shape).astype(dtype)


def parse_params(data: bytes, name: str = "m.params") -> dict[str, tuple[str, np.ndarray]]:
    """read_params_with_kind of `data` written to a file of its own."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        return read_params_with_kind(path)


def only(data):
    ((_, array),) = parse_params(data).values()
    return array


def check_owned(array):
    assert array.flags.writeable and array.flags.c_contiguous and array.flags.owndata


# -- params: every header version and dtype ----------------------------------------------------


@pytest.mark.parametrize("flag", sorted(FLAGS))
@pytest.mark.parametrize("version", ["legacy", "v1", "v2", "v3"])
def test_every_version_and_dtype(version, flag):
    want = sample(FLAGS[flag])
    got = only(params_bytes([array_bytes(version, want)], ["arg:w"]))
    assert got.dtype == want.dtype and got.shape == want.shape
    assert got.tobytes() == want.tobytes()
    check_owned(got)


def test_scalars_and_empty_arrays():
    scalar = np.array(2.5, np.float32)
    # V3 (numpy shape semantics): ndim 0 is a scalar. MXNet 1.9.1 reads ndim 0 in V1 and the
    # legacy header the same way (checked against mx.nd.load).
    for version in ("v3", "v1", "legacy"):
        got = only(params_bytes([array_bytes(version, scalar)]))
        assert got.shape == () and got == 2.5
        check_owned(got)
    for version in ("v2", "v3", "v1", "legacy"):
        got = only(params_bytes([array_bytes(version, np.zeros((0, 3), np.int64))]))
        assert got.shape == (0, 3) and got.dtype == np.int64
        check_owned(got)


def test_device_is_ignored_and_bools_normalized():
    data = struct.pack("<Ii", V2, 0) + shape64([3]) + struct.pack("<iii", 2, 1, 7) + b"\0\1\7"
    got = only(params_bytes([data]))
    assert got.tolist() == [False, True, True] and got.view(np.uint8).tolist() == [0, 1, 1]


def test_names_kinds_and_list_form(tmp_path):
    a, b, c, d = (sample(np.dtype(np.float32), (i + 1,)) for i in range(4))
    records = [array_bytes("v2", x) for x in (a, b, c, d)]
    path = tmp_path / "m-0000.params"
    path.write_bytes(params_bytes(records, ["arg:w", "aux:mean", "plain", "other:x"]))
    kinds = read_params_with_kind(path)
    assert list(kinds) == ["w", "mean", "plain", "other:x"]
    assert [k for k, _ in kinds.values()] == ["arg", "aux", "", ""]
    arrays = read_params(path)
    for got, want in zip(arrays.values(), (a, b, c, d)):
        np.testing.assert_array_equal(got, want)
    listed = parse_params(params_bytes(records))  # nd.save of a list: no names
    assert list(listed) == ["0", "1", "2", "3"]
    np.testing.assert_array_equal(listed["2"][1], c)
    assert parse_params(params_bytes([])) == {}


# -- params: malformed files -------------------------------------------------------------------

GOOD = params_bytes(
    [
        array_bytes("v2", sample(np.dtype(np.float32))),
        array_bytes("v3", np.array(7, np.int64)),
        array_bytes("v1", sample(np.dtype(np.float16), (3,))),
        array_bytes("legacy", sample(np.dtype(np.uint8), (2, 2))),
    ],
    ["arg:a", "aux:b", "c", "arg:d"],
)


def f32(version, dims, **kw):
    return array_bytes(version, np.zeros(0, np.float32), dims=dims, **kw)


def expect_error(data, *fragments):
    with pytest.raises(ModelFormatError) as e:
        parse_params(data, "m.params")
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)


def test_every_truncation_is_reported():
    for end in range(len(GOOD)):
        with pytest.raises(ModelFormatError, match=r"m.params: .* at byte \d+"):
            parse_params(GOOD[:end], "m.params")
    assert len(parse_params(GOOD)) == 4


@pytest.mark.parametrize(
    ("data", "fragments"),
    [
        (params_bytes([], magic=0x113), ["list magic at byte 0", "0x113"]),
        (params_bytes([], reserved=1), ["reserved word at byte 8"]),
        # Sizes are checked against the file before anything is allocated.
        (params_bytes([f32("v2", (1 << 40, 1 << 20))]), ["array #0 data", "bytes needed"]),
        (
            params_bytes([struct.pack("<I", 0xDEADBEEF) + bytes(12)]),
            ["array #0 legacy shape", "no known"],
        ),
        (params_bytes([f32("v2", (2, -3))]), ["array #0 shape at byte 32", "negative dim"]),
        (params_bytes([f32("v1", (-2,))]), ["array #0 shape", "negative dim"]),
        (params_bytes([f32("v3", (-2,))]), ["array #0 shape", "negative dim"]),
        (
            params_bytes([struct.pack("<Iii", V2, 0, -1) + bytes(4)]),
            ["array #0 shape ndim", "negative"],
        ),
        (params_bytes([f32("v2", (1, 1), flag=13)]), ["type flag at byte", "unknown type flag 13"]),
        (params_bytes([f32("v2", (0,), flag=-1)]), ["unknown type flag -1"]),
        (params_bytes([f32("v2", (0,), stype=3)]), ["storage type at byte 28", "type 3"]),
        (params_bytes([f32("v3", (0,), stype=1)]), ["V3 (dense only)"]),
        (
            params_bytes([array_bytes("v2", np.zeros(1, np.float32), dims=[1] * 99)]),
            ["array #0 data at byte", "shape (1, 1, 1, 1, 1, 1, 1, 1, ...)"],
        ),
        # Uninitialized arrays hold no data: refused, named.
        (params_bytes([struct.pack("<Iii", V2, 0, 0)], ["arg:x"]), ["'arg:x' (#0)", "none"]),
        (params_bytes([struct.pack("<Iii", V3, 0, -1)], ["y"]), ["'y' (#0)", "none"]),
        (params_bytes([struct.pack("<Iiiq", V3, 0, 1, -1)]), ["'0' (#0)", "none"]),
        (params_bytes([f32("v2", (0,))] * 2, ["arg:w", "aux:w"]), ["'aux:w' (#1)", "second"]),
        (params_bytes([f32("v2", (0,))] * 2, ["w", "w"]), ["'w' (#1)", "second array"]),
        (params_bytes([f32("v2", (0,))] * 2, ["w"]), ["name count", "1 names for 2 arrays"]),
        # A count the bytes left cannot hold is refused before any array is read.
        (
            params_bytes([f32("v2", (0,))] * 2).replace(b"\2", b"\xff", 1),
            ["array count at byte 16", "255 arrays", "72 bytes left hold at most 4"],
        ),
        (params_bytes([f32("v2", (0,))], [b"\xff"]), ["name #0 at byte", "not UTF-8"]),
        (params_bytes([], ["w"]), ["1 names for 0 arrays"]),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_malformed(data, fragments):
    expect_error(data, *fragments)


def test_sparse_arrays_are_refused_by_name():
    # row_sparse: storage shape, shape, ctx, type, (aux type, aux shape), values, row indices.
    row_sparse = (
        struct.pack("<Ii", V2, 1) + shape64([2, 3]) + shape64([4, 3]) + CPU
        + struct.pack("<i", 0) + struct.pack("<i", 6) + shape64([2])
        + np.ones(6, np.float32).tobytes() + np.array([0, 3], np.int64).tobytes()
    )  # fmt: skip
    csr = (
        struct.pack("<Ii", V2, 2) + shape64([3]) + shape64([2, 4]) + CPU
        + struct.pack("<i", 0) + struct.pack("<i", 6) + shape64([3])
        + struct.pack("<i", 6) + shape64([3])
        + np.ones(3, np.float32).tobytes() + np.array([0, 1, 3], np.int64).tobytes()
        + np.array([0, 1, 2], np.int64).tobytes()
    )  # fmt: skip
    good = array_bytes("v2", np.ones(2, np.float32))
    expect_error(params_bytes([good, row_sparse], ["a", "arg:emb"]), "'arg:emb' (#1) is row_sparse")
    expect_error(params_bytes([csr, good], ["arg:m", "b"]), "'arg:m' (#0) is csr", "not supported")
    truncated = params_bytes([row_sparse])[: 24 + len(row_sparse) - 1]
    expect_error(truncated, "array #0 aux 0 data", "16 bytes needed, 15 left")


def test_missing_file(tmp_path):
    with pytest.raises(ModelFormatError, match="cannot read"):
        read_params(tmp_path / "nothing.params")


def test_every_byte_changed_is_an_error_or_a_file():
    for pos in range(len(GOOD)):
        for value in (0x00, 0xFF, GOOD[pos] ^ 0x01):
            data = GOOD[:pos] + bytes([value]) + GOOD[pos + 1 :]
            try:
                parse_params(data)
            except ModelFormatError:
                pass


@settings(max_examples=200, deadline=None)
@given(
    cut=st.integers(0, len(GOOD)),
    flips=st.lists(st.tuples(st.integers(0, len(GOOD) - 1), st.integers(1, 255)), max_size=6),
)
def test_corrupted_files_raise_only_model_format_errors(cut, flips):
    data = bytearray(GOOD)
    for pos, xor in flips:
        data[pos] ^= xor
    try:
        arrays = parse_params(bytes(data[:cut]))
    except ModelFormatError:
        return
    for _, array in arrays.values():
        assert isinstance(array, np.ndarray)
        check_owned(array)


# -- symbol JSON --------------------------------------------------------------------------------


def graph(nodes, heads, arg_nodes=None, **extra):
    if arg_nodes is None:
        arg_nodes = [i for i, n in enumerate(nodes) if n["op"] == "null"]
    return json.dumps({"nodes": nodes, "arg_nodes": arg_nodes, "heads": heads, **extra})


def var(name, **fields):
    return {"op": "null", "name": name, "inputs": [], **fields}


CURRENT = graph(
    [
        var("data"),
        var("fc_weight", attrs={"__shape__": "(3, 0)"}),
        var("fc_bias"),
        {
            "op": "FullyConnected",
            "name": "fc",
            "attrs": {"num_hidden": "3", "flatten": "False"},
            "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]],
        },
        {"op": "Activation", "name": "act", "attrs": {"act_type": "relu"}, "inputs": [[3, 0, 0]]},
    ],
    [[4, 0, 0], [3, 0, 0]],
    node_row_ptr=[0, 1, 2, 3, 4, 5],
    attrs={"mxnet_version": ["int", 10901]},
)


def test_current_format(tmp_path):
    path = tmp_path / "m-symbol.json"
    path.write_text(CURRENT)
    sym = read_symbol(path)
    assert [n.op for n in sym.nodes] == ["null", "null", "null", "FullyConnected", "Activation"]
    assert sym.nodes[3] == MXNode(
        "FullyConnected", "fc", ((0, 0), (1, 0), (2, 0)), {"num_hidden": "3", "flatten": "False"}
    )
    assert sym.nodes[1].attrs == {"__shape__": "(3, 0)"} and sym.nodes[0].attrs == {}
    assert sym.arg_nodes == (0, 1, 2) and sym.heads == ((4, 0), (3, 0)) and sym.version == 10901


def test_legacy_keys_and_two_element_inputs():
    # MXNet (nnvm JSONNode::Load): of attrs/attr the later replaces the other; param only
    # adds keys neither has. Checked against mx.sym.load_json.
    text = (
        '{"nodes": [{"op": "null", "name": "x", "inputs": [], "param": {}},'
        ' {"op": "FullyConnected", "name": "fc", "inputs": [[0, 0]],'
        '  "param": {"num_hidden": "5", "no_bias": "True"}, "attr": {"num_hidden": "4"},'
        '  "backward_source_id": -1},'
        ' {"op": "relu", "name": "r", "inputs": [[1, 0]],'
        '  "attrs": {"a": "1", "b": "2"}, "attr": {"a": "3"}, "control_deps": [0]}],'
        ' "arg_nodes": [0], "heads": [[2, 0]]}'
    )
    sym = parse_symbol(text)
    assert sym.version is None
    assert sym.nodes[1].attrs == {"num_hidden": "4", "no_bias": "True"}
    assert sym.nodes[2].attrs == {"a": "3"}
    assert sym.nodes[2].inputs == ((1, 0),) and sym.heads == ((2, 0),)


def test_subgraphs_are_parsed():
    body = json.loads(graph([var("s")], [[0, 0]]))
    text = graph(
        [var("x"), {"op": "_foreach", "name": "loop", "inputs": [[0, 0]], "subgraphs": [body]}],
        [[1, 0]],
    )
    (sub,) = parse_symbol(text).nodes[1].subgraphs
    assert sub.nodes[0].name == "s" and sub.heads == ((0, 0),)


FC = {"op": "FullyConnected", "name": "fc", "inputs": [[0, 0]]}


@pytest.mark.parametrize(
    ("text", "fragments"),
    [
        (graph([{**FC, "inputs": [[1, 0]]}, var("x")], [[0, 0]]), ["node #0", "node 1"]),
        (graph([var("x"), {**FC, "inputs": [[1, 0]]}], [[1, 0]]), ["input 0", "refers to node 1"]),
        (graph([var("x"), {**FC, "inputs": [[0, 1]]}], [[1, 0]]), ["one output"]),
        (graph([var("x"), {**FC, "inputs": [[0]]}], [[1, 0]]), ["input 0", "[node, output]"]),
        (graph([var("x"), {**FC, "inputs": [[0, -1]]}], [[1, 0]]), ["non-negative"]),
        (graph([var("x"), {**FC, "inputs": [[0, True]]}], [[1, 0]]), ["non-negative integers"]),
        (graph([var("x")], [[1, 0]]), ["head 0", "refers to node 1"]),
        (graph([var("x"), FC], [[1, 0]], arg_nodes=[1]), ["arg_nodes: 1 is not a variable"]),
        (graph([var("x"), {"op": "relu", "inputs": [[0, 0]]}], [[1, 0]]), ["node #1", "'name'"]),
        (json.dumps({"nodes": [var("x")], "arg_nodes": [0]}), ["missing field(s) 'heads'"]),
        (
            graph([var("x"), {**FC, "attrs": {"num_hidden": 4}}], [[1, 0]]),
            ["'fc'", "attribute num_hidden = 4 is not a string"],
        ),
        (graph([var("x"), {**FC, "param": {"flatten": None}}], [[1, 0]]), ["fc", "flatten"]),
        (graph([var("x"), {**FC, "name": "x"}], [[1, 0]]), ["#0 and #1 are both named 'x'"]),
        (graph([var("x", foo=1)], [[0, 0]]), ["unknown field(s) 'foo'"]),
        (graph([var("x")], [[0, 0]], attrs={"mxnet_version": 10901}), ["mxnet_version"]),
        (graph([var("x")], [[0, 0]], attrs={"mxnet_version": ["str", "1"]}), ["mxnet_version"]),
        (graph([var("x", control_deps=[3])], [[0, 0]]), ["control_deps"]),
        ('{"nodes": [], "nodes": [], "arg_nodes": [], "heads": []}', ["'nodes' appears twice"]),
        ('{"nodes": [', ["not valid symbol JSON"]),
        ("[" * 100_000 + "]" * 100_000, ["nested too deeply"]),
        (b"\xff{}", ["not UTF-8"]),
        ("[]", ["expected a JSON object"]),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_malformed_symbols(text, fragments):
    with pytest.raises(ModelFormatError) as e:
        parse_symbol(text, "m-symbol.json")
    for fragment in fragments:
        assert fragment in str(e.value), str(e.value)


def test_attribute_parsers():
    for text, want in [("True", True), ("false", False), ("1", True), ("0", False)]:
        assert parse_bool(text, "n", "k") is want
    assert parse_int(" -3 ", "n", "k") == -3 and parse_optional_int("None", "n", "k") is None
    assert parse_optional_int("7", "n", "k") == 7
    assert parse_float("1e-05", "n", "k") == 1e-05 and parse_float("-inf", "n", "k") == -np.inf
    for text, want in [
        ("(2, 0, 8)", (2, 0, 8)),
        ("[1,2]", (1, 2)),
        ("()", ()),
        ("(1,)", (1,)),
        ("(-1, 3L)", (-1, 3)),
        ("5", (5,)),
        ("None", None),
    ]:
        assert parse_ints(text, "n", "k") == want
    for parser, text in [
        (parse_bool, "yes"),
        (parse_int, "1.5"),
        (parse_int, "None"),
        (parse_int, "1_000"),
        (parse_float, "fast"),
        (parse_ints, "(1, a)"),
        (parse_ints, "(1,,2)"),
        (parse_ints, "1, 2"),
        (parse_optional_int, "none"),
    ]:
        with pytest.raises(
            ModelFormatError, match=r"MXNet node 'fc': attribute shape = .*expected"
        ):
            parser(text, "fc", "shape")


# -- against mxnet ------------------------------------------------------------------------------


@pytest.mark.mxnet
def test_nd_save_of_every_dtype_reads_back_bit_equal(tmp_path):
    mx = pytest.importorskip("mxnet")
    arrays = {
        f"arg:{name}": mx.nd.array(sample(np.dtype(name)), dtype=name)
        for name in ["float32", "float64", "float16", "uint8", "int32", "int8", "int64", "bool"]
    }
    arrays["aux:bf16"] = mx.nd.amp_cast(mx.nd.array(sample(np.dtype(np.float32))), dtype="bfloat16")
    arrays["plain"] = mx.nd.array(np.arange(4.0).reshape(1, 1, 4, 1))
    path = tmp_path / "d.params"
    mx.nd.save(str(path), arrays)
    want = mx.nd.load(str(path))
    got = read_params_with_kind(path)
    assert list(got) == [k.split(":")[-1] for k in want]
    for key, nd in want.items():
        kind, array = got[key.split(":")[-1]]
        assert kind == (key.split(":")[0] if ":" in key else "")
        ref = nd.asnumpy()
        if key == "aux:bf16":  # mxnet gives bfloat16 as a structured uint16 record
            assert array.dtype == ml_dtypes.bfloat16
            ref, array = ref.view(np.uint16), array.view(np.uint16)
        assert array.dtype == ref.dtype and array.shape == ref.shape
        assert array.tobytes() == ref.tobytes()

    mx.nd.save(str(path), list(want.values())[:3])
    listed = read_params(path)
    assert list(listed) == ["0", "1", "2"]
    for got_array, nd in zip(listed.values(), mx.nd.load(str(path))):
        assert got_array.tobytes() == nd.asnumpy().tobytes()

    with mx.util.np_shape(True):  # V3 headers: a scalar and an empty array
        scalar = mx.nd.array(np.float32(2.5).reshape(()))
        mx.nd.save(str(path), {"s": scalar, "e": mx.nd.zeros((0, 3))})
        want = {k: v.asnumpy() for k, v in mx.nd.load(str(path)).items()}
    got = read_params(path)
    assert got["s"].shape == () == want["s"].shape and got["s"] == want["s"]
    assert got["e"].shape == (0, 3) == want["e"].shape and got["e"].dtype == want["e"].dtype


@pytest.mark.mxnet
def test_exported_gluon_model_reads_back(tmp_path):
    mx = pytest.importorskip("mxnet")
    from mxnet import gluon

    class Net(gluon.HybridBlock):
        def __init__(self):
            super().__init__()
            with self.name_scope():
                self.gru = gluon.rnn.GRU(8, layout="NTC", input_size=4)
                self.bn = gluon.nn.BatchNorm(in_channels=8)  # aux: running mean / var
                self.dense = gluon.nn.Dense(3, in_units=8, flatten=False)

        def hybrid_forward(self, F, x):
            return self.dense(self.bn(self.gru(x)))

    net = Net()
    net.initialize(mx.init.Uniform())
    net.hybridize()
    net(mx.nd.ones((2, 5, 4)))
    prefix = str(tmp_path / "net")
    net.export(prefix)

    want = mx.nd.load(prefix + "-0000.params")
    got = read_params_with_kind(prefix + "-0000.params")
    assert {k: v[0] for k, v in got.items()} == {k[4:]: k[:3] for k in want}
    for key, nd in want.items():
        assert got[key[4:]][1].tobytes() == nd.asnumpy().tobytes()
        assert got[key[4:]][1].shape == nd.shape

    sym = read_symbol(prefix + "-symbol.json")
    with open(prefix + "-symbol.json") as f:
        raw = json.load(f)
    assert len(sym.nodes) == len(raw["nodes"])
    for node, ref in zip(sym.nodes, raw["nodes"]):
        assert (node.op, node.name, node.attrs) == (ref["op"], ref["name"], ref.get("attrs", {}))
        assert node.inputs == tuple((e[0], e[1]) for e in ref["inputs"])
    assert sym.heads == tuple((e[0], e[1]) for e in raw["heads"])
    assert sym.arg_nodes == tuple(raw["arg_nodes"])
    assert sym.version == raw["attrs"]["mxnet_version"][1] == 10901

    loaded = mx.sym.load(prefix + "-symbol.json")
    names = [n.name for n in sym.nodes]
    variables = {n.name for n in sym.nodes if n.op == "null"}
    owners: list[str] = []  # the node behind each internal output, in order
    for output in loaded.get_internals().list_outputs():
        owner = (
            output
            if output in variables
            else max((n for n in names if output.startswith(n + "_")), key=len)
        )
        if not owners or owners[-1] != owner:
            owners.append(owner)
    assert owners == names
    args = set(loaded.list_arguments()) | set(loaded.list_auxiliary_states())
    assert args == {names[i] for i in sym.arg_nodes}
    (head,) = loaded.list_outputs()
    assert head.startswith(names[sym.heads[0][0]] + "_")
