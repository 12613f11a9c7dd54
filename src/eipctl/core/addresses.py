"""What the controller must do to a node's links: pure decisions, no I/O.

Three pieces, each a value-in / value-out function or a small state machine on an injected
monotonic clock:

- `plan()`: the claims placed on this node (desired) against the addresses on its links
  (observed) give the actions: addresses to add (then announce), to keep (renew their
  lifetime only; never removed and re-added, never probed again), and to remove. Only
  addresses eipctl added are ever removed; an administrator's address is never touched, and
  a claim for an IP an administrator holds is reported as blocked instead.
  The start-up purge is the same function run once, after the claim cache has synced:
  whatever is managed but not placed here goes, whatever is placed here stays.
- `Fence`: healthy -> fenced once no heartbeat has succeeded for `node_timeout`; fenced ->
  healthy on the next success. While fenced, `plan(..., fenced=True)` removes every managed
  address and adds none.
- `HolderLiveness`: judges another node live or dead from its IpNode heartbeat counter as
  seen on *our* clock (never compare clocks across machines), for the take-over rule after a
  probe conflict (`conflict_decision`).
"""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def ip_sort_key(ip: IPAddress) -> tuple[int, int]:
    """Orders IPv4 before IPv6 (Python refuses to compare them directly)."""
    return (ip.version, int(ip))


@dataclass(frozen=True, slots=True)
class Address:
    """One address on one link: equality is (link, ip, prefixlen)."""

    link: str
    ip: IPAddress
    prefixlen: int

    def sort_key(self) -> tuple[str, int, int, int]:
        return (self.link, self.ip.version, int(self.ip), self.prefixlen)

    def __str__(self) -> str:
        return f"{self.ip}/{self.prefixlen}@{self.link}"


@dataclass(frozen=True, slots=True)
class PlacedClaim:
    """A claim whose spec.nodeName is this node, resolved to the address it wants.

    `shared` marks per-node claims of the `all` placement policy: every node holds the IP on
    purpose, so other holders are expected and probing is skipped.
    """

    name: str
    address: Address
    shared: bool = False


@dataclass(frozen=True, slots=True)
class LinkView:
    """What one link holds now: eipctl's addresses and everyone else's IPs."""

    managed: frozenset[tuple[IPAddress, int]] = frozenset()
    foreign: frozenset[IPAddress] = frozenset()


class BlockReason(enum.StrEnum):
    ADMIN_ADDRESS = "AdminAddress"  # the IP is on the link, put there by someone else
    LINK_MISSING = "LinkMissing"  # the claim's link does not exist on this node
    DUPLICATE_IP = "DuplicateIP"  # another claim placed here wants the same IP


@dataclass(frozen=True, slots=True)
class Blocked:
    claim: PlacedClaim
    reason: BlockReason


@dataclass(frozen=True, slots=True)
class Plan:
    """Actions for one pass. Apply `add` first, then `remove` (a claim that moved between
    links is held on the new link before it leaves the old one); `keep` only renews.

    An `add` whose IP is managed on the same link with another prefix length replaces it
    (LinkBackend.add does so), so that old entry is not listed in `remove`.
    """

    add: tuple[PlacedClaim, ...] = ()
    keep: tuple[PlacedClaim, ...] = ()
    remove: tuple[Address, ...] = ()
    blocked: tuple[Blocked, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.add or self.remove or self.blocked)


def _winners(desired: Iterable[PlacedClaim]) -> tuple[list[PlacedClaim], list[Blocked]]:
    """One claim per IP: the smallest name wins, deterministically; the rest are blocked."""
    by_ip: dict[IPAddress, list[PlacedClaim]] = {}
    for claim in desired:
        by_ip.setdefault(claim.address.ip, []).append(claim)
    winners: list[PlacedClaim] = []
    blocked: list[Blocked] = []
    for claims in by_ip.values():
        ordered = sorted(claims, key=lambda c: c.name)
        winners.append(ordered[0])
        blocked.extend(Blocked(c, BlockReason.DUPLICATE_IP) for c in ordered[1:])
    return winners, blocked


def plan(
    desired: Iterable[PlacedClaim],
    observed: Mapping[str, LinkView],
    *,
    fenced: bool = False,
) -> Plan:
    """Compare the claims placed here with the links and return the actions.

    `observed` has one entry per link that exists (a link absent from it is missing). When
    `fenced`, nothing is desired: every managed address is removed.
    """
    add: list[PlacedClaim] = []
    keep: list[PlacedClaim] = []
    blocked: list[Blocked] = []
    wanted: set[tuple[str, IPAddress]] = set()
    if not fenced:
        winners, blocked = _winners(desired)
        for claim in winners:
            addr = claim.address
            view = observed.get(addr.link)
            if view is None:
                blocked.append(Blocked(claim, BlockReason.LINK_MISSING))
                continue
            if addr.ip in view.foreign:
                blocked.append(Blocked(claim, BlockReason.ADMIN_ADDRESS))
                continue
            wanted.add((addr.link, addr.ip))
            if (addr.ip, addr.prefixlen) in view.managed:
                keep.append(claim)
            else:
                add.append(claim)
    remove = [
        Address(link, ip, prefixlen)
        for link, view in observed.items()
        for ip, prefixlen in view.managed
        if (link, ip) not in wanted and ip not in view.foreign
    ]
    return Plan(
        add=tuple(sorted(add, key=_by_claim)),
        keep=tuple(sorted(keep, key=_by_claim)),
        remove=tuple(sorted(remove, key=Address.sort_key)),
        blocked=tuple(sorted(blocked, key=lambda b: _by_claim(b.claim))),
    )


