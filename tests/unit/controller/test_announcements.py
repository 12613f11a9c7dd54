"""controller/announcements.py: a late round after a thaw is not sent when the writing
leader's digest says the node holds something else (soak seed 1202)."""

from __future__ import annotations

import asyncio
import ipaddress
from collections.abc import Callable

from eipctl.controller.announcements import Announcements

IP = ipaddress.ip_address("203.0.113.21")


class Rounds:
    """An announcer of three rounds that asks ``still_ours`` before each, as net.announce."""

    def __init__(self, between: Callable[[int], None] = lambda n: None) -> None:
        self.sent: list[int] = []
        self.between = between

    async def __call__(
        self,
        link: str,
        ip: object,
        *,
        still_ours: Callable[[], bool],
        on_round: Callable[[], None],
    ) -> None:
        for n in range(3):
            self.between(n)
            if not still_ours():
                return
            self.sent.append(n)
            on_round()
            await asyncio.sleep(0)


async def run(announcer: Rounds, agrees: Callable[[], bool] | None) -> list[str]:
    bound: list[str] = []
    announcements = Announcements(announcer, lambda: True, agrees)  # type: ignore[arg-type]
    announcements.start("eth0", IP, "203-0-113-21", on_first=lambda: bound.append("bound"))
    await asyncio.sleep(0.05)
    await announcements.close()
    return bound


async def test_every_round_goes_out_while_the_leader_agrees() -> None:
    announcer = Rounds()
    assert await run(announcer, lambda: True) == ["bound"]
    assert announcer.sent == [0, 1, 2]


async def test_later_rounds_are_held_once_the_leaders_digest_differs() -> None:
    agrees = [True]
    announcer = Rounds(between=lambda n: agrees.__setitem__(0, n < 1))  # moved after round 1
    assert await run(announcer, lambda: agrees[0]) == ["bound"]
    assert announcer.sent == [0]


async def test_the_first_round_is_never_held_by_the_digest() -> None:
    """A claim just placed here may be ahead of the digest in flight; Bound waits for it."""
    announcer = Rounds()
    assert await run(announcer, lambda: False) == ["bound"]
    assert announcer.sent == [0]


async def test_without_a_digest_source_the_fence_alone_decides() -> None:
    announcer = Rounds()
    assert await run(announcer, None) == ["bound"]
    assert announcer.sent == [0, 1, 2]
