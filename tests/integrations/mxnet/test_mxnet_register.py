"""fusebridge's native MXNet ops (register()): the same bits and values as fusebridge.kernels,
through nd, autograd and bound symbols, and clear MXNet errors for bad input and for the GRU's
gradient."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.mxnet
mx = pytest.importorskip("mxnet")

from fusebridge import kernels  # noqa: E402
from fusebridge.integrations.mxnet import LIBRARY_NAME, register  # noqa: E402

MXNetError = mx.base.MXNetError


@pytest.fixture(scope="module", autouse=True)
def library():
    return register()


def nd(a: np.ndarray) -> "mx.nd.NDArray":
    return mx.nd.array(a, dtype=a.dtype)


def unpack(mask: np.ndarray, shape: tuple) -> np.ndarray:
    return np.unpackbits(mask, bitorder="little")[: int(np.prod(shape))].reshape(shape)


def mask_shape(shape: tuple, axes: tuple) -> tuple:
    shared = {a % len(shape) for a in axes}
    return tuple(1 if d in shared else n for d, n in enumerate(shape))


# ---------------------------------------------------------------- dropout


DROPOUT_CASES = [
    # shape, p, axes, seed, offset
    ((7,), 0.5, (), 0, 0),
    ((3, 5, 7), 0.3, (), 12345, 2**32 + 7),
    ((3, 5, 7), 0.3, (1,), 12345, 2**40 + 3),
    ((3, 5, 7), 0.7, (0, 2), 9, 1),
    ((2, 3, 4, 5), 0.1, (-1,), 2**64 - 1, 2**63 + 5),
    ((2, 3, 4, 5), 0.9, (), -1, 3),  # seed -1 is the pattern 2^64 - 1
    ((300, 101), 0.25, (), 77, 2**33),  # several work chunks, the kernels' threads
    ((300, 101), 0.25, (0,), 77, 2**33),
    ((4, 6), 0.0, (), 1, 0),
    ((4, 6), 1.0, (), 1, 0),
]


@pytest.mark.parametrize("shape, p, axes, seed, offset", DROPOUT_CASES)
def test_dropout_bits_equal_kernels(shape, p, axes, seed, offset):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    y, mask = mx.nd.fusebridge_dropout(nd(x), p=p, seed=seed, offset=offset, axes=axes)
    ref_y, ref_mask = kernels.dropout(x, p, seed=seed, offset=offset, axes=axes, return_mask=True)
    assert mask.dtype == np.uint8
    assert np.array_equal(mask.asnumpy(), ref_mask)
    assert np.array_equal(y.asnumpy(), ref_y)


@pytest.mark.parametrize("mode", ["upscale_in_train", "downgrade_in_infer"])
@pytest.mark.parametrize("is_test", [False, True])
def test_dropout_modes_equal_kernels(mode, is_test):
    x = np.random.default_rng(1).standard_normal((5, 9)).astype(np.float32)
    y, mask = mx.nd.fusebridge_dropout(nd(x), p=0.4, seed=5, offset=6, mode=mode, is_test=is_test)
    ref_y, ref_mask = kernels.dropout(
        x, 0.4, seed=5, offset=6, mode=mode, training=not is_test, return_mask=True
    )
    assert np.array_equal(y.asnumpy(), ref_y)
    assert np.array_equal(mask.asnumpy(), ref_mask)


@pytest.mark.parametrize("axes", [(), (1,), (0, 2)])
@pytest.mark.parametrize("mode", ["upscale_in_train", "downgrade_in_infer"])
def test_dropout_backward_through_autograd(axes, mode):
    rng = np.random.default_rng(2)
    shape, p = (4, 6, 5), 0.35
    x = nd(rng.standard_normal(shape).astype(np.float32))
    dy = rng.standard_normal(shape).astype(np.float32)
    x.attach_grad()
    with mx.autograd.record():
        y, mask = mx.nd.fusebridge_dropout(x, p=p, seed=21, offset=2**35, axes=axes, mode=mode)
    y.backward(nd(dy))
    keep = unpack(mask.asnumpy(), mask_shape(shape, axes))
    scale = np.float32(1 / (1 - np.float32(p))) if mode == "upscale_in_train" else np.float32(1)
    assert np.array_equal(x.grad.asnumpy(), dy * keep * scale)
    ref = kernels.dropout_backward(dy, p, mask=mask.asnumpy(), axes=axes, mode=mode)
    assert np.array_equal(x.grad.asnumpy(), ref)


def test_dropout_in_bound_symbol():
    shape, p, seed, offset = (6, 10), 0.5, 3, 2**34 + 1
    x = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    data = mx.sym.var("x")
    y, mask = mx.sym.fusebridge_dropout(data, p=p, seed=seed, offset=offset)
    net = mx.sym.Group([y * 2, mask])
    assert net.infer_shape(x=shape)[1] == [shape, (8,)]
    assert net.infer_type(x=np.float32)[1] == [np.float32, np.uint8]

    grad = mx.nd.zeros(shape)
    ex = net.bind(mx.cpu(), {"x": nd(x)}, args_grad={"x": grad})
    out = ex.forward(is_train=True)
    ref_y, ref_mask = kernels.dropout(x, p, seed=seed, offset=offset, return_mask=True)
    assert np.array_equal(out[0].asnumpy(), ref_y * 2)
    assert np.array_equal(out[1].asnumpy(), ref_mask)
    ex.backward([mx.nd.ones(shape), mx.nd.zeros((8,), dtype=np.uint8)])
    assert np.array_equal(grad.asnumpy(), unpack(ref_mask, shape) * np.float32(2 / (1 - p)))


def test_dropout_in_hybridized_gluon_block():
    class Net(mx.gluon.HybridBlock):
        def hybrid_forward(self, F, x):
            return F.fusebridge_dropout(x, p=0.25, seed=11, offset=2**33)[0]

    net = Net()
    net.hybridize()
    x = np.arange(40, dtype=np.float32).reshape(4, 10)
    ref = kernels.dropout(x, 0.25, seed=11, offset=2**33)
    assert np.array_equal(net(nd(x)).asnumpy(), ref)


# ---------------------------------------------------------------- fusion GRU


def gru_inputs(rng, layout, d, t=6, n=4, ic=5, oc=20):
    x = rng.standard_normal((t, n, ic) if layout == "tnc" else (n, t, ic)).astype(np.float32)
    w = {
        "wx": rng.standard_normal((d, ic, 3 * oc)) * 0.3,
        "wh": rng.standard_normal((d, oc, 3 * oc)) * 0.3,
        "bias": rng.standard_normal((d, 3 * oc)),
        "bias_h": rng.standard_normal((d, 3 * oc)),
        "h0": rng.standard_normal((d, n, oc)),
    }
    return x, {k: v.astype(np.float32) for k, v in w.items()}


def packed(w: dict) -> list[np.ndarray]:
    """The GRU op's weight inputs: packed once by fusebridge.kernels.pack_gru_weights."""
    p = kernels.pack_gru_weights(w["wx"], w["wh"], w["bias"], w["bias_h"])
    return [np.array(a) for a in (p.wx, p.wh, p.bias_x, p.bias_hc)]


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("lbr", [False, True])
@pytest.mark.parametrize("layout", ["tnc", "ntc"])
@pytest.mark.parametrize("with_h0", [False, True])
def test_fusion_gru_equals_kernels(direction, lbr, layout, with_h0):
    d = 2 if direction == "bidirectional" else 1
    x, w = gru_inputs(np.random.default_rng(4), layout, d)
    lens = np.array([6, 2, 0, 5])  # unequal, one empty sentence
    h0 = w["h0"] if with_h0 else None
    ref = kernels.fusion_gru(
        x, w["wx"], w["wh"], w["bias"], bias_h=w["bias_h"], h0=h0, seq_lens=lens,
        layout=layout, direction=direction, linear_before_reset=lbr,
    )  # fmt: skip
    args = [x, lens.astype(np.float32), *packed(w)]
    args += [h0] if with_h0 else []
    y = mx.nd.fusebridge_fusion_gru(
        *map(nd, args), direction=direction, linear_before_reset=lbr, layout=layout,
        has_h0=with_h0,
    )  # fmt: skip
    np.testing.assert_array_equal(y.asnumpy(), ref)  # the same kernels library, bit for bit