def _by_claim(claim: PlacedClaim) -> tuple[tuple[str, int, int, int], str]:
    return (claim.address.sort_key(), claim.name)


def links_to_inspect(
    default_link: str, desired: Iterable[PlacedClaim], remembered: Iterable[str] = ()
) -> frozenset[str]:
    """The links a pass looks at: the default, every claim's link, and links this process
    put addresses on before. A managed address left on another link by an earlier process
    is not seen, but it carries a finite lifetime and expires on its own."""
    return frozenset({default_link, *(c.address.link for c in desired), *remembered})


def apply_plan(observed: Mapping[str, LinkView], actions: Plan) -> dict[str, LinkView]:
    """The links after `actions` succeed, with LinkBackend's rules (a model, for tests and
    for predicting status without re-reading the links)."""
    managed = {link: dict(view.managed) for link, view in observed.items()}
    for claim in actions.add:
        addr = claim.address
        managed[addr.link][addr.ip] = addr.prefixlen  # replaces another prefix length
    for addr in actions.remove:
        if managed[addr.link].get(addr.ip) == addr.prefixlen:
            del managed[addr.link][addr.ip]
    return {
        link: LinkView(frozenset(managed[link].items()), view.foreign)
        for link, view in observed.items()
    }


# -- self-fencing ------------------------------------------------------------------------


class FenceTransition(enum.Enum):
    NONE = "none"
    FENCE = "fence"  # remove every managed address now
    RESTORE = "restore"  # heartbeat works again: re-add the claims still placed here


@dataclass
class Fence:
    """Self-fencing on our own monotonic clock.

    The timer starts at construction: a controller that never reaches the API fences
    `node_timeout` after start, exactly like one that loses it later.
    """

    node_timeout: float
    clock: Callable[[], float]
    _last_success: float = field(init=False)
    _fenced: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        if self.node_timeout <= 0:
            raise ValueError("node_timeout must be positive")
        self._last_success = self.clock()

    @property
    def fenced(self) -> bool:
        return self._fenced

    def heartbeat_age(self) -> float:
        """Seconds since the last successful heartbeat (or since start)."""
        return self.clock() - self._last_success

    def succeeded(self) -> FenceTransition:
        """Record a successful heartbeat write."""
        self._last_success = self.clock()
        if self._fenced:
            self._fenced = False
            return FenceTransition.RESTORE
        return FenceTransition.NONE

    def check(self) -> FenceTransition:
        """Fence if the heartbeat has been failing for `node_timeout`; call it often."""
        if not self._fenced and self.heartbeat_age() >= self.node_timeout:
            self._fenced = True
            return FenceTransition.FENCE
        return FenceTransition.NONE

    def may_hold(self) -> bool:
        """Whether addresses may be added or their lifetimes renewed right now."""
        return not self._fenced and self.heartbeat_age() < self.node_timeout


# -- conflicts and the previous holder ---------------------------------------------------


class Liveness(enum.Enum):
    LIVE = "live"
    DEAD = "dead"


@dataclass
class HolderLiveness:
    """Another node's liveness from its heartbeat counter, judged on our clock.

    First sight of a node counts as a change (it may be live); a counter unchanged for
    `node_timeout` means dead; an absent IpNode (None) is dead.
    """

    node_timeout: float
    clock: Callable[[], float]
    _seen: dict[str, tuple[int, float]] = field(default_factory=dict)

    def observe(self, node: str, heartbeat: int | None) -> Liveness:
        now = self.clock()
        if heartbeat is None:
            self._seen.pop(node, None)
            return Liveness.DEAD
        previous = self._seen.get(node)
        if previous is None or previous[0] != heartbeat:
            self._seen[node] = (heartbeat, now)
            return Liveness.LIVE
        return Liveness.DEAD if now - previous[1] >= self.node_timeout else Liveness.LIVE

    def forget(self, node: str) -> None:
        self._seen.pop(node, None)


class ConflictDecision(enum.Enum):
    ADD = "add"  # nobody answers: add and announce
    TAKE_OVER = "take-over"  # the answer comes from another eipctl node, or a dead holder
    WAIT = "wait"  # someone live or unknown answers: report Conflict, probe again later


def conflict_decision(
    *,
    answered: bool,
    previous_holder: str | None,
    own_node: str,
    holder_liveness: Liveness | None,
    answered_by: str | None = None,
) -> ConflictDecision:
    """The take-over rule (docs/controller.md, "Conflicts").

    - Nobody answers the probe: add.
    - The answering MAC is another eipctl node's (`answered_by`, from the MACs each IpNode
      publishes): the scheduler has moved the claim here, so that node is dead, hung, or
      about to let go when it sees the move. Take over at once; the announcements repoint
      the neighbours. Waiting for it instead would open a gap whenever the old holder's
      controller restarts and removes the address before we add it.
    - Someone answers and the claim's previous holder (status.boundNode, another node) is
      dead by its IpNode heartbeat: take over (its kernel still holds the address; its
      lifetime ends soon anyway).
    - Otherwise the answer comes from a host eipctl does not know (or a live holder whose
      MAC it cannot tell): do not fight; report Conflict, wait and probe again.
    """
    if not answered:
        return ConflictDecision.ADD
    if answered_by and answered_by != own_node:
        return ConflictDecision.TAKE_OVER
    if previous_holder and previous_holder != own_node and holder_liveness is Liveness.DEAD:
        return ConflictDecision.TAKE_OVER
    return ConflictDecision.WAIT
