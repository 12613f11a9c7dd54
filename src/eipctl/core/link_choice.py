"""Which host link holds this node's claims: a pure choice among the candidates, no I/O.

Precedence, first that says anything wins:

1. the controller's ``--iface`` flag, unless ``auto`` (the default);
2. the Node's annotation `ANNOTATION_LINK` (one node that differs from the rest);
3. the link holding one of the Node's InternalIPs (in the Node's order; ``status.hostIP``
   after them), the link the cluster already reaches the node on;
4. the link of the default route, IPv4 first, then IPv6.

A link named by (1) or (2) is taken as it is, or not at all: a typo must not send external
IPs to another link, so a missing or down named link is a problem, never a fall-through.
Discovery (3, 4) only considers links that are up. The edge (`net.inventory`) gathers the
`HostLinks`; the controller waits, not ready, while the choice is a problem.
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

ANNOTATION_LINK: Final = "eipctl.io/link"
"""On a core v1 Node: the link its controller puts claims on (unless ``--iface`` names one)."""
AUTO: Final = "auto"
"""The ``--iface`` value that asks the controller to find the link itself."""


@dataclass(frozen=True, slots=True)
class LinkFacts:
    """One host link as the kernel shows it."""

    name: str
    up: bool
    addresses: frozenset[IPAddress] = frozenset()


@dataclass(frozen=True, slots=True)
class HostLinks:
    """The host's links and where its default routes go (IPv4 ones first, then IPv6)."""

    links: tuple[LinkFacts, ...] = ()
    default_route_links: tuple[str, ...] = ()

    def get(self, name: str) -> LinkFacts | None:
        return next((link for link in self.links if link.name == name), None)


class Source(enum.StrEnum):
    """Why a link was chosen (the ``reason`` of ``link.chosen``)."""

    FLAG = "flag"
    ANNOTATION = "annotation"
    INTERNAL_IP = "internal-ip"
    DEFAULT_ROUTE = "default-route"


class Problem(enum.StrEnum):
    """Why no link could be chosen; the value is the Event reason."""

    MISSING = "LinkMissing"
    DOWN = "LinkDown"
    NOT_FOUND = "NoLinkFound"


@dataclass(frozen=True, slots=True)
class LinkChoice:
    """The answer: `link` to use, or `problem` (then `link` is the named one, if any)."""

    link: str | None
    source: Source | None
    detail: str
    """What the source was, for people: ``--iface``, ``annotation eipctl.io/link``, ..."""
    problem: Problem | None = field(default=None)

    @property
    def ok(self) -> bool:
        return self.problem is None

    @property
    def message(self) -> str:
        """One line that names the link and why: for /readyz, the Event and the log."""
        if self.problem is Problem.MISSING:
            return f"link {self.link} ({self.detail}) does not exist"
        if self.problem is Problem.DOWN:
            return f"link {self.link} ({self.detail}) is down"
        if self.problem is Problem.NOT_FOUND:
            return f"no link found ({self.detail})"
        return f"link {self.link} ({self.detail})"


def is_auto(flag: str) -> bool:
    """``--iface auto`` (or empty): find the link."""
    return flag.strip() in ("", AUTO)


def _named(name: str, source: Source, detail: str, host: HostLinks) -> LinkChoice:
    facts = host.get(name)
    if facts is None:
        return LinkChoice(name, source, detail, Problem.MISSING)
    if not facts.up:
        return LinkChoice(name, source, detail, Problem.DOWN)
    return LinkChoice(name, source, detail)


def _unique(ips: Iterable[IPAddress]) -> list[IPAddress]:
    return list(dict.fromkeys(ips))


def choose_link(
    flag: str,
    annotation: str | None,
    node_ips: Sequence[IPAddress],
    host: HostLinks,
) -> LinkChoice:
    """The link for this node's claims, and why; or the problem that stops the choice.

    `node_ips`: the Node's InternalIPs, then the pod's ``status.hostIP``; duplicates are
    fine. Among several up links holding the same IP the first by name wins, so the answer
    does not depend on the order the kernel listed them in.
    """
    if not is_auto(flag):
        return _named(flag.strip(), Source.FLAG, "--iface", host)
    if annotation is not None and annotation.strip():
        return _named(annotation.strip(), Source.ANNOTATION, f"annotation {ANNOTATION_LINK}", host)
    up = sorted((link for link in host.links if link.up), key=lambda link: link.name)
    ips = _unique(node_ips)
    for ip in ips:
        for link in up:
            if ip in link.addresses:
                return LinkChoice(link.name, Source.INTERNAL_IP, f"holds InternalIP {ip}")
    up_names = {link.name for link in up}
    for name in host.default_route_links:
        if name in up_names:
            return LinkChoice(name, Source.DEFAULT_ROUTE, "default route")
    looked = " or ".join(str(ip) for ip in ips)
    detail = f"no up link holds {looked} and" if ips else "no InternalIP known and"
    return LinkChoice(None, None, f"{detail} no default route on an up link", Problem.NOT_FOUND)