@pytest.mark.parametrize("lens_dtype", [np.float32, np.int32, np.int64, np.float64])
def test_fusion_gru_attrs_and_seq_lens_types(lens_dtype):
    x, w = gru_inputs(np.random.default_rng(5), "tnc", 1, oc=7)
    lens = np.array([3, 6, 1, 4])
    attrs = dict(origin_mode=False, activation="relu", gate_activation="sigmoid")
    ref = kernels.fusion_gru(
        x, w["wx"], w["wh"], w["bias"], bias_h=w["bias_h"], seq_lens=lens, layout="tnc", **attrs
    )
    args = [x, lens.astype(lens_dtype), *packed(w)]
    y = mx.nd.fusebridge_fusion_gru(*map(nd, args), **attrs)
    np.testing.assert_array_equal(y.asnumpy(), ref)  # the same kernels library, bit for bit


def test_fusion_gru_in_bound_symbol():
    x, w = gru_inputs(np.random.default_rng(6), "tnc", 2)
    lens = np.array([6, 2, 0, 5], np.float32)
    names = ["x", "seq_lens", "wx", "wh", "bias_x", "bias_hc"]
    values = [x, lens, *packed(w)]
    y = mx.sym.fusebridge_fusion_gru(*map(mx.sym.var, names), direction="bidirectional")
    ex = y.bind(mx.cpu(), dict(zip(names, map(nd, values))))
    out = ex.forward()[0].asnumpy()
    ref = kernels.fusion_gru(
        x, w["wx"], w["wh"], w["bias"], bias_h=w["bias_h"], seq_lens=lens.astype(np.int64),
        layout="tnc", direction="bidirectional",
    )  # fmt: skip
    np.testing.assert_array_equal(out, ref)  # the same kernels library, bit for bit


