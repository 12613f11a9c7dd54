"""Shared fixtures: an in-process Kubernetes API emulator and clients for it, and a virtual
clock for tests that assert how long things take."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import structlog

from kubemu import ApiServer
from virtual_clock import run_virtual as _run_virtual  # tests/virtual_clock.py


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """Logging configured by a test (a CLI's main configures it for the process, at warning)
    is undone after it, so a later test that captures info lines still sees them."""
    saved = structlog.get_config()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        yield
    finally:
        structlog.configure(**saved)
        root.handlers[:] = handlers
        root.setLevel(level)


@pytest_asyncio.fixture
async def apiserver() -> AsyncIterator[ApiServer]:
    """A started emulator (small history window, fast bookmarks), stopped afterwards."""
    srv = ApiServer(history_window=200, bookmark_interval=0.5)
    await srv.start(host="127.0.0.1", port=0)
    try:
        yield srv
    finally:
        await srv.stop()


@pytest_asyncio.fixture
async def kubeconfig_path(apiserver: ApiServer, tmp_path: Path) -> Path:
    """A kubeconfig file for the emulator."""
    return apiserver.write_kubeconfig(tmp_path / "kubeconfig")


@pytest_asyncio.fixture
async def api_client(kubeconfig_path: Path) -> AsyncIterator[Any]:
    """A kubernetes_asyncio ApiClient on the emulator, closed afterwards."""
    from kubernetes_asyncio import config

    client = await config.new_client_from_config(config_file=str(kubeconfig_path))
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
def run_virtual() -> Callable[[Coroutine[Any, Any, Any]], Any]:
    """Runs a coroutine to completion on a virtual clock (tests/virtual_clock.py): a sync
    test calls ``run_virtual(main())`` and may assert exact durations."""
    return _run_virtual
