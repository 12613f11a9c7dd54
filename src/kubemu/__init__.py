"""A Kubernetes API emulator faithful where a controller depends on the server.

    srv = ApiServer(history_window=1000, bookmark_interval=5.0)
    await srv.start(host="127.0.0.1", port=0)
    srv.write_kubeconfig(path)

See docs/emulator.md for what is and is not implemented.
"""

from .errors import ApiError
from .faults import Faults
from .server import ApiServer
from .store import Store

__all__ = ["ApiError", "ApiServer", "Faults", "Store"]