# ---------------------------------------------------------------- errors


def error_text(call) -> str:
    with pytest.raises(MXNetError) as info:
        call()
        mx.nd.waitall()
    return str(info.value)


X = np.ones((3, 4), np.float32)


@pytest.mark.parametrize(
    "attrs, message",
    [
        (dict(p=1.5, seed=1), "attr 'p' must lie in [0, 1], got '1.5'"),
        (dict(p="nan", seed=1), "attr 'p' must lie in [0, 1]"),
        (dict(p=0.5), "attr 'seed' is required"),
        (dict(p=0.5, seed="abc"), "attr 'seed' must be an integer"),
        (dict(p=0.5, seed=2**64), "attr 'seed' must be an integer in [-2^63, 2^64)"),
        (dict(p=0.5, seed=1, offset=-(2**63) - 1), "attr 'offset' must be an integer"),
        (dict(p=0.5, seed=1, axes=(2,)), "attr 'axes' [2]: axis 2 is out of range"),
        (dict(p=0.5, seed=1, axes=(1, -1)), "attr 'axes' [1, -1] repeats axis -1"),
        (dict(p=0.5, seed=1, mode="always"), "attr 'mode' must be one of"),
        (dict(p=0.5, seed=1, is_test="maybe"), "attr 'is_test' must be True or False"),
        (dict(p=0.5, seed=1, sed=2), "unknown attr 'sed'"),
    ],
)
def test_dropout_bad_attrs_raise(attrs, message):
    text = error_text(lambda: mx.nd.fusebridge_dropout(nd(X), **attrs)[0].asnumpy())
    assert "fusebridge_dropout: " + message in text
    # Earlier errors are not repeated in this one.
    assert text.count("fusebridge_dropout: ") == 1


def test_dropout_bad_dtype_raises():
    text = error_text(lambda: mx.nd.fusebridge_dropout(nd(X.astype(np.float64)), seed=1))
    assert "input 'x' must be float32, got float64" in text


def gru_call(args, **attrs):
    return lambda: mx.nd.fusebridge_fusion_gru(*map(nd, args), **attrs).asnumpy()


