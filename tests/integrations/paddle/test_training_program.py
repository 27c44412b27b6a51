"""A Paddle training program (forward + append_backward, fusebridge.models.paddle_training) read
by fb.load, given explicit RNG streams, fused and run with recompute_dropout_mask.

The oracle is Paddle itself: its twin program multiplies by a fed keep mask where the original
drops out, so Paddle's own backward ops give the gradients for the masks fusebridge drew (computed
here from kernels.dropout_mask, not from the model). Paddle's dropout_grad is checked on its own
mask separately."""

from __future__ import annotations

import re

import numpy as np
import onnx_ir as ir
import pytest
from helpers.error_bounds import PADDLE, U, assert_within, gamma
from helpers.graph_bounds import SESSION, output_bounds
from helpers.paddle_oracle import paddle_or_skip

import fusebridge as fb
from fusebridge import kernels
from fusebridge.fuse_passes import Pipeline, explicit_rng, optimize, recompute_dropout_mask
from fusebridge.fuse_passes.pipelines import TRAINING_FUSIONS
from fusebridge.kernels import reference

pytestmark = pytest.mark.paddle

STEPS, HIDDEN = 8, 16
KEY = fb.random.fold_in(fb.random.key(2026), 3)


@pytest.fixture(scope="module")
def training(tmp_path_factory):
    paddle_or_skip()
    from fusebridge.models import paddle_training

    model = paddle_training.build_attention_training(steps=STEPS, hidden=HIDDEN)
    directory = tmp_path_factory.mktemp("training") / "attention"
    paddle_training.save_training_program(model, directory)
    return paddle_training, model, directory


@pytest.fixture(scope="module")
def x():
    return np.random.default_rng(4).standard_normal((3, STEPS, HIDDEN)).astype(np.float32)


def _with_streams(directory) -> tuple[ir.Model, dict[str, tuple[int, int]]]:
    """The loaded program after explicit_rng, and each dropout's (seed, offset) under KEY."""
    model = fb.load(directory)
    report = explicit_rng(model)
    seed, offset = KEY.seed, KEY.offset
    streams = {s.node: (seed, offset + k) for k, s in enumerate(report.streams)}
    return model, streams


def _paddle_with_masks(training, x, streams) -> dict[str, np.ndarray]:
    """Paddle's twin program (dropout -> multiply by a fed mask) on fusebridge's masks."""
    paddle_training, _, _ = training
    twin = paddle_training.build_attention_training(steps=STEPS, hidden=HIDDEN, masks=True)
    feeds = {"x": x}
    shapes = {"attn_drop": x.shape[:2] + (STEPS,)}
    for name, p, mode, fixed in paddle_training.DROPOUTS:
        seed, offset = (fixed, 0) if fixed is not None else streams[name]
        shape = shapes.get(name, x.shape)
        packed = kernels.dropout_mask(shape, p, seed=seed, offset=offset)
        keep = reference.unpack_mask(packed, shape).astype(np.float32)
        scale = 1 / (1 - np.float32(p)) if mode == "upscale_in_train" else 1.0
        feeds[f"{name}.keep"] = keep * np.float32(scale)
    return paddle_training.run_training_program(twin, feeds)


def _compare(got: dict, want: dict, model: ir.Model, x: np.ndarray) -> None:
    """Ours and Paddle's (on our masks) within both error bounds of the training program
    (tests/helpers/graph_bounds.py: its forward and backward ops, the dropouts on our bits)."""
    assert set(want) <= set(got)
    feeds = {
        "x": x,
        fb.random.SEED_INPUT: np.array(fb.random.as_int64(KEY.seed), np.int64),
        fb.random.OFFSET_INPUT: np.array(fb.random.as_int64(KEY.offset), np.int64),
    }
    bounds = output_bounds(model, feeds, (SESSION, PADDLE))
    for name, value in want.items():
        assert_within(got[name], value, bounds[name], name)


def test_the_program_reads_as_inputs_and_gradients(training):
    _, model, directory = training
    loaded = fb.load(directory)
    assert [v.name for v in loaded.graph.inputs] == ["x"]
    outputs = [v.name for v in loaded.graph.outputs]
    assert outputs == ["loss", *sorted(model.grads.values())]
    dropouts = [n for n in loaded.graph if n.op_type == "Dropout"]
    grads = [n for n in loaded.graph if n.op_type == "DropoutGrad"]
    assert len(dropouts) == len(grads) == 3
    # Each forward keeps its packed mask for its DropoutGrad; fix_seed gives a constant seed.
    for node in dropouts:
        assert len(node.outputs) == 2
        assert {u.node.op_type for u in node.outputs[1].uses()} == {"DropoutGrad"}
    tail = next(n for n in dropouts if n.name == "tail_drop")
    assert tail.inputs[1].const_value.numpy() == 7


