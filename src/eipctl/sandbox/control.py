"""The running sandbox's control endpoint: a unix socket, ``<state dir>/control.sock``.

`eipctl sandbox kill-node NAME`, `revive-node NAME` and `status` send one JSON line
(``{"action": "kill-node", "node": "node-2"}``) and read one JSON line back
(``{"ok": true, "message": "..."}``). A unix socket in a directory only its owner can enter
means no port to pick, no address file to trust, and no other local user can kill nodes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger(__name__)

SOCKET_NAME = "control.sock"
MAX_LINE = 64 * 1024

Request = dict[str, Any]
Reply = dict[str, Any]
Handler = Callable[[Request], Awaitable[Reply]]


class ControlError(Exception):
    """No sandbox answers on the endpoint (or it answered nonsense)."""


def socket_path(state_dir: str | Path) -> Path:
    return Path(state_dir) / SOCKET_NAME


def _connect_path(path: Path) -> str:
    """Unix socket paths are limited to ~107 bytes; a relative path often fits when the
    absolute one does not."""
    text = str(path)
    if len(text.encode()) < 100:
        return text
    relative = os.path.relpath(path)
    if len(relative.encode()) < 100:
        return relative
    raise ControlError(f"state dir path too long for a unix socket: {path}")


async def request(state_dir: str | Path, payload: Request, *, answer_within: float = 15.0) -> Reply:
    """Send one request to the sandbox running in `state_dir` and return its reply."""
    path = socket_path(state_dir)
    if not path.exists():
        raise ControlError(f"no sandbox is running with state dir {state_dir} ({path} is absent)")
    try:
        async with asyncio.timeout(answer_within):
            reader, writer = await asyncio.open_unix_connection(_connect_path(path))
            try:
                writer.write(json.dumps(payload).encode() + b"\n")
                await writer.drain()
                line = await reader.readline()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except TimeoutError:
        raise ControlError(
            f"the sandbox at {path} did not answer within {answer_within:g}s"
        ) from None
    except (ConnectionRefusedError, FileNotFoundError):
        raise ControlError(
            f"no sandbox is running with state dir {state_dir} (stale {path})"
        ) from None
    try:
        reply = json.loads(line)
    except ValueError:
        raise ControlError(f"the sandbox at {path} sent an unreadable reply") from None
    if not isinstance(reply, dict):
        raise ControlError(f"the sandbox at {path} sent an unreadable reply")
    return reply


async def is_live(state_dir: str | Path) -> bool:
    """Whether a sandbox answers on `state_dir`'s control socket."""
    try:
        await request(state_dir, {"action": "ping"}, answer_within=2.0)
    except ControlError:
        return False
    return True


class ControlServer:
    """Serves `handler` on the state dir's socket until `close`."""

    def __init__(self, state_dir: str | Path, handler: Handler) -> None:
        self.path = socket_path(state_dir)
        self._handler = handler
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        """Listen; a stale socket (no one answering) is replaced, a live one is an error."""
        if self.path.exists() or self.path.is_symlink():
            if await is_live(self.path.parent):
                raise ControlError(
                    f"a sandbox is already running with state dir {self.path.parent}"
                )
            self.path.unlink()
        self._server = await asyncio.start_unix_server(
            self._serve, _connect_path(self.path), limit=MAX_LINE
        )
        self.path.chmod(0o600)
        log.info("control.listening", path=str(self.path))

    async def close(self) -> None:
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(2.0):
                await server.wait_closed()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readline()
            reply = await self._answer(line)
            writer.write(json.dumps(reply).encode() + b"\n")
            await writer.drain()
        except (ConnectionError, ValueError, asyncio.LimitOverrunError) as exc:
            log.info("control.client.dropped", error=repr(exc))
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _answer(self, line: bytes) -> Reply:
        try:
            payload = json.loads(line)
        except ValueError:
            return {"ok": False, "message": "bad request: not JSON"}
        if not isinstance(payload, dict) or not isinstance(payload.get("action"), str):
            return {"ok": False, "message": "bad request: no action"}
        if payload["action"] == "ping":
            return {"ok": True, "message": "pong"}
        try:
            return await self._handler(payload)
        except Exception as exc:
            log.exception("control.request.failed", action=payload["action"])
            return {"ok": False, "message": f"{payload['action']} failed: {exc}"}