def test_fusion_gru_bad_input_raises():
    x, w = gru_inputs(np.random.default_rng(7), "tnc", 1, t=4, n=3, oc=6)
    lens = np.array([4, 2, 1], np.float32)
    good = [x, lens, *packed(w)]

    def with_(i, value):
        return good[:i] + [value] + good[i + 1 :]

    cases = [
        (gru_call(good, direction="sideways"), "attr 'direction' must be one of"),
        (
            gru_call(good, direction="bidirectional"),
            "input 'wh' must be packed [D, ceil(OC/16), OC, 3, 16] with D = 2",
        ),
        (gru_call(with_(2, good[2][:, :, :2])), "input 'wx' must have shape [1, 1, 5, 3, 16]"),
        (gru_call(with_(4, good[4][:, :2])), "input 'bias_x' must have shape [1, 3, 16]"),
        (gru_call(with_(0, x[0])), "input 'x' must be 3-D [T, N, IC]"),
        (gru_call(with_(0, x.astype(np.float64))), "input 'x' must be float32"),
        (gru_call(with_(1, np.array([4, 5, 1], np.float32))), "got 5 at index 1"),
        (gru_call(with_(1, np.array([4, 2.5, 1], np.float32))), "got 2.5 at index 1"),
        (gru_call(good + [np.zeros((1, 3, 7), np.float32)], has_h0=True), "input 'h0'"),
        (gru_call(good, has_h0=True), "expects 7 inputs, but got 6"),
    ]
    for call, message in cases:
        assert message in error_text(call)
    # The op still works after all of that.
    assert gru_call(good)() is not None


def test_fusion_gru_gradient_is_refused_only_when_computed():
    """A backward is registered (so that graphs which could differentiate the GRU build), and
    it raises when a gradient is computed, in autograd and in a bound symbol."""
    x, w = gru_inputs(np.random.default_rng(8), "tnc", 1, oc=6)
    args = [x, np.array([6, 2, 0, 5], np.float32), *packed(w)]
    arrays = list(map(nd, args))
    arrays[0].attach_grad()
    with mx.autograd.record():
        y = mx.nd.fusebridge_fusion_gru(*arrays)
    assert y.shape == (6, 4, 6)
    text = error_text(lambda: (y.backward(), arrays[0].grad.asnumpy()))
    assert "fusebridge_fusion_gru has no backward yet" in text
    names = ["x", "seq_lens", "wx", "wh", "bias_x", "bias_hc"]
    sym = mx.sym.fusebridge_fusion_gru(*map(mx.sym.var, names))
    ex = sym.bind(mx.cpu(), dict(zip(names, arrays)), args_grad={"x": mx.nd.zeros(x.shape)})
    ex.forward(is_train=True)
    assert "fusebridge_fusion_gru has no backward yet" in error_text(
        lambda: ex.backward([mx.nd.ones(y.shape)])
    )


# ---------------------------------------------------------------- register()


def test_register_twice_returns_the_loaded_library(library, capfd):
    assert library.name == LIBRARY_NAME and library.is_file()
    assert register() == library
    assert register(force_rebuild=True) == library  # MXNet cannot unload: nothing to redo
    assert "building" not in capfd.readouterr().err


# ---------------------------------------------------------------- one kernels runtime


