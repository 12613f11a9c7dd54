"""The multi-node end-to-end test bed (issue 8); docs/testbed.md describes it.

`LocalBed` runs everything on this machine in network namespaces; `RemoteCluster` points the
same user-level checks at a real cluster.
"""

from .bed import BedOptions, LocalBed, install_signal_handlers
from .client import ArpWatch, Client, ProbeSeries
from .emulator import AdminError, Emulator
from .pools import LEASE_NAMESPACE, POOL_TINY, POOL_V4, POOL_V6, TINY_LABEL, V6_LABEL
from .processes import Process, wait_for
from .remote import RemoteCluster

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
    "LocalBed",
    "ProbeSeries",
    "Process",
    "RemoteCluster",
    "install_signal_handlers",
    "wait_for",
]
