"""Session(model, device="cuda") without a GPU: the cuda engine on the CPU emulation of
tests/helpers/cuda_emulator.py, through a launcher whose device arrays are a type of their own
(DeviceArray). As CuPy does, a ufunc, an array-module function or a kernel refuses a host array
among device ones, the launcher's download refuses a host array and its upload a device one:
a transfer the Session misses, or makes twice, fails here as it would on a GPU."""

from __future__ import annotations

import itertools
import re
import types
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from helpers.cuda_emulator import EmulatedLauncher, Emulator, build_harness, compiler
from helpers.session_models import info, make_model
from onnx import TensorProto, helper

import fusebridge as fb
from fusebridge import cuda, ops
from fusebridge.cuda import build, device
from fusebridge.errors import ArgumentError, ArgumentTypeError, ExecutionError
from fusebridge.models import assets
from fusebridge.runtime import device_ops

DOMAIN = fb.conventions.DOMAIN
F32, I64 = TensorProto.FLOAT, TensorProto.INT64


class HostArrayOnDevice(AssertionError):
    """A host array met device arrays: a transfer is missing."""


class DeviceArray(np.ndarray):
    """Device memory under emulation. Ufuncs (operators and methods among them) refuse host
    arrays beside it; numpy's other functions take it as a plain array (the emulator's own
    bookkeeping calls them on device memory)."""

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if "out" in kwargs:
            kwargs["out"] = tuple(map(_plain, kwargs["out"]))
        return _device(getattr(ufunc, method)(*map(_plain, inputs), **kwargs))

    def __array_function__(self, func, types, args, kwargs):
        return _device(func(*_unwrap(args), **_unwrap(kwargs)))


def _is_host(a: object) -> bool:
    return isinstance(a, np.ndarray) and not isinstance(a, DeviceArray)


def _plain(a: object) -> object:
    if _is_host(a):
        raise HostArrayOnDevice(f"a host array {a.dtype}{list(a.shape)} among device arrays")
    return a.view(np.ndarray) if isinstance(a, DeviceArray) else a


def _unwrap(a: object) -> object:
    if isinstance(a, DeviceArray):
        return a.view(np.ndarray)
    if isinstance(a, (list, tuple)):
        return type(a)(map(_unwrap, a))
    if isinstance(a, dict):
        return {k: _unwrap(v) for k, v in a.items()}
    return a


def _device(a: object) -> object:
    if _is_host(a):
        return a.view(DeviceArray)
    if isinstance(a, (list, tuple)):
        return type(a)(map(_device, a))
    return a


def _no_host(values) -> None:
    for v in values:
        if isinstance(v, (list, tuple)):
            _no_host(v)
        else:
            _plain(v)


def _device_numpy() -> types.ModuleType:
    """numpy as the array module of DeviceArray memory: functions refuse host arrays, except
    asarray and array (CuPy's uploads), and return DeviceArray."""
    xp = types.ModuleType("device_numpy")
    xp.ndarray = DeviceArray

    def attribute(name: str) -> object:
        value = getattr(np, name)
        if isinstance(value, type) or not callable(value):
            return value  # dtypes, constants

        def call(*args, **kwargs):
            if name not in ("asarray", "array"):
                _no_host([*args, *kwargs.values()])
            return _device(value(*_unwrap(args), **_unwrap(kwargs)))

        return call

    xp.__getattr__ = attribute
    return xp


class DeviceLauncher(EmulatedLauncher):
    """EmulatedLauncher with DeviceArray memory, counting its transfers."""

    xp = _device_numpy()
    _made = itertools.count()

    def __init__(self, emulator: Emulator | None = None, block=64, max_grid=3, resident=4):
        super().__init__(emulator, block, max_grid, resident)
        # A descriptor of its own: primitives cached for another launcher hold that launcher.
        self.device += f"-device-arrays-{next(self._made)}"
        self.uploads: list[tuple[int, ...]] = []  # the shapes uploaded, in order
        self.downloads = 0

    def _kernel_args(self, args):
        return [_plain(a) for a in args]  # a host array is no kernel argument on a GPU

    def launch(self, source, kernel, warps, args):
        super().launch(source, kernel, warps, self._kernel_args(args))

    def launch_grid(self, source, kernel, grid, block, args, **kwargs):
        super().launch_grid(source, kernel, grid, block, self._kernel_args(args), **kwargs)

    def empty(self, shape, dtype, *, zeros=False):
        return super().empty(shape, dtype, zeros=zeros).view(DeviceArray)

    def upload(self, host):
        assert not isinstance(host, DeviceArray), "an upload of a device array"
        self.uploads.append(np.shape(host))
        return np.array(host, copy=True).view(DeviceArray)

    def download(self, device_array):
        assert isinstance(device_array, DeviceArray), f"a download of {type(device_array)}"
        self.downloads += 1
        return np.array(device_array, copy=True)


