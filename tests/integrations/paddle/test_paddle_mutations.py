"""Mutated Paddle programs: the bundled models (and, with Paddle, the training program) parsed,
changed one thing at a time (an op's inputs, outputs or attributes removed, retyped or given
odd values, variables renamed or their VarDesc changed or removed, ops removed or doubled),
written back (paddle_program_writer.py) and loaded; a model that loads is run on its example
input. Every failure must be a fusebridge.Error, and a load error must name the model."""

from __future__ import annotations

import dataclasses
import functools
import math
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest
from helpers.paddle_oracle import paddle_or_skip
from helpers.paddle_program_writer import write_program

import fusebridge as fb
from fusebridge.integrations.paddle.load import ProgramConverter
from fusebridge.integrations.paddle.params import find_model_files, read_paddle_model
from fusebridge.integrations.paddle.program_desc import OpDesc, ProgramDesc
from fusebridge.models import assets, paddle_families

Mutation = tuple[str, ProgramDesc]

# Values of another AttrType than the attribute's own: (AttrType, value).
RETYPED = [(2, "False"), (0, 1), (6, True), (3, [1, 2]), (1, 1.5)]
# Odd values of the attribute's own AttrType (a BOOLEAN is flipped).
ODD_VALUES = {
    0: [-1, 7, -(2**31)],
    9: [-2, 2**62],
    1: [math.nan, math.inf, -3.0, 1.5],
    15: [math.nan, -3.0],
    2: ["", "bogus"],
    3: [[], [-5], [2**30, 2**30]],
    11: [[], [2**62, 2**62]],
}


class _Recording(dict):
    """An op's attributes, noting the names a converter asks for."""

    def __init__(self, attrs: dict, read: set[str]) -> None:
        super().__init__(attrs)
        self.read = read

    def __contains__(self, name: object) -> bool:
        self.read.add(name)
        return super().__contains__(name)

    def __getitem__(self, name: str) -> object:
        self.read.add(name)
        return super().__getitem__(name)


def _read_attributes(program: ProgramDesc, params: dict, source: str) -> dict[str, set[str]]:
    """op type -> the attributes converting `program` reads (the ones worth mutating)."""
    read: dict[str, set[str]] = {}
    block = program.blocks[0]
    ops = tuple(
        dataclasses.replace(op, attrs=_Recording(op.attrs, read.setdefault(op.type, set())))
        for op in block.ops
    )
    spied = dataclasses.replace(program, blocks=(dataclasses.replace(block, ops=ops),))
    ProgramConverter(spied, params, source).convert()
    return read


def _with_ops(program: ProgramDesc, ops: list[OpDesc], variables: dict | None = None):
    block = program.blocks[0]
    block = dataclasses.replace(
        block, ops=tuple(ops), vars=block.vars if variables is None else variables
    )
    return dataclasses.replace(program, blocks=(block, *program.blocks[1:]))


def _op_changed(program: ProgramDesc, i: int, **changes) -> ProgramDesc:
    ops = list(program.blocks[0].ops)
    ops[i] = dataclasses.replace(ops[i], **changes)
    return _with_ops(program, ops)


def _slot_mutations(program: ProgramDesc, i: int, op: OpDesc, key: str) -> Iterator[Mutation]:
    slots = getattr(op, key)
    for slot, names in slots.items():
        variants = {
            "removed": None,
            "emptied": (),
            "doubled": names + names,
            "renamed": tuple(f"{n}_renamed" for n in names),
        }
        for how, value in variants.items():
            changed = {k: v for k, v in slots.items() if k != slot}
            if value is not None:
                changed[slot] = value
            yield f"{key} {slot} {how}", _op_changed(program, i, **{key: changed})


def _attr_mutations(program: ProgramDesc, i: int, op: OpDesc, names) -> Iterator[Mutation]:
    for name in sorted(names & set(op.attrs)):
        kind = op.attr_types[name]

        def set_attr(new_kind: int, value: object, name: str = name) -> ProgramDesc:
            attrs, types = dict(op.attrs), dict(op.attr_types)
            attrs[name], types[name] = value, new_kind
            return _op_changed(program, i, attrs=attrs, attr_types=types)

        attrs = {k: v for k, v in op.attrs.items() if k != name}
        types = {k: v for k, v in op.attr_types.items() if k != name}
        yield f"attribute {name} removed", _op_changed(program, i, attrs=attrs, attr_types=types)
        for new_kind, value in RETYPED:
            if new_kind != kind:
                yield f"attribute {name} = {value!r} (type {new_kind})", set_attr(new_kind, value)
        odd = [not op.attrs[name]] if kind == 6 else ODD_VALUES.get(kind, [])
        for value in odd:
            yield f"attribute {name} = {value!r}", set_attr(kind, value)


