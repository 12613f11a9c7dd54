"""eipctl: external IPs for Kubernetes Services on bare metal."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("eipctl")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0+src"
