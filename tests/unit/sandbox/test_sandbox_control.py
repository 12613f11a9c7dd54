"""The control socket: requests reach the handler, errors come back as words, one owner."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from eipctl.sandbox.control import ControlError, ControlServer, is_live, request, socket_path


async def echo(req: dict[str, Any]) -> dict[str, Any]:
    if req["action"] == "boom":
        raise RuntimeError("handler exploded")
    return {"ok": True, "message": f"did {req['action']} {req.get('node')}"}


async def test_request_reaches_handler_and_reply_comes_back(tmp_path: Path) -> None:
    server = ControlServer(tmp_path, echo)
    await server.start()
    try:
        assert stat.S_IMODE(os.stat(socket_path(tmp_path)).st_mode) == 0o600
        reply = await request(tmp_path, {"action": "kill-node", "node": "node-2"})
        assert reply == {"ok": True, "message": "did kill-node node-2"}
        assert await is_live(tmp_path)
    finally:
        await server.close()
    assert not socket_path(tmp_path).exists()
    assert not await is_live(tmp_path)


async def test_handler_failure_is_a_reply_not_a_hang(tmp_path: Path) -> None:
    server = ControlServer(tmp_path, echo)
    await server.start()
    try:
        reply = await request(tmp_path, {"action": "boom"})
        assert reply["ok"] is False
        assert "handler exploded" in reply["message"]
    finally:
        await server.close()


async def test_bad_requests_are_refused(tmp_path: Path) -> None:
    server = ControlServer(tmp_path, echo)
    await server.start()
    try:
        reader, writer = await asyncio.open_unix_connection(str(socket_path(tmp_path)))
        writer.write(b"not json\n")
        await writer.drain()
        assert b'"ok": false' in await reader.readline()
        writer.close()
        await writer.wait_closed()
        reply = await request(tmp_path, {"node": "x"})
        assert reply == {"ok": False, "message": "bad request: no action"}
    finally:
        await server.close()


async def test_no_sandbox_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ControlError, match="no sandbox is running"):
        await request(tmp_path, {"action": "status"})


async def test_stale_socket_is_replaced_live_one_refused(tmp_path: Path) -> None:
    import socket

    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(socket_path(tmp_path)))
    stale.close()  # the file stays, nobody listens: a sandbox that was SIGKILLed
    with pytest.raises(ControlError, match="stale"):
        await request(tmp_path, {"action": "status"})
    first = ControlServer(tmp_path, echo)
    await first.start()
    try:
        second = ControlServer(tmp_path, echo)
        with pytest.raises(ControlError, match="already running"):
            await second.start()
        assert (await request(tmp_path, {"action": "status"}))["ok"] is True
    finally:
        await first.close()
