"""The MXNet op library's attribute parsing (csrc/mxnet_ops.cc) against the op schemas: every
attribute the glue shares with a schema has the schema's name, default and choices. The glue
is compiled against MXNet's lib_api.h at first use, so it cannot import the schemas; this test
is what keeps the two from drifting. Needs no MXNet: it reads the source."""

import re
from pathlib import Path

import pytest

from fusebridge import ops

GLUE = Path(ops.__file__).parents[1] / "integrations" / "mxnet" / "csrc" / "mxnet_ops.cc"
# Attributes of the MXNet ops that no schema has, each with the reason.
MXNET_ONLY = {
    "fusebridge_dropout": {"seed", "offset"},  # inputs of the op, attributes in MXNet's
    "fusebridge_fusion_gru": {"has_h0"},  # MXNet's input count comes from attributes
}
# Where the MXNet op allows fewer values than the schema, and why.
NARROWER = {("fusebridge_fusion_gru", "layout"): ("tnc", ("tnc", "ntc"))}  # MXNet has no LoD


def parse_function(source: str, name: str) -> str:
    start = source.index(f"{name}(const Attrs& attrs)")
    return source[start : source.index("\n}\n", start)]


def glue_attributes(body: str) -> dict[str, tuple[object, tuple]]:
    """name -> (default, choices) from the parse_* calls of one params function."""
    lists = {
        m[1]: tuple(re.findall(r'"(\w+)"', m[2]))
        for m in re.finditer(r"initializer_list<const char\*> (\w+) = \{([^}]*)\}", body)
    }
    found = {}
    for m in re.finditer(r'parse_choice\(attrs, "(\w+)", "(\w+)",\s*(\{[^}]*\}|\w+)\)', body):
        choices = lists.get(m[3]) or tuple(re.findall(r'"(\w+)"', m[3]))
        found[m[1]] = (m[2], choices)
    for m in re.finditer(r'parse_bool\(attrs, "(\w+)", (true|false)\)', body):
        found[m[1]] = (int(m[2] == "true"), (0, 1))
    for m in re.finditer(r'parse_p\(attrs, "(\w+)", ([\d.]+)f\)', body):
        found[m[1]] = (float(m[2]), ())
    for m in re.finditer(r'parse_int_tuple\(attrs, "(\w+)"\)', body):
        found[m[1]] = ((), ())
    known = re.search(r"check_known\(attrs, \{([^}]*)\}\)", body)
    assert known, "the glue must refuse unknown attributes (check_known)"
    assert set(re.findall(r'"(\w+)"', known[1])) >= set(found)
    return found


@pytest.mark.parametrize(
    ("mxnet_op", "function", "op_type"),
    [
        ("fusebridge_dropout", "dropout_params", "Dropout"),
        ("fusebridge_fusion_gru", "gru_params", "FusionGRU"),
    ],
)
def test_glue_attributes_are_the_schemas(mxnet_op, function, op_type):
    glue = glue_attributes(parse_function(GLUE.read_text(), function))
    schema = {a.name: a for a in ops.schema(op_type).attributes}
    assert set(glue) - set(schema) <= MXNET_ONLY[mxnet_op], "an attribute in no schema"
    assert set(schema) <= set(glue), "a schema attribute the glue does not parse"
    for name, (default, choices) in glue.items():
        if name in MXNET_ONLY[mxnet_op]:
            continue
        want_default, want_choices = schema[name].default, schema[name].choices
        if (mxnet_op, name) in NARROWER:
            want_default, narrower = NARROWER[(mxnet_op, name)]
            assert set(narrower) <= set(want_choices)
            want_choices = narrower
        assert default == want_default, f"{mxnet_op}.{name} default {default!r}"
        assert tuple(choices) == tuple(want_choices) or not want_choices, (
            f"{mxnet_op}.{name} choices {choices}, the schema's {want_choices}"
        )


def test_the_check_reads_a_drifted_default():
    body = 'check_known(attrs, {"mode"}); parse_choice(attrs, "mode", "downgrade_in_infer", {"a"})'
    assert glue_attributes(body) == {"mode": ("downgrade_in_infer", ("a",))}
