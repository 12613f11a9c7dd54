"""core/fence.py: the edge of the fence that mutation testing found unpinned
(docs/testing.md, "Mutation")."""

from __future__ import annotations

import pytest

from eipctl.core.fence import Fence


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("timeout", [0.0, -1.0])
def test_a_fence_needs_a_positive_fence_timeout(timeout: float) -> None:
    with pytest.raises(ValueError, match=r"^fence_timeout must be positive$"):
        Fence(timeout, Clock())
