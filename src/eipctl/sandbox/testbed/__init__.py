"""The multi-node end-to-end test bed of tests/e2e, the benchmarks and the soak; docs/testbed.md.

`LocalBed` runs everything on this machine in network namespaces; `RemoteCluster` points the
same user-level checks at a real cluster. Its namespaces and API relays are the sandbox's
(`eipctl.sandbox.namespaces`, `eipctl.sandbox.relay`).
"""

from eipctl.sandbox.testbed.bed import LocalBed
from eipctl.sandbox.testbed.client import ArpWatch, Client, ProbeSeries
from eipctl.sandbox.testbed.emulator import AdminError, Emulator
from eipctl.sandbox.testbed.frr import FrrNode
from eipctl.sandbox.testbed.pools import (
    LEASE_NAMESPACE,
    POOL_TINY,
    POOL_V4,
    POOL_V6,
    TINY_LABEL,
    V6_LABEL,
)
from eipctl.sandbox.testbed.processes import Process, install_signal_handlers, wait_for
from eipctl.sandbox.testbed.remote import RemoteCluster
from eipctl.sandbox.testbed.router import FarClient, Router
from eipctl.sandbox.testbed.routing import routing_unavailable
from eipctl.sandbox.testbed.state import BedOptions

__all__ = [
    "LEASE_NAMESPACE",
    "POOL_TINY",
    "POOL_V4",
    "POOL_V6",
    "TINY_LABEL",
    "V6_LABEL",
    "AdminError",
    "ArpWatch",
    "BedOptions",
    "Client",
    "Emulator",
    "FarClient",
    "FrrNode",
    "LocalBed",
    "ProbeSeries",
    "Process",
    "RemoteCluster",
    "Router",
    "install_signal_handlers",
    "routing_unavailable",
    "wait_for",
]
