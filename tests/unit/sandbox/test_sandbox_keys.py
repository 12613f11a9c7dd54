"""Keys in the live view: read one by one from a terminal, terminal restored afterwards."""

from __future__ import annotations

import asyncio
import os
import termios

from eipctl.sandbox.keys import KeyReader
from polling import within


async def test_keys_arrive_and_the_terminal_is_restored() -> None:
    leader, follower = os.openpty()
    try:
        before = termios.tcgetattr(follower)
        seen: list[str] = []
        reader = KeyReader(follower, seen.append)
        assert reader.start() is True
        assert termios.tcgetattr(follower) != before  # cbreak: no line buffering, no echo
        os.write(leader, b"2q")
        async with within(5, "two keys read"):
            while len(seen) < 2:
                await asyncio.sleep(0.01)
        assert seen == ["2", "q"]
        reader.stop()
        reader.stop()  # idempotent
        assert termios.tcgetattr(follower) == before
    finally:
        os.close(leader)
        os.close(follower)


async def test_not_a_terminal_changes_nothing() -> None:
    read_end, write_end = os.pipe()
    try:
        reader = KeyReader(read_end, lambda _key: None)
        assert reader.start() is False
        assert not reader.active
        reader.stop()
        assert KeyReader(-1, lambda _key: None).start() is False
    finally:
        os.close(read_end)
        os.close(write_end)
