"""One unit of a program's execution."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class Step:
    """One unit of execution: run(args) -> outputs, args read from env by name, except the
    initializers a step takes, which are bound once here (`constants`, aligned with inputs).
    `where` starts the message of an error the step raises: its node(s) and the feeds it reads.
    `session`: the ONNX Runtime session of an ONNX partition (None for other steps).
    `places`: in a program on a device, where the step reads each input, aligned with inputs:
    "device", "host", or None (as it is); None for the whole step in a program on the host."""

    __slots__ = (
        "constants",
        "inputs",
        "kind",
        "label",
        "outputs",
        "places",
        "run",
        "session",
        "where",
    )

    def __init__(
        self,
        kind: str,
        label: str,
        inputs: list[str],
        outputs: list[str],
        run: Callable,
        constants: list[np.ndarray | None] | None = None,
    ) -> None:
        self.kind, self.label, self.inputs, self.outputs, self.run = (
            kind,
            label,
            inputs,
            outputs,
            run,
        )
        self.constants = constants or [None] * len(inputs)
        self.where = f"Session: {label}"
        self.session = None
        self.places: list[str | None] | None = None

    def args(self, env: dict[str, np.ndarray]) -> list[np.ndarray | None]:
        return [env.get(n) if c is None else c for n, c in zip(self.inputs, self.constants)]
