"""The process's file-descriptor limit, raised for as many simulated nodes as it will run
(the sandbox's own process and its worker processes both call it)."""

from __future__ import annotations

import resource

import structlog

log = structlog.get_logger(__name__)

FILES_BASE = 1024
FILES_PER_NODE = 8  # a simulated node's API connections (both ends), its watch, its UDP socket


def raise_file_limit(nodes: int) -> None:
    """Enough file descriptors for `nodes` simulated nodes in this process: the soft limit
    is raised towards the hard one (a thousand nodes need ~9,000; many shells give 1,024)."""
    want = FILES_BASE + FILES_PER_NODE * nodes
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    if new > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    if new < want:
        log.warning("sandbox.file_limit.low", limit=new, wanted=want, nodes=nodes)