def _kernel_names(sources: list[Path]) -> list[str]:
    """The extern "C" kernels of the engine's sources (dropout.cu's through its macro)."""
    names = [f"dropout_{k}_{s}" for k in ("forward", "apply") for s in ("f32", "f16", "bf16")]
    for source in sources:
        text = source.read_text()
        names += re.findall(
            r'extern "C" __global__ void\s+__launch_bounds__\([^)]*\)\s*(\w+)', text
        )
    return sorted(set(names))


@pytest.fixture(scope="module")
def emulator(tmp_path_factory) -> Emulator:
    if compiler() is None:
        pytest.skip("the emulator needs g++")
    sources = [build.CSRC / "dropout.cu"]
    includes = [build.CSRC, build.KERNELS_CSRC]
    folder = tmp_path_factory.mktemp("emulator")
    return Emulator(build_harness(sources, _kernel_names([]), includes, folder))


@pytest.fixture
def launcher():
    """Device standard ops only (no kernel launches)."""
    launcher = DeviceLauncher()
    with device.use_launcher(launcher):
        yield launcher


@pytest.fixture
def kernels_launcher(emulator):
    launcher = DeviceLauncher(emulator)
    with device.use_launcher(launcher):
        yield launcher


def _to_host(out: dict) -> dict:
    """Outputs as host arrays (LoDTensors as (data, offsets))."""
    host = {}
    for name, v in out.items():
        if isinstance(v, fb.LoDTensor):
            host[name] = (np.asarray(v.data), np.asarray(v.offsets))
        else:
            host[name] = np.asarray(v)
    return host


def _model(nodes, inputs, outputs, initializers=()) -> ir.Model:
    # Outputs declare no shape (the checker wants one): the Session infers what it needs.
    return make_model(nodes, inputs, outputs, initializers, check=False)


# ---- the argument ---------------------------------------------------------------------------


def _relu_model() -> ir.Model:
    return _model(
        [helper.make_node("Relu", ["x"], ["y"])], [info("x", shape=["n", 3])], [info("y")]
    )


@pytest.mark.skipif(cuda.is_available(), reason="a GPU is here")
@pytest.mark.parametrize("name", ["cuda", "cuda:0"])
def test_without_a_gpu_a_cuda_session_is_the_engines_error(name):
    with pytest.raises(cuda.CudaUnavailableError):
        fb.Session(_relu_model(), device=name)


@pytest.mark.parametrize("name", ["gpu", "cuda:", "cuda:x", "CUDA", 0, None])
def test_the_device_is_checked(name):
    with pytest.raises(ArgumentError, match="device must be 'cpu', 'cuda' or 'cuda:N'"):
        fb.Session(_relu_model(), device=name)


def test_the_reference_backend_runs_on_the_host_only():
    with pytest.raises(ArgumentError, match="backend='reference' runs on the host"):
        fb.Session(_relu_model(), backend="reference", device="cuda")


def test_a_cpu_session_takes_to_host_and_hands_out_host_arrays():
    x = np.array([[-1.0, 0.5, 2.0]], np.float32)
    out = fb.Session(_relu_model()).run({"x": x}, to_host=True)
    assert type(out["y"]) is np.ndarray and out["y"].tolist() == [[0.0, 0.5, 2.0]]


# ---- (a) a model across device steps, our kernels and an ONNX Runtime partition -------------


_MIXED_OUTPUTS = ("h", "hmask", "yd", "ymask", "a", "z")


