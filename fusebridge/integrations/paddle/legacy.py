"""Importing paddle and entering its static mode on the IR a saved program needs: legacy
(ProgramDesc, .pdmodel) or PIR (model.json). For the modules that run Paddle itself (model
builders, Paddle's runtimes as peers and oracles); the readers never import paddle."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


def import_paddle(pir: bool = False) -> Any:
    """paddle, imported with FLAGS_enable_pir_api set to `pir` when this is its first import
    (the flag is read only then; later, static_mode's guard switches the IR for its
    duration)."""
    if "paddle" not in sys.modules:
        os.environ["FLAGS_enable_pir_api"] = "1" if pir else "0"
    import paddle

    return paddle


@contextlib.contextmanager
def static_mode(paddle: Any, pir: bool) -> Iterator[None]:
    """Static mode on the legacy IR or PIR; the caller's mode (dygraph or static) comes back
    after."""
    was_dynamic = paddle.in_dynamic_mode()
    guard = paddle.pir_utils.IrGuard if pir else paddle.pir_utils.OldIrGuard
    with guard():
        paddle.enable_static()
        try:
            yield
        finally:
            if was_dynamic:
                paddle.disable_static()


def legacy_static(paddle: Any) -> contextlib.AbstractContextManager[None]:
    """Static mode on the legacy IR."""
    return static_mode(paddle, pir=False)
