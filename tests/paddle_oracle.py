"""What the tests that run Paddle as the oracle share: paddle (or a skip when it is absent) and
the legacy static mode (fusebridge.integrations.paddle.legacy)."""

import pytest

from fusebridge.integrations.paddle.legacy import import_paddle, legacy_static


def paddle_or_skip():
    pytest.importorskip("paddle")
    return import_paddle()


__all__ = ["legacy_static", "paddle_or_skip"]
