"""What every frontend's converters share: one registry class for their tables (op type ->
converter, filled by the `@REGISTRY.register("op_a", "op_b")` decorator), and one way errors
name a node.

The tables: Paddle's converters (paddle/converters/) and save mappers (paddle/save.py), MXNet's
converters (mxnet/converters/) and save emitters (mxnet/emitters/). A table refuses a second
converter for an op type when the modules register, so each op type has exactly one.

Errors name a node `<framework> <op type> node <name>`: `MXNet RNN node 'rnn'`, `ONNX GRU node
'the_gru'`, `ONNX fusebridge.FusionGRU node 'gru'` (an op of another domain, qualified), and
an op without a name by its place: `Paddle scale node #1` (node_label, ir_node_label: the
IR's own graph.checks.describe with the framework in front)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import onnx_ir as ir

from fusebridge.errors import UnsupportedOpError
from fusebridge.graph.checks import describe

F = TypeVar("F", bound=Callable[..., Any])


def node_label(framework: str, op_type: str, name: str | int | None) -> str:
    """How an error names a node: `<framework> <op_type> node 'name'`, or `... node #k` for an
    op the file gives no name (k: its place in the program)."""
    shown = f"#{name}" if isinstance(name, int) else repr(name)
    return f"{framework} {op_type} node {shown}"


def ir_node_label(node: ir.Node) -> str:
    """node_label of a node of an ONNX (IR) graph: `ONNX GRU node 'the_gru'` (the IR's own
    naming, graph.checks.describe, with the framework in front)."""
    return f"ONNX {describe(node)}"


class ConverterRegistry:
    """One frontend's table: op type -> the function that converts (or writes) it, and the
    options each registration gives (declared with their defaults when the table is made:
    Paddle's `lod`). `name` says what the table holds, for messages: "Paddle converter",
    "MXNet form", ..."""

    def __init__(self, name: str, **defaults: object) -> None:
        self.name = name
        self._defaults = defaults
        self._entries: dict[str, tuple[Callable[..., Any], dict[str, object]]] = {}

    def register(self, *op_types: str, **options: object) -> Callable[[F], F]:
        """The decorator that makes `fn` the converter of `op_types`; an op type registered
        already, or an option the table does not declare, raises (a bug in the converters)."""
        unknown = set(options) - set(self._defaults)
        if unknown or not op_types:
            raise TypeError(
                f"{self.name}s: register({', '.join(map(repr, op_types))}) takes one op type "
                f"or more and the options {sorted(self._defaults)}, got {sorted(unknown)}"
            )

        def decorate(fn: F) -> F:
            for op_type in op_types:
                if op_type in self._entries:
                    taken = self._entries[op_type][0]
                    raise ValueError(
                        f"op type {op_type!r} has a {self.name} already "
                        f"({taken.__module__}.{taken.__qualname__}), so cannot take "
                        f"{fn.__module__}.{fn.__qualname__}"
                    )
                self._entries[op_type] = (fn, {**self._defaults, **options})
            return fn

        return decorate

    def __contains__(self, op_type: object) -> bool:
        return op_type in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def option(self, op_type: str, name: str) -> object:
        """The option `name` op_type was registered with."""
        return self._entries[op_type][1][name]

    def supported(self) -> str:
        return ", ".join(sorted(self._entries))

    def lookup(self, op_type: str, where: str) -> Callable[..., Any]:
        """op_type's converter; UnsupportedOpError starting with `where` (which names the
        node, node_label) when there is none."""
        entry = self._entries.get(op_type)
        if entry is None:
            raise UnsupportedOpError(
                f"{where}: no {self.name} for op type {op_type!r} (supported: {self.supported()})"
            )
        return entry[0]

    def refuse_unsupported(self, where: str, found: dict[str, str]) -> None:
        """Raises UnsupportedOpError listing at once every op type of `found` (op type -> what
        identifies its first node) that has no converter; `where` names the model."""
        missing = {t: about for t, about in found.items() if t not in self._entries}
        if missing:
            listed = "; ".join(f"{t} ({about})" for t, about in missing.items())
            raise UnsupportedOpError(
                f"{where}: {len(missing)} unsupported op type(s): {listed}. "
                f"Supported: {self.supported()}. "
                "See docs/ops-coverage.md for the ops each frontend converts."
            )