def _symbols(path: str, which: str) -> set[str]:
    out = subprocess.run(["nm", "-D", which, path], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return {line.split()[-1] for line in out.stdout.splitlines() if line.strip()}


def test_the_op_library_loads_the_kernels_core_loaded(library):
    """One libfusebridge_kernels.so in the process, the one beside _C; the op library defines
    none of the symbols it exports (no kernel code of its own) and calls them there."""
    from fusebridge.integrations.kernels_library import installed_kernels

    maps = Path("/proc/self/maps").read_text().splitlines()
    mapped = {line.split()[-1] for line in maps if line.endswith(".so") and "/" in line}
    core_lib = str(installed_kernels().library.resolve())
    assert {p for p in mapped if p.endswith("/libfusebridge_kernels.so")} == {core_lib}
    exported = _symbols(core_lib, "--defined-only")
    assert exported and not exported & _symbols(str(library), "--defined-only")
    assert exported & _symbols(str(library), "--undefined-only")


def test_set_isa_and_the_primitive_cache_reach_the_op_library():
    """The op asks the process's one primitive cache (kernels.cache_stats counts its misses)
    for a primitive of the ISA kernels.set_isa chose; its bits are fusebridge.kernels'."""
    from fusebridge.kernels.primitive_cache import clear_cache

    x, w = gru_inputs(np.random.default_rng(9), "tnc", 2, t=30, n=8, ic=32, oc=40)
    lens = np.array([30, 3, 17, 0, 22, 30, 9, 12])
    args = [x, lens.astype(np.float32), *packed(w)]
    before_isa, capacity = kernels.isa(), kernels.cache_stats()["capacity"]
    kernels.set_cache_capacity(64)
    clear_cache()
    try:
        for k, isa in enumerate(kernels.available_isas(), start=1):
            kernels.set_isa(isa)
            got = gru_call(args, direction="bidirectional")()
            assert kernels.cache_stats()["misses"] == k, isa
            np.testing.assert_array_equal(gru_call(args, direction="bidirectional")(), got)
            assert kernels.cache_stats()["misses"] == k, "the op built its primitive again"
            want = kernels.fusion_gru(
                x, w["wx"], w["wh"], w["bias"], bias_h=w["bias_h"], seq_lens=lens,
                layout="tnc", direction="bidirectional",
            )  # fmt: skip
            np.testing.assert_array_equal(got, want)
    finally:
        kernels.set_isa(before_isa)
        kernels.set_cache_capacity(capacity)


def test_one_pool_whose_thread_count_set_num_threads_sets():
    """In a fresh process: the kernels' pool workers (threads named fusebridge-pool) are those
    of one pool, whether _C or the op library ran, and the op runs on as many threads as
    kernels.set_num_threads says."""
    proc = run_python(
        """
        from pathlib import Path
        import numpy as np, mxnet as mx
        from fusebridge import kernels
        from fusebridge.kernels import core
        from fusebridge.integrations.mxnet import register

        def pool_threads():
            names = []
            for task in Path("/proc/self/task").iterdir():
                try:
                    names.append((task / "comm").read_text().strip())
                except OSError:
                    pass  # a thread that ended meanwhile
            return names.count("fusebridge-pool")

        register()
        rng = np.random.default_rng(0)
        x = rng.standard_normal((40, 12, 64)).astype(np.float32)
        lens = rng.integers(1, 41, 12)
        w = kernels.pack_gru_weights(rng.standard_normal((2, 64, 144)).astype(np.float32),
                                     rng.standard_normal((2, 48, 144)).astype(np.float32))
        arrays = [mx.nd.array(np.array(a), dtype=np.float32)
                  for a in (x, lens, w.wx, w.wh, w.bias_x, w.bias_hc)]
        seen = []
        for n in (1, 2, 3):
            kernels.set_num_threads(n)
            mx.nd.fusebridge_fusion_gru(*arrays, direction="bidirectional").asnumpy()
            seen.append((pool_threads(), core._C.pool_workers()))
            kernels.fusion_gru(x, w, seq_lens=lens, layout="tnc", direction="bidirectional")
            seen.append((pool_threads(), core._C.pool_workers()))
        print(seen)
        """
    )
    assert proc.returncode == 0, proc.stderr
    seen = eval(proc.stdout.strip().splitlines()[-1])
    # One pool: after the op library's call with n threads and _C's, n - 1 workers in all.
    assert seen == [(0, 0), (0, 0), (1, 1), (1, 1), (2, 2), (2, 2)]


def test_weights_at_an_address_freed_and_taken_again_give_the_new_results():
    """Nothing keyed by a weight's address or MXNet's version numbers survives a call: NDArrays
    of the weights freed, and new ones of other values made at the very same addresses (and
    with the same version numbers), give the new weights' results. The memory is ours (numpy
    arrays the NDArrays share, from_numpy zero_copy), so the addresses are the same by
    construction, not by MXNet's storage pool."""
    import ctypes

    x, old = gru_inputs(np.random.default_rng(10), "tnc", 1)
    _, new = gru_inputs(np.random.default_rng(11), "tnc", 1)
    lens = np.array([6, 2, 0, 5])
    memory = packed(old)

    def run() -> tuple[np.ndarray, list[int]]:
        weights = [mx.nd.from_numpy(m, zero_copy=True) for m in memory]
        addresses = []
        for a in weights:
            ptr = ctypes.c_void_p()
            mx.base._LIB.MXNDArrayGetData(a.handle, ctypes.byref(ptr))
            addresses.append(ptr.value)
        y = mx.nd.fusebridge_fusion_gru(nd(x), nd(lens.astype(np.float32)), *weights)
        return y.asnumpy(), addresses

    def want(w: dict) -> np.ndarray:
        return kernels.fusion_gru(
            x, w["wx"], w["wh"], w["bias"], bias_h=w["bias_h"], seq_lens=lens, layout="tnc"
        )

    got, addresses = run()
    np.testing.assert_array_equal(got, want(old))
    mx.nd.waitall()
    for m, a in zip(memory, packed(new)):
        m.setflags(write=True)  # from_numpy marks the array read-only while MXNet holds it
        m[...] = a
    got, again = run()
    assert again == addresses
    np.testing.assert_array_equal(got, want(new))
    assert not np.array_equal(got, want(old))


def run_python(code: str, **env: str) -> subprocess.CompletedProcess:
    # cwd: `python -c` puts the working directory first on sys.path, and in the source tree
    # that would be the package without its compiled _C.
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
        cwd=tempfile.gettempdir(),
    )


