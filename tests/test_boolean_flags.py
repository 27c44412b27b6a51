"""Boolean parameters of the public API (issue 31): `fusion_gru(origin_mode="False")` used to
compute origin_mode=True, because bool("False") is True. Every boolean parameter goes through
`kernels.arguments.as_flag`: True and False (numpy's too) and the integers 1 and 0 (as ONNX
and Paddle attributes spell them); a string, a float, None or any other integer is a typed
error naming the parameter.

The public signatures are walked, so that a boolean parameter added later without a call here
fails `test_every_boolean_parameter_has_a_call`."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable

import numpy as np
import pytest

import fusebridge as fb
from fusebridge import kernels
from fusebridge.kernels.arguments import as_flag
from fusebridge.models import assets

PUBLIC_MODULES = (
    "fusebridge",
    "fusebridge.kernels",
    "fusebridge.random",
    "fusebridge.ops",
    "fusebridge.fuse_passes",
    "fusebridge.runtime",
    "fusebridge.integrations.onnx",
    "fusebridge.integrations.paddle",
    "fusebridge.integrations.mxnet",
)
# Parameters that are not a caller's input: records a pass returns (their fields are set by
# the code that made them).
NOT_INPUTS = {"FusePassResult.__init__": {"modified"}, "PassReport.__init__": {"changed"}}
BAD = ["False", "no", "", 2, -1, 1.0, 0.0, None, [True]]


def _is_bool(p: inspect.Parameter) -> bool:
    annotation = (
        p.annotation if isinstance(p.annotation, str) else getattr(p.annotation, "__name__", "")
    )
    return isinstance(p.default, bool) or annotation.split(" |")[0] == "bool"


def public_boolean_parameters() -> dict[str, set[str]]:
    """'module.qualname' of every public function and method -> its boolean parameters (one
    entry per function, however many modules export it)."""
    found: dict[str, set[str]] = {}
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        names = getattr(module, "__all__", None) or [n for n in dir(module) if n[0] != "_"]
        for name in names:
            obj = getattr(module, name, None)
            if inspect.isfunction(obj):
                members = [obj]
            elif inspect.isclass(obj) and obj.__module__.startswith("fusebridge"):
                members = [
                    v
                    for k, v in vars(obj).items()
                    if inspect.isfunction(v) and (k[0] != "_" or k in ("__init__", "__call__"))
                ]
            else:
                continue
            for fn in members:
                where = f"{fn.__module__}.{fn.__qualname__}"
                flags = {p.name for p in inspect.signature(fn).parameters.values() if _is_bool(p)}
                flags -= NOT_INPUTS.get(fn.__qualname__, set())
                if flags:
                    found[where] = flags
    return found


RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 6)).astype(np.float32)  # square: every transpose chains
WEIGHTS = kernels.pack_gru_weights(
    RNG.standard_normal((1, 6, 9)).astype(np.float32) * 0.3,
    RNG.standard_normal((1, 3, 9)).astype(np.float32) * 0.3,
)


def _gru(**flags):
    return kernels.fusion_gru(X, WEIGHTS, offsets=[0, 1, 6], **flags)


def _gru_kernel(**flags):
    call = {k: flags.pop(k) for k in ("return_last",) if k in flags}
    return kernels.GRUKernel(WEIGHTS, **flags)(X, offsets=[0, 1, 6], **call)


def _save_onnx(tmp_path, **flags):
    model = fb.load(assets.path("tagger"))
    fb.save_onnx(model, tmp_path / "m.onnx", **flags)
    return (tmp_path / "m.onnx").read_bytes()


def _prepare(**flags):
    model = fb.optimize(fb.load(assets.path("tagger")))[0]
    node = next(n for n in model.graph if n.domain == fb.conventions.DOMAIN)
    return fb.ops.prepare(node, {}, **flags)


def _session_run(**flags):
    model = fb.optimize(fb.load(assets.path("tagger")))[0]
    words = fb.LoDTensor(np.array([[1], [2]]), lengths=[2])
    return fb.Session(model).run({"words": words}, **flags)


def _paddle(name: str) -> Callable:
    def call(**flags):
        paddle = pytest.importorskip("paddle")
        from fusebridge.integrations import paddle as fb_paddle

        x = paddle.to_tensor(X)
        key = fb.random.key(3)
        if name == "matmul_dropout":
            return fb_paddle.matmul_dropout(x, paddle.to_tensor(X), 0.5, key=key, **flags)
        return getattr(fb_paddle, name)(x, 0.5, key=key, **flags)

    return call


def _mxnet_register(**flags):
    """Refused before mxnet is imported: the flag check comes first."""
    from fusebridge.integrations import mxnet as fb_mxnet

    return fb_mxnet.register(**flags)


K = "fusebridge.kernels."
PADDLE = "fusebridge.integrations.paddle.functional."
# 'module.qualname' -> a call with valid arguments that takes the boolean parameters as keywords
CALLS: dict[str, Callable] = {
    K + "gru.fusion_gru": _gru,
    K + "gru.GRUKernel.__init__": _gru_kernel,
    K + "gru.GRUKernel.__call__": _gru_kernel,
    K + "dropout.dropout": lambda **f: kernels.dropout(X, 0.5, seed=1, **f),
    K + "fused_dropout.matmul": lambda **f: kernels.matmul(X, X, **f),
    K + "fused_dropout.matmul_dropout": lambda **f: kernels.matmul_dropout(X, X, 0.5, seed=1, **f),
    K + "fused_dropout.matmul_dropout_backward": lambda **f: kernels.matmul_dropout_backward(
        np.ones((6, 6), np.float32), X, X, 0.5, seed=1, **f
    ),
    K + "fused_dropout.softmax_dropout": lambda **f: kernels.softmax_dropout(X, 0.5, seed=1, **f),
    "fusebridge.integrations.onnx.save.save_onnx": _save_onnx,
    "fusebridge.ops.prepare": _prepare,
    "fusebridge.runtime.session.Session.run": _session_run,
    "fusebridge.integrations.mxnet.op_library.register": _mxnet_register,
    PADDLE + "dropout": _paddle("dropout"),
    PADDLE + "softmax_dropout": _paddle("softmax_dropout"),
    PADDLE + "matmul_dropout": _paddle("matmul_dropout"),
}


def test_every_boolean_parameter_has_a_call():
    found = public_boolean_parameters()
    missing = sorted(set(found) - set(CALLS))
    assert not missing, f"boolean parameters without a call in CALLS: {missing}"
    # the walk sees what it should (a walk that found nothing would test nothing)
    assert found[K + "gru.fusion_gru"] == {"linear_before_reset", "origin_mode", "return_last"}
    assert found[PADDLE + "dropout"] == {"training", "save_mask"}
    assert len(found) == len(CALLS)


@pytest.mark.parametrize(
    "where, flag",
    [(w, f) for w, flags in sorted(public_boolean_parameters().items()) for f in sorted(flags)],
)
@pytest.mark.parametrize("bad", BAD, ids=repr)
def test_a_boolean_parameter_refuses_what_is_not_a_boolean(tmp_path, where, flag, bad):
    kwargs = {"tmp_path": tmp_path} if where.endswith("save_onnx") else {}
    with pytest.raises((fb.ArgumentError, fb.ArgumentTypeError)) as caught:
        CALLS[where](**kwargs, **{flag: bad})
    assert flag in str(caught.value) and "True or False" in str(caught.value)


@pytest.mark.parametrize(
    "call, flags",
    [
        (_gru, ("linear_before_reset", "origin_mode")),
        (lambda **f: kernels.dropout(X, 0.5, seed=1, **f), ("training",)),
        (lambda **f: kernels.matmul(X, X, **f), ("transpose_b",)),
    ],
)
def test_one_and_zero_mean_true_and_false(call, flags):
    for flag in flags:
        for number, truth in ((1, True), (0, False), (np.int64(1), True), (np.bool_(0), False)):
            np.testing.assert_array_equal(call(**{flag: number}), call(**{flag: truth}))


def test_the_reported_example():
    """origin_mode="False" computed origin_mode=True, bit for bit."""
    with pytest.raises(fb.ArgumentTypeError, match="origin_mode must be True or False"):
        _gru(origin_mode="False")
    assert not np.array_equal(_gru(origin_mode=False), _gru(origin_mode=True))


def test_as_flag_messages_name_the_op_and_the_value():
    with pytest.raises(fb.ArgumentTypeError, match=r"op: f must be True or False .* str 'yes'"):
        as_flag("yes", "op", "f")
    with pytest.raises(fb.ArgumentError, match=r"op: f must be True or False \(or 1 or 0\), got 2"):
        as_flag(2, "op", "f")
