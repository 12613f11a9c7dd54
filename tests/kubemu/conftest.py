"""Fixtures for the emulator tests: the emulator with the Widget CRD registered."""

from __future__ import annotations

import copy

import pytest_asyncio
from widget_crd import WIDGET_CRD

from kubemu import ApiServer


@pytest_asyncio.fixture
async def widgets(apiserver: ApiServer) -> ApiServer:
    """The emulator with the Widget CRD registered."""
    apiserver.store.create(
        "apiextensions.k8s.io", "customresourcedefinitions", copy.deepcopy(WIDGET_CRD)
    )
    return apiserver