def _mixed_model() -> ir.Model:
    """MatMulDropout and Dropout (cuda bindings), Sub and Add on the device, Erf and Abs (no
    device implementation) in one ONNX Runtime partition between them."""
    rng = np.random.default_rng(5)
    w = rng.standard_normal((8, 6)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    c = rng.standard_normal(6).astype(np.float32)
    tensors = [
        helper.make_tensor("w", F32, w.shape, w.reshape(-1)),
        helper.make_tensor("b", F32, b.shape, b),
        helper.make_tensor("c", F32, c.shape, c),
        helper.make_tensor("seed", I64, [], [1234]),
        helper.make_tensor("offset", I64, [], [7]),
    ]
    nodes = [
        helper.make_node(
            "MatMulDropout",
            ["x", "w", "b", "seed", "offset"],
            ["h", "hmask"],
            "mmd",
            domain=DOMAIN,
            p=0.25,
        ),
        helper.make_node(
            "Dropout", ["y", "seed", "offset"], ["yd", "ymask"], "drop", domain=DOMAIN, p=0.5
        ),
        helper.make_node("Sub", ["yd", "c"], ["s"], "sub"),
        helper.make_node("Erf", ["s"], ["e"], "erf"),
        helper.make_node("Abs", ["e"], ["a"], "abs"),
        helper.make_node("Add", ["a", "h"], ["z"], "add"),
    ]
    return _model(
        nodes,
        [info("x", shape=["n", 8]), info("y", shape=["n", 6])],
        [info(n, TensorProto.UINT8 if "mask" in n else F32) for n in _MIXED_OUTPUTS],
        tensors,
    )


def _mixed_feeds(n=5):
    rng = np.random.default_rng(11)
    x = rng.standard_normal((n, 8)).astype(np.float32)
    return {"x": x, "y": rng.standard_normal((n, 6)).astype(np.float32)}


def test_a_mixed_model_gives_the_cpu_sessions_results(kernels_launcher):
    model = _mixed_model()
    want = fb.Session(model).run(_mixed_feeds())
    session = fb.Session(model, device="cuda")
    kinds = sorted(s.kind for s in session._program.steps)
    assert kinds == ["device", "device", "fusebridge", "fusebridge", "onnx"]
    (partition,) = [s for s in session._program.steps if s.kind == "onnx"]
    assert partition.label.startswith("ONNX partition [Erf, Abs]")
    out = session.run(_mixed_feeds())
    assert all(isinstance(v, DeviceArray) for v in out.values())
    got = _to_host(out)
    # The dropouts' bits, and whatever follows them with the same arithmetic: equal.
    for name in ("hmask", "yd", "ymask", "a"):
        assert got[name].tobytes() == want[name].tobytes(), name
    # The GEMM is numpy's here, our kernel's on the cpu: equal within rounding.
    np.testing.assert_allclose(got["h"], want["h"], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got["z"], want["z"], rtol=1e-5, atol=1e-5)
    # One download, s to ONNX Runtime: nothing else left the device.
    assert kernels_launcher.downloads == 1


def test_to_host_hands_out_numpy_arrays(kernels_launcher):
    session = fb.Session(_mixed_model(), device="cuda")
    on_device = _to_host(session.run(_mixed_feeds()))
    out = session.run(_mixed_feeds(), to_host=True)
    assert all(type(v) is np.ndarray for v in out.values())
    assert all(out[k].tobytes() == on_device[k].tobytes() for k in out)


# ---- (b) every device op against ONNX Runtime -----------------------------------------------

_R = np.random.default_rng(2)


def _f(*shape):
    return _R.standard_normal(shape).astype(np.float32)


def _i(*values):
    return np.array(values, np.int64)


# (op, feeds, initializers, attributes, opset). Initializers hold what models hold as
# constants: weights, shapes and axes.
CASES = [
    ("Identity", {"x": _f(2, 3)}, {}, {}, 17),
    ("Gather", {"d": _f(5, 3), "i": _i([0, -1], [4, -5])}, {}, {}, 17),
    ("Gather", {"d": _f(2, 4, 3), "i": _i(-1, 2, -4)}, {}, {"axis": 1}, 17),
    ("Gather", {"d": _f(3, 4), "i": np.array(-2, np.int64)}, {}, {"axis": -1}, 17),
    ("MatMul", {"a": _f(2, 3, 4), "b": _f(4, 5)}, {}, {}, 17),
    ("MatMul", {"a": _f(4), "b": _f(2, 4, 3)}, {}, {}, 17),
    ("Gemm", {"a": _f(4, 3), "b": _f(5, 4)}, {"c": _f(5)}, {"transA": 1, "transB": 1}, 17),
    ("Gemm", {"a": _f(3, 4), "b": _f(4, 5)}, {"c": _f(3, 1)}, {"alpha": 0.5, "beta": 2.0}, 17),
    ("Gemm", {"a": _f(3, 4), "b": _f(4, 5)}, {}, {"alpha": 1.5}, 17),
    ("Add", {"a": _f(2, 3), "b": _f(3)}, {}, {}, 17),
    ("Add", {"a": _f(), "b": _f()}, {}, {}, 17),  # 0-d: an array still (numpy: a scalar)
    ("Sub", {"a": _i(5, -3, 0), "b": _i(7, 2, -1)}, {}, {}, 17),
    ("Mul", {"a": _f(2, 1, 3), "b": _f(4, 1)}, {}, {}, 17),
    ("Div", {"a": _f(2, 3), "b": _f(2, 3)}, {}, {}, 17),
    ("Div", {"a": _i(7, -7, 7, -7, 6, -1), "b": _i(2, 2, -2, -2, 3, 5)}, {}, {}, 17),
    ("Less", {"a": _f(2, 3), "b": _f(3)}, {}, {}, 17),
    ("Less", {"a": _i(3, -1, 4)}, {"b": np.array(0, np.int64)}, {}, 17),
    ("Greater", {"a": _f(2, 3), "b": _f(2, 1)}, {}, {}, 17),
    ("Equal", {"a": _i(1, 2, 3), "b": _i(1, 0, 3)}, {}, {}, 17),
    ("Where", {"c": np.array([True, False, True]), "a": _f(2, 3), "b": _f(3)}, {}, {}, 17),
    ("Squeeze", {"x": _f(2, 1, 3, 1)}, {"axes": _i(1)}, {}, 17),
    ("Squeeze", {"x": _f(1, 3, 1)}, {"axes": _i(-1, 0)}, {}, 13),
    ("Squeeze", {"x": _f(1, 3, 1)}, {}, {}, 17),
    ("Squeeze", {"x": _f(2, 1, 3)}, {}, {"axes": [1]}, 11),
    ("Unsqueeze", {"x": _f(2, 3)}, {"axes": _i(0, -1)}, {}, 17),
    ("Unsqueeze", {"x": _f(2, 3)}, {"axes": _i(1, 3)}, {}, 13),
    ("Unsqueeze", {"x": _f(2, 3)}, {}, {"axes": [0, 2]}, 11),
    ("Reshape", {"x": _f(2, 3, 4)}, {"shape": _i(0, -1)}, {}, 17),
    ("Reshape", {"x": _f(2, 3, 4)}, {"shape": _i(-1, 2, 0)}, {}, 17),
    ("Reshape", {"x": _f(2, 3, 4)}, {"shape": _i(4, 6)}, {}, 11),
    ("Transpose", {"x": _f(2, 3, 4)}, {}, {"perm": [2, 0, 1]}, 17),
    ("Transpose", {"x": _f(2, 3, 4)}, {}, {}, 17),
    ("Concat", {"a": _f(2, 3), "b": _f(2, 1), "c": _f(2, 2)}, {}, {"axis": -1}, 17),
    ("Concat", {"a": _i(1, 2), "b": _i(3)}, {}, {"axis": 0}, 17),
    ("Cast", {"x": np.array([-2.7, -0.5, 0.0, 1.5, 3.9], np.float32)}, {}, {"to": 6}, 17),
    ("Cast", {"x": _i(-3, 0, 2**40)}, {}, {"to": TensorProto.FLOAT}, 17),
    ("Cast", {"x": np.array([0.0, -1.5, 2.0], np.float32)}, {}, {"to": TensorProto.BOOL}, 17),
    ("Shape", {"x": _f(2, 3, 4)}, {}, {}, 17),
    ("Shape", {"x": _f(2, 3, 4)}, {}, {"start": 1}, 17),
    ("Shape", {"x": _f(2, 3, 4, 5)}, {}, {"start": -3, "end": -1}, 17),
    ("Softmax", {"x": _f(2, 3, 4)}, {}, {}, 17),
    ("Softmax", {"x": _f(2, 3, 4)}, {}, {"axis": 1}, 13),
    ("Softmax", {"x": _f(2, 3, 4)}, {}, {}, 11),
    ("Softmax", {"x": 30 * _f(2, 3, 4)}, {}, {"axis": 1}, 11),
    ("Relu", {"x": _f(3, 4)}, {}, {}, 17),
    ("Tanh", {"x": 4 * _f(3, 4)}, {}, {}, 17),
    ("Sigmoid", {"x": np.array([-100.0, -5.0, 0.0, 0.3, 5.0, 100.0], np.float32)}, {}, {}, 17),
]
# ONNX Runtime's own approximations (MLAS) and summation orders: equal within rounding.
ROUNDED = {"MatMul", "Gemm", "Softmax", "Tanh", "Sigmoid"}


def _one_node(op, feeds, constants, attributes, opset) -> onnx.ModelProto:
    node = helper.make_node(op, [*feeds, *constants], ["out"], "node", **attributes)
    graph = helper.make_graph(
        [node],
        "one",
        [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
            for n, a in feeds.items()
        ],
        [helper.make_empty_tensor_value_info("out")],
        [onnx.numpy_helper.from_array(a, n) for n, a in constants.items()],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=10)
    return onnx.shape_inference.infer_shapes(proto, strict_mode=True)


def _case_id(case) -> str:
    op, feeds, _, attributes, opset = case
    shapes = "x".join(str(list(a.shape)) for a in feeds.values())
    return f"{op}-{shapes}-{attributes}-opset{opset}".replace(" ", "")


@pytest.mark.parametrize("case", CASES, ids=map(_case_id, CASES))
def test_each_device_op_gives_onnxruntimes_result(launcher, case):
    op, feeds, constants, attributes, opset = case
    proto = _one_node(op, feeds, constants, attributes, opset)
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    (want,) = sess.run(None, feeds)
    session = fb.Session(ir.from_proto(proto), device="cuda")
    # Identity is an alias step (no step of its own); every other op a device step.
    assert [s.kind for s in session._program.steps] == ["alias" if op == "Identity" else "device"]
    got = session.run(feeds)["out"]
    assert isinstance(got, DeviceArray)
    got = np.asarray(got)
    assert got.dtype == want.dtype and got.shape == want.shape
    if op in ROUNDED:
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    else:
        assert got.tobytes() == want.tobytes()


def test_identity_runs_on_the_device_too():
    """Identity's entry (a Session never needs it: an Identity is an alias or joins its
    source's ONNX Runtime partition)."""
    node = ir.node("Identity", [ir.Value(name="x")])
    x = np.arange(3.0)
    assert device_ops.prepare(node, np, 17)([x])[0] is x


def test_a_node_the_device_cannot_run_goes_to_onnxruntime(launcher):
    """A Cast to a string, and ops not in the table, run in ONNX Runtime partitions."""
    nodes = [
        helper.make_node("Cast", ["x"], ["s"], "to_string", to=TensorProto.STRING),
        helper.make_node("Cast", ["s"], ["f"], "back", to=TensorProto.FLOAT),
        helper.make_node("Relu", ["f"], ["y"], "relu"),
    ]
    model = _model(nodes, [info("x", shape=[3])], [info("y")])
    session = fb.Session(model, device="cuda")
    assert [s.kind for s in session._program.steps] == ["onnx", "device"]
    x = np.array([-1.0, 0.5, 2.0], np.float32)
    assert np.asarray(session.run({"x": x})["y"]).tolist() == [0.0, 0.5, 2.0]


def test_an_error_of_a_device_step_names_its_node(launcher):
    feeds = {"d": _f(5, 3), "i": _i(7)}
    model = ir.from_proto(_one_node("Gather", feeds, {}, {}, 17))
    with pytest.raises(ExecutionError, match="Gather node 'node'"):
        fb.Session(model, device="cuda").run(feeds)


# ---- (c) feeds on the host or the device, outputs where asked -------------------------------


def test_feeds_may_be_host_or_device_arrays(launcher):
    session = fb.Session(_relu_model(), device="cuda")
    x = np.array([[-1.0, 0.5, 2.0], [3.0, -4.0, 0.0]], np.float32)
    from_host = session.run({"x": x})["y"]
    uploads = len(launcher.uploads)
    from_device = session.run({"x": launcher.upload(x)})["y"]
    assert len(launcher.uploads) == uploads + 1  # the one above: the feed was taken as it is
    assert isinstance(from_host, DeviceArray) and isinstance(from_device, DeviceArray)
    assert np.asarray(from_host).tobytes() == np.asarray(from_device).tobytes()
    on_host = session.run({"x": x}, to_host=True)["y"]
    assert type(on_host) is np.ndarray and on_host.tolist() == [[0, 0.5, 2], [3, 0, 0]]


def test_a_device_feed_is_checked(launcher):
    session = fb.Session(_relu_model(), device="cuda")
    x = np.zeros((2, 3), np.float64)
    with pytest.raises(ArgumentTypeError, match="input 'x' must be float32, got a device array"):
        session.run({"x": launcher.upload(x)})  # a cast that may round: not on a device
    with pytest.raises(ArgumentError, match=r"input 'x' is shaped \[2, 4\] where \[n, 3\]"):
        session.run({"x": launcher.upload(np.zeros((2, 4), np.float32))})
    small = session.run({"x": launcher.upload(np.ones((2, 3), np.float16))}, to_host=True)
    assert small["y"].dtype == np.float32 and small["y"].tolist() == [[1.0] * 3] * 2
    with pytest.raises(ArgumentTypeError, match="to_host must be True or False"):
        session.run({"x": x.astype(np.float32)}, to_host="no")


def test_an_output_that_is_a_feed_is_the_callers_own(launcher):
    model = _model(
        [helper.make_node("Identity", ["x"], ["y"]), helper.make_node("Relu", ["x"], ["r"])],
        [info("x", shape=[3])],
        [info("y"), info("r")],
    )
    x = launcher.upload(np.array([1.0, -2.0, 3.0], np.float32))
    out = fb.Session(model, device="cuda").run({"x": x})
    assert not np.may_share_memory(out["y"], x)
    assert np.asarray(out["y"]).tolist() == [1.0, -2.0, 3.0]


def test_the_random_state_stays_on_the_host(kernels_launcher):
    """rng_seed and rng_offset from a Key are host integers the dropout's binding reads as
    such; rng_offset_out comes back a host integer, made on the device or not."""
    nodes = [
        helper.make_node(
            "Dropout", ["x", "rng_seed", "rng_offset"], ["y"], "drop", domain=DOMAIN, p=0.5
        ),
        helper.make_node("Add", ["rng_offset", "words"], ["rng_offset_out"], "next"),
    ]
    model = _model(
        nodes,
        [info("x", shape=[4, 8]), info("rng_seed", I64, []), info("rng_offset", I64, [])],
        [info("y"), info("rng_offset_out", I64)],
        [onnx.numpy_helper.from_array(np.array(32, np.int64), "words")],
    )
    key, x = fb.random.key(9), _f(4, 8)
    want = fb.Session(model).run({"x": x}, rng=key)
    out = fb.Session(model, device="cuda").run({"x": x}, rng=key)
    assert (
        isinstance(out["y"], DeviceArray) and np.asarray(out["y"]).tobytes() == want["y"].tobytes()
    )
    assert _is_host(out["rng_offset_out"]) and fb.random.Key(key.seed, out["rng_offset_out"])
    assert out["rng_offset_out"].tolist() == want["rng_offset_out"].tolist()


# ---- (d) initializers go up once --------------------------------------------------------------


def test_initializers_are_uploaded_once_when_the_program_is_built(launcher):
    w, b = _f(4, 3), _f(3)
    model = _model(
        [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["y"])],
        [info("x", shape=["n", 4])],
        [info("y")],
        [onnx.numpy_helper.from_array(w, "w"), onnx.numpy_helper.from_array(b, "b")],
    )
    session = fb.Session(model, device="cuda")
    assert sorted(launcher.uploads) == [(3,), (4, 3)]
    x = _f(5, 4)
    for run in range(2):
        y = session.run({"x": x})["y"]
        assert launcher.uploads[2:] == [(5, 4)] * (run + 1)  # the feed alone, once a run
    np.testing.assert_allclose(np.asarray(y), x @ w + b, rtol=1e-6)


