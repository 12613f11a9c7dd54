"""The process-wide Prometheus registry.

Each subsystem defines its own metric objects next to the code that updates them
(e.g. `kube/metrics.py`), all registered on `REGISTRY`, so tests can read values back
and the /metrics endpoint serves one registry. Every name starts with `eipctl_`.
"""

from prometheus_client import CollectorRegistry

REGISTRY = CollectorRegistry(auto_describe=True)