def _var_mutations(program: ProgramDesc, names: list[str]) -> Iterator[Mutation]:
    block = program.blocks[0]
    for name in names:
        var = block.vars[name]
        others = {k: v for k, v in block.vars.items() if k != name}
        yield f"VarDesc {name!r} removed", _with_ops(program, list(block.ops), others)
        changes = {
            "huge dims": {"shape": (2**40, 2**40)},
            "dims -5": {"shape": (-5,) * max(1, len(var.shape))},
            "rank + 1": {"shape": (*var.shape, 1)},
            "int8": {"dtype": np.dtype(np.int8)},
            "lod_level 2": {"lod_level": 2},
            "persistable flipped": {"persistable": not var.persistable},
        }
        for how, change in changes.items():
            if var.dtype is None and how in ("int8", "huge dims", "dims -5"):
                continue
            changed = {**block.vars, name: dataclasses.replace(var, **change)}
            yield f"VarDesc {name!r}: {how}", _with_ops(program, list(block.ops), changed)
        # Renamed everywhere: VarDesc and every reference.
        renamed = f"{name}_renamed"
        variables = {(renamed if k == name else k): v for k, v in block.vars.items()}
        variables[renamed] = dataclasses.replace(var, name=renamed)

        def rename(slots: dict, old: str = name, new: str = renamed) -> dict:
            return {s: tuple(new if n == old else n for n in ns) for s, ns in slots.items()}

        ops = [
            dataclasses.replace(op, inputs=rename(op.inputs), outputs=rename(op.outputs))
            for op in block.ops
        ]
        yield f"variable {name!r} renamed", _with_ops(program, ops, variables)


def mutations(program: ProgramDesc, read: dict[str, set[str]]) -> Iterator[Mutation]:
    """One change at a time; the changes are made to the first op of each type only and to
    the variables it reads or writes (the bundled models repeat their layers)."""
    block = program.blocks[0]
    seen: set[str] = set()
    variables: dict[str, None] = {}  # those of the ops changed, in order
    for i, op in enumerate(block.ops):
        if op.type in seen:
            continue
        seen.add(op.type)
        for names in [*op.inputs.values(), *op.outputs.values()]:
            variables.update((n, None) for n in names if n in block.vars)
        where = f"op {i} ({op.type}): "
        ops = list(block.ops)
        yield where + "removed", _with_ops(program, ops[:i] + ops[i + 1 :])
        yield where + "doubled", _with_ops(program, ops[: i + 1] + ops[i:])
        for what, mutated in _slot_mutations(program, i, op, "inputs"):
            yield where + what, mutated
        for what, mutated in _slot_mutations(program, i, op, "outputs"):
            yield where + what, mutated
        for what, mutated in _attr_mutations(program, i, op, read.get(op.type, set())):
            yield where + what, mutated
    yield from _var_mutations(program, list(variables))
    blocks = (dataclasses.replace(block, idx=1), *program.blocks[1:])
    yield "block 0 with idx 1", dataclasses.replace(program, blocks=blocks)
    yield "a second block 0", dataclasses.replace(program, blocks=(block, block))


# ---- the models ----


@dataclasses.dataclass
class Model:
    directory: Path  # the model, whose model file the test replaces
    run: Callable[[ir.Model], object]  # runs a loaded model on its example input


def _run_example(name: str) -> Callable[[ir.Model], object]:
    directory = assets.path(name)
    lengths = [int(n) for n in (directory / "example_lengths.txt").read_text().split()][:2]
    words = np.load(directory / "example_words.npy")[: sum(lengths)]  # two sentences: fast

    def run(loaded: ir.Model) -> object:
        session = fb.Session(loaded)
        lod = {v.name for v in loaded.graph.inputs}
        feeds = {
            n: fb.LoDTensor(words, lengths=lengths) if f"{n}.offsets" in lod else words
            for n in session.input_names
        }
        return session.run(feeds)

    return run


