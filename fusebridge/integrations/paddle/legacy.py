"""Importing paddle for legacy (non-PIR) static programs, the only kind this package reads:
for the modules that run Paddle itself (model builders, Paddle's runtimes as peers/oracles)."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any


def import_paddle() -> Any:
    """paddle, imported with FLAGS_enable_pir_api=0 when this is its first import (the flag is
    read only then; later, legacy_static's OldIrGuard switches the IR for its duration)."""
    if "paddle" not in sys.modules:
        os.environ["FLAGS_enable_pir_api"] = "0"
    import paddle

    return paddle


@contextlib.contextmanager
def legacy_static(paddle: Any) -> Iterator[None]:
    """Static mode on the legacy IR; the caller's mode (dygraph or static) comes back after."""
    was_dynamic = paddle.in_dynamic_mode()
    with paddle.pir_utils.OldIrGuard():
        paddle.enable_static()
        try:
            yield
        finally:
            if was_dynamic:
                paddle.disable_static()
