"""Fixtures: an emulator with the CRDs and a long watch history, and simulated nodes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from scheduler_harness import CRDS, SimNodes

from kubemu import ApiServer


@pytest_asyncio.fixture
async def srv() -> AsyncIterator[ApiServer]:
    server = ApiServer(history_window=50_000, bookmark_interval=0.5)
    await server.start(host="127.0.0.1", port=0)
    await server.load_crds_from_dir(CRDS)
    try:
        yield server
    finally:
        await server.stop()


@pytest_asyncio.fixture
async def kubeconfig(srv: ApiServer, tmp_path: Path) -> Path:
    return srv.write_kubeconfig(tmp_path / "kubeconfig")


@pytest_asyncio.fixture
async def nodes(srv: ApiServer) -> AsyncIterator[SimNodes]:
    sim = SimNodes(srv)
    try:
        yield sim
    finally:
        await sim.stop()
