"""controller/node_key.py: the key file kept across restarts, and the Secret written until
it lands (created, or an earlier start's replaced), whatever the API answers meanwhile."""

from __future__ import annotations

import asyncio
import stat
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest

from eipctl.controller import node_key as node_key_module
from eipctl.controller.node_key import load_or_create, publish
from eipctl.core.node_keys import node_key_of
from eipctl.kube.errors import AlreadyExists, Forbidden, ServerError


def test_a_key_is_made_once_and_kept(tmp_path: Path) -> None:
    path = tmp_path / "var" / "lib" / "eipctl" / "liveness-node.key"
    key = load_or_create(str(path))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert load_or_create(str(path)) == key  # a restart: the same key


def test_a_file_without_a_key_is_moved_aside_and_replaced(tmp_path: Path) -> None:
    """Bad input on the node's disk: a clear error, a new key, the process goes on."""
    junk = tmp_path / "liveness-node.key"
    junk.write_text("not a key\n")
    key = load_or_create(str(junk))
    assert key is not None and load_or_create(str(junk)) == key
    assert (tmp_path / "liveness-node.key.unreadable").read_text() == "not a key\n"


def test_a_key_that_can_be_neither_read_nor_written_is_none(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    assert load_or_create(str(blocker / "liveness-node.key")) is None


class Api:
    """Answers each create as the script says, then succeeds; records what was written."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.created: list[dict[str, Any]] = []
        self.replaced: list[dict[str, Any]] = []

    async def create(self, ref: Any, obj: dict[str, Any], namespace: str | None = None) -> Any:
        if self.failures:
            raise self.failures.pop(0)
        self.created.append(obj)
        return obj

    async def replace(self, ref: Any, obj: dict[str, Any], *, status: bool = False) -> Any:
        self.replaced.append(obj)
        return obj


def test_the_secret_is_written_until_it_lands(
    run_virtual: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    """On a virtual clock: a 503 is retried after 1 s, a 403 (a permission missing: the
    operator's to fix) after a minute, and the write then lands."""
    api = Api(ServerError(503, "ServiceUnavailable", ""), Forbidden(403, "Forbidden", "no"))
    key = bytes(range(32))

    async def main() -> None:
        loop = asyncio.get_running_loop()
        await publish(api, "node-a", key, "eipctl-node-keys")  # type: ignore[arg-type]
        assert loop.time() == pytest.approx(1.0 + node_key_module.RETRY_MAX)

    run_virtual(main())
    assert [node_key_of(s) for s in api.created] == [("node-a", key)]
    assert api.replaced == []


def test_an_earlier_starts_secret_is_replaced(
    run_virtual: Callable[[Coroutine[Any, Any, None]], None],
) -> None:
    api = Api(AlreadyExists(409, "AlreadyExists", "there"))
    key = bytes(range(32))
    run_virtual(publish(api, "node-a", key, "eipctl-node-keys"))  # type: ignore[arg-type]
    assert api.created == []
    assert [node_key_of(s) for s in api.replaced] == [("node-a", key)]