def test_a_new_process_reuses_the_cached_library(library):
    before = library.stat().st_mtime_ns
    proc = run_python(
        f"""
        from fusebridge.integrations.mxnet import register
        assert str(register()) == {str(library)!r}
        import mxnet as mx
        print(mx.nd.fusebridge_dropout(mx.nd.ones((2, 3)), seed=1)[1].shape)
        """,
        FUSEBRIDGE_MXNET_CACHE=str(library.parent),
    )
    assert proc.returncode == 0, proc.stderr
    assert "building" not in proc.stderr
    assert proc.stdout.strip() == "(1,)"
    assert library.stat().st_mtime_ns == before


def test_build_failure_raises_execution_error(tmp_path):
    proc = run_python(
        f"""
        from fusebridge.errors import ExecutionError
        from fusebridge.integrations.mxnet import register
        try:
            register({str(tmp_path)!r})
        except ExecutionError as exc:
            print("ExecutionError:", exc)
        """,
        CXX=str(tmp_path / "no-such-compiler"),
    )
    assert proc.returncode == 0, proc.stderr
    assert "ExecutionError: fusebridge: building the MXNet op library failed" in proc.stdout
    assert "no-such-compiler" in proc.stdout
    assert not (tmp_path / LIBRARY_NAME).exists()


def test_the_library_links_the_kernels_installed_beside_core(library, tmp_path):
    """One kernels runtime: the MXNet library is the glue linked with the very kernels library
    _C loads (installed beside it); a changed kernels library means a rebuild."""
    from fusebridge.integrations.mxnet import op_library
    from fusebridge.kernels import core

    kernels = op_library.installed_kernels()
    assert kernels.library.parent == Path(core._C.__file__).resolve().parent / "lib"
    include, lib_api_cc = op_library._mxnet_files(mx)

    def key(path: Path) -> str:
        return op_library._build_key(mx, lib_api_cc, include, replace(kernels, library=path))

    changed = tmp_path / kernels.library.name
    changed.write_bytes(kernels.library.read_bytes() + b"\0")
    assert key(changed) != key(kernels.library)
    assert (library.parent / "libfusebridge_mxnet.key").read_text().strip() == key(kernels.library)


@pytest.mark.skipif(shutil.which("nm") is None, reason="needs binutils' nm")
def test_the_library_exports_only_lib_api(library):
    exported = subprocess.run(
        ["nm", "-DC", "--defined-only", str(library)], capture_output=True, text=True, check=True
    ).stdout
    assert "fusebridge::" not in exported
    assert " initialize" in exported


def test_a_missing_kernels_library_is_an_execution_error(tmp_path, monkeypatch):
    from fusebridge.errors import ExecutionError
    from fusebridge.integrations.mxnet import op_library
    from fusebridge.kernels import core

    monkeypatch.setattr(core, "_C", types.SimpleNamespace(__file__=str(tmp_path / "_C.so")))
    with pytest.raises(ExecutionError, match=r"lib/fusebridge_kernels\.json is missing"):
        op_library.installed_kernels()
    (tmp_path / "lib").mkdir()
    manifest = {"library": "libgone.so", "compiler": "g++", "compile_flags": [], "link_flags": []}
    (tmp_path / "lib" / "fusebridge_kernels.json").write_text(json.dumps(manifest))
    with pytest.raises(ExecutionError, match=r"lib/libgone\.so named by .* is missing"):
        op_library.installed_kernels()
