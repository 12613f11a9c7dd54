"""Shared fixtures: an in-process Kubernetes API emulator and clients for it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from eipctl.sandbox.apiserver import ApiServer


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