@pytest.mark.parametrize("backend", ["kernels", "reference"])
def test_gradients_equal_paddles_on_the_same_masks(training, x, backend):
    model, streams = _with_streams(training[2])
    got = fb.Session(model, backend=backend).run({"x": x}, rng=KEY)
    _compare(got, _paddle_with_masks(training, x, streams), model, x)


def test_recomputed_masks_give_the_stored_mask_gradients(training, x):
    stored, streams = _with_streams(training[2])
    recomputed, _ = _with_streams(training[2])
    report = recompute_dropout_mask(recomputed)
    assert sorted(report.recomputed) == ["attn_drop", "out_drop", "tail_drop"]
    assert report.refused == ()
    # No mask is made any more: each DropoutGrad reads its forward's seed and offset.
    masks = [v for n in recomputed.graph for v in n.outputs if v.dtype == ir.DataType.UINT8]
    assert masks == []
    forwards = [n for n in recomputed.graph if n.op_type == "Dropout"]
    grads = [n for n in recomputed.graph if n.op_type == "DropoutGrad"]
    assert all(g.inputs[1] is None for g in grads)
    assert {(g.inputs[2], g.inputs[3]) for g in grads} == {
        (f.inputs[1], f.inputs[2] if len(f.inputs) > 2 else None) for f in forwards
    }
    want = fb.Session(stored).run({"x": x}, rng=KEY)
    got = fb.Session(recomputed).run({"x": x}, rng=KEY)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    reference_run = fb.Session(recomputed, backend="reference").run({"x": x}, rng=KEY)
    _compare(reference_run, _paddle_with_masks(training, x, streams), stored, x)
    # Twice changes nothing.
    again = recompute_dropout_mask(recomputed)
    assert again.recomputed == () and again.refused == ()


def test_training_fusions_then_recompute(training, x):
    model, streams = _with_streams(training[2])
    fused, report = optimize(model, Pipeline("fusions", TRAINING_FUSIONS))
    fired = {r.name: r.fired for r in report.passes}
    assert fired["matmul_add_dropout"] == 1  # the output projection and its dropout
    # The attention softmax with its backward: the gradient recomputes the probabilities.
    assert fired["softmax_dropout_training"] == 1
    assert fired["softmax_dropout"] == 0 and report.refusals("softmax_dropout") == ()
    (softmax,) = [n for n in fused.graph if n.op_type == "SoftmaxDropout"]
    (softmax_grad,) = [n for n in fused.graph if n.op_type == "SoftmaxDropoutGrad"]
    assert softmax.name == "attn_drop"
    assert softmax_grad.inputs[1] is softmax.inputs[0]  # x, not the probabilities
    assert not [n for n in fused.graph if n.op_type == "Softmax"]
    recompute = recompute_dropout_mask(fused)
    assert sorted(recompute.recomputed) == ["attn_drop", "out_drop", "tail_drop"]
    (matmul,) = [n for n in fused.graph if n.op_type == "MatMulDropout"]
    assert matmul.name == "out_drop" and len(matmul.outputs) == 1
    assert len(softmax.outputs) == 1 and softmax_grad.inputs[2] is None
    assert softmax_grad.inputs[3:] == softmax.inputs[1:]
    for backend in ("kernels", "reference"):
        got = fb.Session(fused, backend=backend).run({"x": x}, rng=KEY)
        _compare(got, _paddle_with_masks(training, x, streams), model, x)


def test_paddles_dropout_grad_is_ours_on_its_mask(training, x):
    # Paddle's own dropout, its own random mask: our backward on that mask gives its X@GRAD.
    paddle_training, model, _ = training
    from fusebridge.integrations.paddle.legacy import legacy_static

    paddle = paddle_or_skip()
    names = []
    for name, _, _, _ in paddle_training.DROPOUTS:
        names += [f"{name}.mask", f"{name}@GRAD"]
    grads_in = {
        "attn_drop": "probs@GRAD",
        "out_drop": "fc_3.tmp_1@GRAD",
        "tail_drop": "hidden@GRAD",
    }
    names += list(grads_in.values())
    with legacy_static(paddle), paddle.static.scope_guard(model.scope):
        outs = paddle.static.Executor(paddle.CPUPlace()).run(
            model.program, feed={"x": x}, fetch_list=names
        )
    got = dict(zip(names, (np.asarray(o) for o in outs)))
    for name, p, mode, _ in paddle_training.DROPOUTS:
        mask = got[f"{name}.mask"]
        assert mask.dtype == np.uint8 and set(np.unique(mask)) <= {0, 1}
        packed = np.packbits(mask.reshape(-1).astype(bool), bitorder="little")
        dx = kernels.dropout_backward(got[f"{name}@GRAD"], p, mask=packed, mode=mode)
        # dy * keep * scale: each side rounds at most twice
        assert_within(dx, got[grads_in[name]], 4 * U * np.abs(dx), name)


