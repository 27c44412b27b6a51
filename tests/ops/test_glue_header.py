"""The framework glues' attribute header (fusebridge/kernels/csrc/op_attributes.hpp) says what
the op schemas say: the committed file is what fusebridge.ops.glue_header prints, it compiles
alone as plain C++17, and a program built on it reads back each attribute's kind, default and
allowed values as the schema objects give them."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from fusebridge import ops
from fusebridge.ops import glue_header

HEADER = Path(glue_header.__file__).parents[1] / "kernels" / "csrc" / "op_attributes.hpp"
CXX = shutil.which(os.environ.get("CXX", "g++")) or shutil.which("c++")
needs_cxx = pytest.mark.skipif(CXX is None, reason="no C++ compiler")
STRICT = ["-std=c++17", "-Wall", "-Wextra", "-Wpedantic", "-Werror", f"-I{HEADER.parent}"]


def test_the_header_is_generated_from_the_schemas():
    assert HEADER.read_text() == glue_header.glue_header(), f"run: {glue_header.COMMAND}"


def compiled(tmp_path: Path, source: str, *flags: str) -> subprocess.CompletedProcess:
    tu = tmp_path / "tu.cc"
    tu.write_text(source)
    return subprocess.run(
        [CXX, *STRICT, *flags, str(tu), "-o", str(tmp_path / "tu")],
        capture_output=True,
        text=True,
        timeout=120,
    )


@needs_cxx
def test_the_header_compiles_alone(tmp_path):
    done = compiled(tmp_path, '#include "op_attributes.hpp"\n', "-fsyntax-only")
    assert done.returncode == 0, done.stderr


# Prints one line per attribute: op, name, kind, required, default, choices (|-separated),
# and for a string attribute each choice's enumerator value.
PROGRAM = r"""
#include <cstdio>
#include "op_attributes.hpp"
using namespace fusebridge::op_attributes;

const char* kinds[] = {"boolean", "integer", "real", "string", "int_list"};

void show(const char* op, const Attribute& a, std::initializer_list<int> enumerators) {
    std::printf("%s %s %s %d ", op, a.name, kinds[int(a.kind)], int(a.required));
    switch (a.kind) {
        case Kind::boolean: std::printf("%d", int(a.default_bool)); break;
        case Kind::integer: std::printf("%lld", (long long)a.default_int); break;
        case Kind::real: std::printf("%.17g", a.default_real); break;
        case Kind::string: std::printf("%s", a.default_string); break;
        case Kind::int_list: std::printf("()"); break;
    }
    std::printf(" ");
    for (std::size_t i = 0; i < a.choices.size() && a.choices[i]; ++i)
        std::printf("%s%s", i ? "|" : "", a.choices[i]);
    std::printf(" ");
    for (int e : enumerators) std::printf("%d,", e);
    std::printf("\n");
}

template <std::size_t N>
void show_list(const char* op, const char* what, const char* const (&list)[N]) {
    std::printf("%s %s", op, what);
    for (const char* item : list) std::printf("|%s", item);
    std::printf("\n");
}

int main() {
"""


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))


def _program() -> str:
    """PROGRAM's main: every schema attribute of every glue op, and the glue-only ones, by
    name (a missing one fails to compile), and each op's framework lists."""
    body = []
    for op in glue_header.GLUE_OPS:
        names = [a.name for a in ops.schema(op.op_type).attributes]
        names += [n for (t, n) in glue_header.GLUE_ONLY if t == op.op_type]
        for name in names:
            a = f"{op.namespace}::{name}"
            attribute = next((x for x in ops.schema(op.op_type).attributes if x.name == name), None)
            choices = attribute.choices if attribute is not None else ()
            narrowed = glue_header.NARROWED.get((op.op_type, name))
            choices = narrowed.choices if narrowed else choices
            enumerators = ""
            if choices and isinstance(choices[0], str):
                enum = f"{op.namespace}::{_camel(name)}"
                enumerators = ", ".join(f"int({enum}::{c})" for c in choices)
            body.append(f'    show("{op.op_type}", {a}, {{{enumerators}}});')
        for framework in ("mxnet", "paddle"):
            if getattr(op, framework) is not None:
                lists = f'"{op.op_type}", "{framework}", {op.namespace}::{framework}_attrs'
                body.append(f"    show_list({lists});")
    return PROGRAM + "\n".join(body) + "\n}\n"


def _oracle_kind(default: object, choices: tuple) -> str:
    """How the glues type an attribute, from its Python default: a 0/1 int is a bool."""
    if isinstance(default, bool) or (type(default) is int and set(choices) == {0, 1}):
        return "boolean"
    return {int: "integer", float: "real", str: "string", tuple: "int_list"}[type(default)]


PADDLE_TYPES = {
    "boolean": "bool",
    "integer": "int",
    "real": "float",
    "string": "std::string",
    "int_list": "std::vector<int>",
}


@needs_cxx
def test_a_program_on_the_header_reads_what_the_schemas_say(tmp_path):
    done = compiled(tmp_path, _program())
    assert done.returncode == 0, done.stderr
    run = subprocess.run([str(tmp_path / "tu")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    seen: dict[tuple[str, str], list[str]] = {}
    for line in run.stdout.splitlines():
        op_type, rest = line.split(" ", 1)
        if rest.startswith(("mxnet|", "paddle|")):
            framework, *items = rest.split("|")
            seen[(op_type, framework)] = items
        else:
            name, *fields = rest.split(" ")
            seen[(op_type, name)] = fields

    for op in glue_header.GLUE_OPS:
        schema = ops.schema(op.op_type).attributes
        kinds = {}
        for a in schema:
            kind, required, default, choices, enumerators = seen[(op.op_type, a.name)]
            want_default, want_choices = a.default, a.choices
            if (narrowed := glue_header.NARROWED.get((op.op_type, a.name))) is not None:
                # The one place the glues allow less than the schema, said with a reason.
                assert set(narrowed.choices) < set(a.choices) and narrowed.why
                want_default, want_choices = narrowed.default, narrowed.choices
            kinds[a.name] = want_kind = _oracle_kind(a.default, a.choices)
            where = f"{op.op_type}.{a.name}"
            assert (kind, required) == (want_kind, "0"), where
            if want_kind == "real":
                assert float(default) == want_default, where
            elif want_kind == "int_list":
                assert (default, want_default) == ("()", ()), where
            elif want_kind == "string":
                assert default == want_default, where
            else:  # a bool prints as 0 or 1, as the schema's int
                assert int(default) == want_default, where
            if want_kind == "string":
                assert choices.split("|") == list(want_choices), where
                # Each allowed value's enumerator is its position: how the glues map them.
                assert enumerators == "".join(f"{i}," for i in range(len(want_choices))), where
            else:
                assert choices == "" and enumerators == "", where

        schema_names = [a.name for a in schema]
        for framework in ("mxnet", "paddle"):
            listed = getattr(op, framework)
            if listed is None:
                assert (op.op_type, framework) not in seen
                continue
            items = seen[(op.op_type, framework)]
            names = [item.split(":")[0] for item in items]
            # Every schema attribute, and the rest only those the table gives reasons for.
            assert set(schema_names) <= set(names), (op.op_type, framework)
            for extra in set(names) - set(schema_names):
                table = glue_header.GLUE_ONLY[(op.op_type, extra)]
                kind, required, default = seen[(op.op_type, extra)][:3]
                assert table.why and required == str(int(table.required)), extra
                assert table.required or float(default) == table.default, extra
                kinds[extra] = kind
            if framework == "paddle":
                assert items == [f"{n}: {PADDLE_TYPES[kinds[n]]}" for n in names]
