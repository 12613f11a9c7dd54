"""Fixtures of the integration stories: eipctl's processes against the API emulator.

No root, no network namespaces: the emulator runs in the test's loop (`apiserver` in
tests/conftest.py) and so do the processes under test (one restart story also runs
`python -m eipctl allocator` as its own child, to SIGKILL it).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from eipctl.kube.client import KubeApi, connect
from kubemu import ApiServer

CRDS = Path(__file__).resolve().parents[2] / "deploy" / "crds"


@pytest_asyncio.fixture(name="api")
async def api_fixture(apiserver: ApiServer, kubeconfig_path: Path) -> AsyncIterator[KubeApi]:
    """A client on the emulator with the eipctl CRDs loaded; closed afterwards."""
    await apiserver.load_crds_from_dir(CRDS)
    api = await connect(str(kubeconfig_path))
    try:
        yield api
    finally:
        await api.close()
