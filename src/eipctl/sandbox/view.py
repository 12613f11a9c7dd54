"""The sandbox's live table: Services, their IPs, where each IP is placed and held.

`rows_from` turns API objects into rows (pure), `render` turns rows into lines (pure), and
`LiveView` puts them on the terminal: on a TTY the table is redrawn in place with plain ANSI
(cursor up, clear to end of screen); otherwise one line is written per change, so a log or a
CI transcript reads like a story. This is UI output, not logging: it goes to stdout.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, TextIO

from eipctl.core.naming import ANNOTATION_EXTERNAL_IP, claim_name_for, natural_key

Obj = Mapping[str, Any]

HEADERS = ("SERVICE", "IP", "NODE", "PHASE", "ON LINK")
NO_IP = "-"
NODES_NAMED = 12
"""Up to this many nodes, each is named on the nodes line; more are counted, and only the
ones holding addresses or not up are named (the sandbox runs up to 1,000)."""


@dataclass(frozen=True)
class Row:
    service: str  # namespace/name
    ip: str  # NO_IP until the allocator gives one
    node: str  # the claim's spec.nodeName ("" while unplaced)
    phase: str  # the claim's status.phase, or why there is none
    on_link: str  # the simulated node whose link carries the IP right now ("" none)

    @property
    def key(self) -> tuple[str, str]:
        return (self.service, self.ip)

    def cells(self) -> tuple[str, str, str, str, str]:
        return (self.service, self.ip, self.node or "-", self.phase, self.on_link or "-")


@dataclass(frozen=True)
class NodeLine:
    name: str
    state: str  # "up" / "killed"
    addresses: int


@dataclass(frozen=True)
class Snapshot:
    elapsed: float
    rows: tuple[Row, ...]
    nodes: tuple[NodeLine, ...]
    notes: tuple[str, ...] = ()  # e.g. a child process that keeps exiting

    @property
    def with_ip(self) -> int:
        return len({r.service for r in self.rows if r.ip != NO_IP})

    @property
    def services(self) -> int:
        return len({r.service for r in self.rows})

    @property
    def bound(self) -> int:
        return sum(1 for r in self.rows if r.phase == "Bound")


def _service_ips(svc: Obj) -> list[str]:
    """spec.externalIPs, then status.loadBalancer.ingress (a LoadBalancer's IPs are there)."""
    ips = [str(ip) for ip in (svc.get("spec") or {}).get("externalIPs") or []]
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    ips += [str(e["ip"]) for e in ingress if isinstance(e, dict) and e.get("ip")]
    return list(dict.fromkeys(ips))


def _wants_ip(svc: Obj) -> bool:
    annotations = (svc.get("metadata") or {}).get("annotations") or {}
    return ANNOTATION_EXTERNAL_IP in annotations or bool(_service_ips(svc))


def _claim_name(ip: str) -> str | None:
    try:
        return claim_name_for(ip)
    except ValueError:
        return None


def rows_from(
    services: Iterable[Obj], claims: Iterable[Obj], holder_of: Callable[[str], str | None]
) -> tuple[Row, ...]:
    """One row per (Service, external IP); a Service still waiting for an IP gets one row."""
    by_name = {str((c.get("metadata") or {}).get("name")): c for c in claims}
    rows = []
    for svc in services:
        if not _wants_ip(svc):
            continue
        meta = svc.get("metadata") or {}
        service = f"{meta.get('namespace', '')}/{meta.get('name', '')}"
        ips = _service_ips(svc)
        if not ips:
            rows.append(Row(service, NO_IP, "", "no IP yet", ""))
            continue
        for ip in ips:
            name = _claim_name(ip)
            claim = by_name.get(name) if name else None
            if claim is None:
                rows.append(Row(service, ip, "", "no claim", holder_of(ip) or ""))
                continue
            node = str((claim.get("spec") or {}).get("nodeName") or "")
            phase = str((claim.get("status") or {}).get("phase") or "Pending")
            rows.append(Row(service, ip, node, phase, holder_of(ip) or ""))
    return tuple(sorted(rows, key=lambda r: (natural_key(r.service), natural_key(r.ip))))


def _table(rows: Iterable[tuple[str, ...]]) -> list[str]:
    materialised = [HEADERS, *rows]
    widths = [max(len(r[i]) for r in materialised) for i in range(len(HEADERS))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in materialised
    ]


def _node_part(n: NodeLine) -> str:
    if n.state == "up":
        return f"{n.name} up ({n.addresses} IP{'s' if n.addresses != 1 else ''})"
    return f"{n.name} {n.state.upper()}"


def render_nodes(nodes: Iterable[NodeLine]) -> str:
    everyone = list(nodes)
    if len(everyone) <= NODES_NAMED:
        return "nodes: " + ", ".join(_node_part(n) for n in everyone)
    up = sum(1 for n in everyone if n.state == "up")
    named = [_node_part(n) for n in everyone if n.state != "up" or n.addresses]
    shown = named[:NODES_NAMED]
    more = f", ... {len(named) - len(shown)} more" if len(named) > len(shown) else ""
    return f"nodes: {up}/{len(everyone)} up; " + ", ".join(shown) + more


def render(snapshot: Snapshot, *, max_rows: int | None = None) -> list[str]:
    """The table, then one line about the nodes and one with the totals."""
    rows = [r.cells() for r in snapshot.rows]
    hidden = 0
    if max_rows is not None and len(rows) > max_rows:
        hidden = len(rows) - max_rows
        rows = rows[:max_rows]
    lines = _table(rows)
    if hidden:
        lines.append(f"... {hidden} more (kubectl get ipclaims shows them all)")
    lines.append(render_nodes(snapshot.nodes))
    lines.extend(snapshot.notes)
    lines.append(
        f"{snapshot.with_ip}/{snapshot.services} services have an IP, "
        f"{snapshot.bound} claims Bound, {snapshot.elapsed:.0f}s"
    )
    return lines


def describe_changes(old: Snapshot | None, new: Snapshot) -> list[str]:
    """Lines for what changed between two snapshots (the non-TTY live view)."""
    stamp = f"[{new.elapsed:6.1f}s]"
    out = []
    before = {r.key: r for r in old.rows} if old else {}
    after = {r.key: r for r in new.rows}
    for key, row in after.items():
        if before.get(key) != row:
            service, ip, node, phase, on_link = row.cells()
            out.append(f"{stamp} {service} {ip} node={node} phase={phase} on-link={on_link}")
    services_now = {r.service for r in new.rows}
    for key in sorted(before.keys() - after.keys()):
        if key[1] == NO_IP and key[0] in services_now:
            continue  # the Service got its IP: the new row says so
        out.append(f"{stamp} {key[0]} {key[1]} gone")
    out += [f"{stamp} {note}" for note in new.notes if not old or note not in old.notes]
    if old is None and len(new.nodes) > NODES_NAMED:  # a thousand "node-N up" lines say less
        states = sorted({n.state for n in new.nodes})
        counts = ", ".join(f"{sum(1 for n in new.nodes if n.state == s)} {s}" for s in states)
        return [*out, f"{stamp} nodes: {counts}"]
    old_nodes = {n.name: n.state for n in old.nodes} if old else {}
    for n in new.nodes:
        if old_nodes.get(n.name) != n.state:
            out.append(f"{stamp} node {n.name} {n.state}")
    return out


class LiveView:
    """Writes snapshots to `out`: redrawn in place on a TTY, line per change otherwise.

    On a TTY the screen reads, top to bottom: the header (the banner, written once when the
    first line is), the messages as they come, and the table, redrawn in place under them.
    """

    def __init__(self, out: TextIO, *, tty: bool, header: list[str] | None = None) -> None:
        self.out = out
        self.tty = tty
        self.header = header or []
        self._header_written = False
        self._drawn = 0
        self._last: Snapshot | None = None

    @property
    def last(self) -> Snapshot | None:
        return self._last

    def update(self, snapshot: Snapshot) -> None:
        if self.tty:
            self._redraw(snapshot)
        else:
            for line in describe_changes(self._last, snapshot):
                self.out.write(line + "\n")
        self._last = snapshot
        self.out.flush()

    def _redraw(self, snapshot: Snapshot) -> None:
        size = shutil.get_terminal_size((100, 40))
        room = max(1, size.lines - len(self.header) - len(snapshot.notes) - 5)
        width = max(10, size.columns - 1)
        parts = [f"\x1b[{self._drawn}F" if self._drawn else "", "\x1b[J"]
        parts += self._banner(width)
        lines = render(snapshot, max_rows=room)
        parts += [line[:width] + "\n" for line in lines]
        self.out.write("".join(parts))
        self._drawn = len(lines)

    def _banner(self, width: int) -> list[str]:
        """The header's lines the first time, then nothing: it stays where it was written."""
        if self._header_written:
            return []
        self._header_written = True
        return [line[:width] + "\n" for line in self.header]

    def message(self, text: str) -> None:
        """A line that stays (on a TTY: under the banner, above the table)."""
        if self.tty:
            erase = f"\x1b[{self._drawn}F\x1b[J" if self._drawn else ""
            self._drawn = 0
            width = max(10, shutil.get_terminal_size((100, 40)).columns - 1)
            self.out.write(erase + "".join(self._banner(width)))
        self.out.write(text + "\n")
        if self.tty and self._last is not None:
            self._redraw(self._last)
        self.out.flush()