# ---- an op of ours without a cuda binding; LoD values --------------------------------------


def _lod_model() -> ir.Model:
    """Relu on a LoD input (device), SequencePool (no cuda binding: the cpu engine), Tanh
    (device); the Relu's output handed out as a LoD value with the feed's offsets."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], "relu"),
        helper.make_node("SequencePool", ["r", "x.offsets"], ["p"], "pool", domain=DOMAIN),
        helper.make_node("Tanh", ["p"], ["t"], "tanh"),
        helper.make_node("Identity", ["r"], ["y"], "out"),
        helper.make_node("Identity", ["x.offsets"], ["y.offsets"], "out_offsets"),
    ]
    return _model(
        nodes,
        [info("x", shape=["words", 3]), info("x.offsets", I64, ["sentences"])],
        [info("t"), info("y"), info("y.offsets", I64)],
    )


def test_an_op_without_a_cuda_binding_runs_on_the_cpu_engine(launcher):
    assert "cuda" not in ops.op("SequencePool").bindings
    feeds = {"x": fb.LoDTensor(_f(7, 3), lengths=[2, 0, 5])}
    want = fb.Session(_lod_model()).run(feeds)
    session = fb.Session(_lod_model(), device="cuda")
    out = session.run(feeds)
    assert isinstance(out["t"], DeviceArray)
    assert isinstance(out["y"].data, DeviceArray) and _is_host(out["y"].offsets)
    assert out["y"].offsets.tolist() == [0, 2, 2, 7]
    np.testing.assert_allclose(np.asarray(out["t"]), want["t"], rtol=1e-6, atol=1e-7)
    assert np.asarray(out["y"].data).tobytes() == want["y"].data.tobytes()
    host = session.run(feeds, to_host=True)["y"]
    assert type(host.data) is np.ndarray and host.lengths.tolist() == [2, 0, 5]


# ---- (e) the bundled tagger -------------------------------------------------------------------


@pytest.fixture(scope="module")
def tagger_emulator(tmp_path_factory) -> Emulator:
    if compiler() is None:
        pytest.skip("the emulator needs g++")
    sources = [build.CSRC / s for s in build.SOURCES]
    includes = [build.CSRC, build.KERNELS_CSRC]
    folder = tmp_path_factory.mktemp("tagger-emulator")
    return Emulator(build_harness(sources, _kernel_names(sources), includes, folder))


def test_the_tagger_on_the_device_tags_as_on_the_cpu(tagger_emulator):
    path = assets.path("tagger")
    model, _ = fb.optimize(fb.load(path))
    words = np.load(path / "example_words.npy", allow_pickle=False)
    lengths = [int(t) for t in (path / "example_lengths.txt").read_text().split()]
    # demo()'s example, its sentences under 10 words: the emulator takes about 1.5 s a step
    # of the recurrence (the whole example, up to 40 steps: 6 minutes).
    ends = np.cumsum([0, *lengths])
    short = [s for s, n in enumerate(lengths) if n < 10]
    words = np.concatenate([words[ends[s] : ends[s + 1]] for s in short])
    feeds = {"words": fb.LoDTensor(words, lengths=[lengths[s] for s in short])}
    want = fb.Session(model).run(feeds)
    (name,) = want
    # The tagger's GRUs (128 units, both directions) take 8 blocks of 32 units at once.
    launcher = DeviceLauncher(tagger_emulator, resident=8)
    with device.use_launcher(launcher):
        session = fb.Session(model, device="cuda")
        # Every standard node on the device: no ONNX Runtime partition.
        assert "onnx" not in {s.kind for s in session._program.steps}
        # The GRUs' weights live on the device packed, once: no raw copy beside them.
        grus = [n for n in model.graph if n.op_type == "FusionGRU"]
        weights = {v.name for n in grus for v in n.inputs[2:6] if v is not None}
        assert grus and weights and not weights & set(session._program._uploaded)
        got = session.run(feeds)[name]
    assert isinstance(got.data, DeviceArray) and _is_host(got.offsets)
    assert np.asarray(got.data).tobytes() == want[name].data.tobytes()
    assert got.offsets.tolist() == want[name].offsets.tolist()