def test_masks_that_cannot_be_recomputed_are_named(training):
    directory = training[2]
    # Before explicit_rng the two unseeded dropouts have no seed to recompute from.
    model = fb.load(directory)
    report = recompute_dropout_mask(model)
    assert report.recomputed == ("tail_drop",)
    reasons = dict(report.refused)
    assert reasons == {
        "attn_drop": "no seed input (run explicit_rng first)",
        "out_drop": "no seed input (run explicit_rng first)",
    }
    # A mask someone else reads, or one the graph returns, stays.
    model, _ = _with_streams(directory)
    attn = next(n for n in model.graph if n.name == "attn_drop")
    model.graph.outputs.append(attn.outputs[1])
    out = next(n for n in model.graph if n.name == "out_drop")
    ident = ir.node("Identity", [out.outputs[1]], name="peek")
    model.graph.append(ident)
    model.graph.outputs.append(ident.outputs[0])
    reasons = dict(recompute_dropout_mask(model).refused)
    assert reasons["attn_drop"] == "the mask is a graph output"
    assert reasons["out_drop"] == "the mask is also read by [\"Identity 'peek'\"]"
    assert (
        "recompute_dropout_mask: 1 mask(s) recomputed"
        in recompute_dropout_mask(fb.load(directory)).text()
    )


def test_cli_training_pipeline_writes_a_runnable_file(training, x, tmp_path, capsys):
    from fusebridge.cli.command import main

    out = tmp_path / "train.onnx"
    assert (
        main(["optimize", str(training[2]), "-o", str(out), "--pipeline", "training", "--explain"])
        == 0
    )
    printed = capsys.readouterr().out
    assert re.search(r"explicit_rng +fired 2", printed)
    assert re.search(r"softmax_dropout_training +fired 1", printed)
    assert re.search(r"recompute_dropout_mask +fired 3", printed)
    session = fb.Session(str(out))
    assert session.output_names[-1] == "rng_offset_out"
    got = session.run({"x": x}, rng=KEY)
    assert int(got["rng_offset_out"]) == KEY.offset + 2
    model, streams = _with_streams(training[2])
    _compare(got, _paddle_with_masks(training, x, streams), model, x)


def test_a_seed_tensor_is_the_dropouts_seed(tmp_path):
    # Paddle's dropout takes its seed from a Seed input first: fed here, it is the Philox seed.
    paddle = paddle_or_skip()
    from fusebridge.integrations.paddle.legacy import legacy_static
    from fusebridge.models.paddle_training import TrainingProgram, save_training_program

    with legacy_static(paddle), paddle.utils.unique_name.guard():
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            block = main.global_block()
            x = paddle.static.data("x", [-1, 6], "float32")
            x.stop_gradient = False
            seed = paddle.static.data("seed", [1], "int32")
            out = block.create_var(name="dropped", dtype="float32")
            mask = block.create_var(name="dropped.mask", dtype="uint8")
            attrs = {
                "dropout_prob": 0.5,
                "is_test": False,
                "dropout_implementation": "upscale_in_train",
            }
            block.append_op(
                type="dropout",
                inputs={"X": [x], "Seed": [seed]},
                outputs={"Out": [out], "Mask": [mask]},
                attrs=attrs,
            )
            loss = block.create_var(name="loss", dtype="float32")
            block.append_op(type="mean", inputs={"X": [out]}, outputs={"Out": [loss]})
            paddle.static.append_backward(loss)
    program = TrainingProgram(main, paddle.static.Scope(), "loss", {}, {})
    save_training_program(program, tmp_path)
    model = fb.load(tmp_path)
    assert [v.name for v in model.graph.inputs] == ["seed", "x"]  # by name
    assert explicit_rng(model).count == 0  # seeded by the tensor
    values = np.random.default_rng(0).standard_normal((4, 6)).astype(np.float32)
    got = fb.Session(model).run({"x": values, "seed": np.array([1234], np.int32)})
    want = kernels.dropout(values, 0.5, seed=1234, offset=0)
    # Our loss (the model's mean over a dropout) and numpy's mean of our dropout's output:
    # a sum of 24 terms and a division, each side.
    bound = 2 * gamma(want.size + 2) * np.abs(want).mean()
    assert_within(got["loss"], want.mean(), bound, "loss")