def _run_training(loaded: ir.Model) -> object:
    from fusebridge.fuse_passes import explicit_rng

    explicit_rng(loaded)
    session = fb.Session(loaded)
    x = np.random.default_rng(0).standard_normal((2, 4, 8)).astype(np.float32)
    state = (fb.random.SEED_INPUT, fb.random.OFFSET_INPUT)
    feeds = {n: x for n in session.input_names if n not in state}
    return session.run(feeds, rng=fb.random.key(0))


@functools.cache
def _training_directory(root: Path) -> Path:
    paddle_or_skip()
    from fusebridge.models import paddle_training

    directory = root / "attention"
    model = paddle_training.build_attention_training(steps=4, hidden=8)
    paddle_training.save_training_program(model, directory)
    return directory


def _run_deepspeech(loaded: ir.Model) -> object:
    return fb.Session(loaded).run(paddle_families.feeds("deepspeech", batch=2))


@pytest.fixture(
    params=[
        "tagger",
        "sentiment",
        "deepspeech",  # conv2d, batch_norm, brelu, flatten, fill_any_like, floordiv, rnn
        pytest.param("training", marks=pytest.mark.paddle),
    ]
)
def model(request, tmp_path_factory) -> Model:
    if request.param == "deepspeech":
        directory = Path(__file__).resolve().parents[2] / "fixtures" / "paddle_families"
        return Model(directory / "deepspeech" / "legacy", _run_deepspeech)
    if request.param == "training":
        root = tmp_path_factory.getbasetemp() / "mutation_training"
        return Model(_training_directory(root), _run_training)
    return Model(assets.path(request.param), _run_example(request.param))


def _copy(model: Model, directory: Path) -> Path:
    """directory: the model's files, copied (a per-variable parameter file may not be a link
    out of the model's directory)."""
    directory.mkdir(parents=True)
    for source in model.directory.iterdir():
        if source.is_file():
            shutil.copyfile(source, directory / source.name)
    return directory


def test_the_writer_writes_what_it_read(model, tmp_path):
    model_file, _ = find_model_files(model.directory)
    program, params = read_paddle_model(model.directory)
    copy = _copy(model, tmp_path / model.directory.name)  # the graph is named after it
    (copy / model_file.name).unlink()
    (copy / model_file.name).write_bytes(write_program(program))
    again, again_params = read_paddle_model(copy)
    assert again == program
    assert [op.attr_types for op in again.blocks[0].ops] == [
        op.attr_types for op in program.blocks[0].ops
    ]
    assert ir.to_proto(fb.load(copy)) == ir.to_proto(fb.load(model.directory))
    assert sorted(again_params) == sorted(params)


def _fingerprint(loaded: ir.Model) -> bytes:
    return ir.to_proto(loaded).SerializeToString(deterministic=True)


def test_mutated_programs_raise_only_fusebridge_errors(model, tmp_path, threads):
    threads(1)  # hundreds of Sessions: ONNX Runtime makes and ends no thread pool for each
    model_file, _ = find_model_files(model.directory)
    program, params = read_paddle_model(model.directory)
    read = _read_attributes(program, params, str(model.directory))
    ran: set[bytes] = set()
    untyped, unnamed, outcomes = [], [], {"load": 0, "run": 0, "ok": 0}
    for k, (what, mutated) in enumerate(mutations(program, read)):
        # One name for all: the graph is named after it, and equal graphs run once.
        directory = _copy(model, tmp_path / f"{k}" / "model")
        (directory / model_file.name).unlink()
        (directory / model_file.name).write_bytes(write_program(mutated))
        stage = "load"
        try:
            loaded = fb.load(directory)
            fingerprint = _fingerprint(loaded)
            if fingerprint in ran:
                continue
            ran.add(fingerprint)
            stage = "run"
            model.run(loaded)
            outcomes["ok"] += 1
        except fb.Error as e:
            outcomes[stage] += 1
            if stage == "load" and str(directory) not in str(e) and model_file.name not in str(e):
                unnamed.append(f"{what}: {e}")
        except Exception as e:  # anything else is what this test looks for
            untyped.append(f"{what} ({stage}): {type(e).__name__}: {e}")
        finally:
            shutil.rmtree(directory.parent)
    assert not untyped, f"{len(untyped)} untyped:\n" + "\n".join(untyped)
    assert not unnamed, "\n".join(unnamed)
    # The mutations reach both the checks at load and running models.
    assert outcomes["load"] > 50 and outcomes["ok"] > 5, outcomes
