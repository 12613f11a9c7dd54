"""net/liveness/sockets.py: a datagram's arrival on the loop's clock, from the kernel's stamp.

On a virtual clock (tests/virtual_clock.py) with the wall clock stubbed, so the conversion is
asserted exactly: a datagram that waited in the queue is as old as the kernel says, however
late the loop reads it. That the stamp is the kernel's, on a real socket, is
tests/unit/net/test_liveness_filter_kernel.py's (a probe queued while the loop was stuck).
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import Callable, Coroutine
from types import SimpleNamespace
from typing import Any

import pytest

from eipctl.net.liveness import sockets as sockets_module
from eipctl.net.liveness.sockets import SO_TIMESTAMPNS, DatagramSocket

WALL = 1_800_000_000.25
"""The wall clock when the datagram is read (CLOCK_REALTIME, like the kernel's stamp)."""
READ_AT = 500.0
"""The loop's clock when the datagram is read."""


def stamped(wall: float) -> list[tuple[int, int, bytes]]:
    """Ancillary data as recvmsg returns it: the kernel's arrival time, a struct timespec."""
    seconds = int(wall)
    return [
        (socket.SOL_SOCKET, SO_TIMESTAMPNS, struct.pack("qq", seconds, round((wall % 1) * 1e9)))
    ]


@pytest.mark.parametrize(
    ("ancillary", "age"),
    [
        pytest.param(stamped(WALL - 0.5), 0.5, id="queued half a second"),
        pytest.param(stamped(WALL), 0.0, id="read as it came"),
        pytest.param(stamped(WALL + 0.2), 0.0, id="stamp ahead of the wall clock: no age"),
        pytest.param(stamped(WALL - 7200), 3600.0, id="a wall clock step: at most an hour"),
        pytest.param([], 0.0, id="no stamp: the time it is read"),
        pytest.param(
            [(socket.SOL_SOCKET, SO_TIMESTAMPNS, b"\0" * 8)], 0.0, id="short stamp: ignored"
        ),
    ],
)
def test_a_datagram_is_as_old_as_its_kernel_stamp_says(
    ancillary: list[tuple[int, int, bytes]],
    age: float,
    monkeypatch: pytest.MonkeyPatch,
    run_virtual: Callable[[Coroutine[Any, Any, float]], float],
) -> None:
    monkeypatch.setattr(sockets_module, "time", SimpleNamespace(time=lambda: WALL))

    async def main() -> float:
        await asyncio.sleep(READ_AT)  # the virtual clock reads READ_AT
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        sock.bind(("127.0.0.1", 0))
        sock.setblocking(False)
        reader = DatagramSocket(sock, lambda data, addr: None, "test")
        try:
            return reader._arrival(ancillary)
        finally:
            reader.close()

    assert run_virtual(main()) == pytest.approx(READ_AT - age, abs=1e-6)
