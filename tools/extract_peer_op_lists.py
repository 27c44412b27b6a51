"""The op lists of fusebridge's two conversion peers, extracted once from their PyPI wheels and
committed under docs/data/ (tools/ops_coverage.py reads them; neither peer is needed after).
Run from the repository root:

    pip download paddle2onnx==2.1.0 --no-deps -d /tmp/p2o
    pip download mxnet==1.9.1 --no-deps -d /tmp/mx
    python -m tools.extract_peer_op_lists /tmp/p2o/paddle2onnx-2.1.0-*.whl \\
        /tmp/mx/mxnet-1.9.1-*.whl [OUT_DIR]   (default docs/data)

The committed lists were read from paddle2onnx-2.1.0-cp311-cp311-manylinux_2_24_x86_64.
manylinux_2_28_x86_64.whl and mxnet-1.9.1-py3-none-manylinux2014_x86_64.whl. Neither wheel is
installed or imported (paddle2onnx imports paddle first; mxnet needs numpy < 1.24): both are
read as zip files.

paddle2onnx 2.1.0: PyPI has no sdist for 2.x (`pip download --no-binary :all:` finds 0.3 to
0.9.2 only), and its mappers are C++, compiled into paddle2onnx_cpp2py_export*.so. In its
paddle2onnx/mapper/register_mapper.h, `REGISTER_MAPPER(op, Class)` defines a class
`op##Generator` whose `Create(const PaddleParser&, ...)` makes the mapper and registers it under
`#op`; `REGISTER_PIR_MAPPER(op, Class)` likewise `op##PirGenerator`, `Create(const
PaddlePirParser&, ...)`, in the PIR table. The .so is not stripped, so its symbol table holds
every Create's mangled name, `_ZN11paddle2onnx<len><op>Generator6CreateERKNS_12PaddleParserE...`
or `..<len><op>PirGenerator6CreateERKNS_15PaddlePirParserE...`: this script finds them in the
file's bytes (what `strings` and a grep would; the length prefix delimits the identifier, the
parser type tells the two tables apart) and keeps the op, the class name less its suffix. As a
check, each table's count must equal that of the instances the macros define (`<op>inst`,
`<op>Pirinst`). The result: legacy (ProgramDesc) mapper names in paddle2onnx_2.1.0_ops.txt, PIR
mapper names (as paddle2onnx names them, mostly legacy names: `elementwise_add`) in
paddle2onnx_2.1.0_pir_ops.txt; the two lists differ.

MXNet 1.9.1: the ONNX exporter's translations are Python, registered by
`@mx_op.register("op")` (or `("op", OPSET_VERSION)`) in mxnet/onnx/mx2onnx/_op_translations/
*.py; a regex reads the names, and the union over the opset files is kept (the exporter falls
back from the requested opset to 12 for an op a newer file does not register). It includes
`null`, MXNet's variable node. Written to mxnet_1.9.1_onnx_export_ops.txt.
"""

from __future__ import annotations

import argparse
import re
import zipfile
from pathlib import Path

DEFAULT_OUT = Path(__file__).parents[1] / "docs" / "data"
P2O_LIB = re.compile(r"paddle2onnx/paddle2onnx_cpp2py_export\..*\.so$")
MX_TRANSLATIONS = re.compile(r"mxnet/onnx/mx2onnx/_op_translations/[^/]+\.py$")
MX_REGISTER = re.compile(r"""@mx_op\.register\(\s*["']([^"']+)["']""")

# Mangled-name pieces of the macros' symbols (Itanium C++ ABI, namespace paddle2onnx).
NAMESPACE = rb"_ZN11paddle2onnx(\d+)"
LEGACY_CREATE = (b"6CreateERKNS_12PaddleParserE", "Generator")
PIR_CREATE = (b"6CreateERKNS_15PaddlePirParserE", "PirGenerator")


def _identifiers(library: bytes) -> list[tuple[str, bytes]]:
    """Every `paddle2onnx::<identifier>` symbol in the library: (identifier, what follows it)."""
    found = []
    for match in re.finditer(NAMESPACE, library):
        start, end = match.end(), match.end() + int(match.group(1))
        ident = library[start:end].decode("ascii", errors="replace")
        found.append((ident, library[end : end + 40]))
    return found


def paddle2onnx_ops(wheel: Path) -> tuple[list[str], list[str]]:
    """paddle2onnx's (legacy, PIR) mapper names, read from the wheel's compiled library."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if P2O_LIB.search(n)]
        library = archive.read(name)
    symbols = _identifiers(library)
    tables = []
    for create, suffix in (LEGACY_CREATE, PIR_CREATE):
        ops = {
            ident.removesuffix(suffix)
            for ident, rest in symbols
            if rest.startswith(create) and ident.endswith(suffix)
        }
        tables.append(sorted(ops))
    # Each registration also defines a global `<op>inst` (legacy) or `<op>Pirinst` (PIR): the
    # same sets say no Create was missed or taken from some other class.
    legacy, pir = tables
    instances = {
        ident for ident, rest in symbols if rest.startswith(b"E") and ident.endswith("inst")
    }
    expected = {f"{op}inst" for op in legacy} | {f"{op}Pirinst" for op in pir}
    if instances != expected:
        raise SystemExit(f"mapper instances differ from the Create methods: {instances ^ expected}")
    return legacy, pir


def mxnet_export_ops(wheel: Path) -> list[str]:
    """The op names MXNet's ONNX exporter registers, read from the wheel's translation files."""
    ops: set[str] = set()
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if MX_TRANSLATIONS.search(name):
                ops |= set(MX_REGISTER.findall(archive.read(name).decode("utf-8")))
    return sorted(ops)


def write_list(path: Path, header: str, ops: list[str]) -> None:
    path.write_text(f"# {header}\n" + "".join(f"{op}\n" for op in ops))
    print(f"{path}: {len(ops)} ops")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paddle2onnx_wheel", type=Path)
    parser.add_argument("mxnet_wheel", type=Path)
    parser.add_argument("out_dir", type=Path, nargs="?", default=DEFAULT_OUT)
    args = parser.parse_args()
    legacy, pir = paddle2onnx_ops(args.paddle2onnx_wheel)
    wheel = args.paddle2onnx_wheel.name
    out = args.out_dir

    def how(symbol: str) -> str:
        return (
            f"the op of each `paddle2onnx::<op>{symbol}` symbol in the symbol table of "
            f"`paddle2onnx_cpp2py_export*.so` in {wheel} (read, not imported), by "
            "tools/extract_peer_op_lists.py"
        )

    write_list(
        out / "paddle2onnx_2.1.0_ops.txt",
        "paddle2onnx 2.1.0 legacy mappers, `REGISTER_MAPPER(op, ...)`: "
        + how("Generator::Create(PaddleParser const&, ...)"),
        legacy,
    )
    write_list(
        out / "paddle2onnx_2.1.0_pir_ops.txt",
        "paddle2onnx 2.1.0 PIR mappers, `REGISTER_PIR_MAPPER(op, ...)`: "
        + how("PirGenerator::Create(PaddlePirParser const&, ...)"),
        pir,
    )
    write_list(
        out / "mxnet_1.9.1_onnx_export_ops.txt",
        "MXNet 1.9.1 ONNX exporter, `@mx_op.register(op)`: the ops a regex finds in "
        f"`mxnet/onnx/mx2onnx/_op_translations/*.py` of {args.mxnet_wheel.name} (read, not "
        "imported; all opsets), by tools/extract_peer_op_lists.py",
        mxnet_export_ops(args.mxnet_wheel),
    )


if __name__ == "__main__":
    main()
