"""The allocation rules as a state machine: random Services, edits, hand-set IPs, deletes,
interleaved reconciles and allocator restarts against `AllocationBook`.

The model keeps an "API" (claims and Services) and carries out each `AllocationPlan` the way
allocator/services.py does: claim create first (AlreadyExists = someone else's), joins only
onto a claim of the same key, the Service write, then releases. Plans may be made and carried
out out of order (several workers), and a restart rebuilds the book from the API the way
`Term.rebuild` does. Invariants:

- always: no IP is recorded on two Services unless both are on its claim, shared under a key
  (their keys may have changed since: that is settled by the next reconcile);
- once everything is reconciled: no IP on two Services (given or set by hand) unless they
  share a key and may share (`core.sharing`); every Service whose request can be met holds
  an IP; Services of one key that may all share hold one IP; claims and Services agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from ipaddress import ip_address

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from eipctl.core.allocation import AllocationBook
from eipctl.core.allocation_inputs import ClaimInfo, PoolInfo, ServiceInfo
from eipctl.core.allocation_plan import AllocationPlan
from eipctl.core.pool import IPAddress, Pool
from eipctl.core.sharing import clash

# A pass takes ~5 s; when it finds a failure, shrinking a 40-step run and hypothesis's explain
# phase (sys.settrace on 3.11) took over 60 s, and the default timeout then reported a
# "Timeout" inside the shrinker instead of the minimal failing steps (docs/testing.md).
pytestmark = pytest.mark.timeout(300)

POOL = PoolInfo(name="p", pool=Pool.parse("p", "192.0.2.0/27"))  # 30 usable: never full
NAMES = [f"default/s{i}" for i in range(4)]
LITERALS = [ip_address(f"192.0.2.{i}") for i in (1, 2, 3)]
PORTS = st.frozensets(st.sampled_from([("TCP", 80), ("TCP", 443), ("UDP", 53)]), min_size=1)


@dataclass
class Claim:
    pool: str
    services: set[str]
    key: str


@dataclass
class Svc:
    info: ServiceInfo
    manual: frozenset[IPAddress] = frozenset()
    recorded: tuple[IPAddress, ...] = ()

    def view(self) -> ServiceInfo:
        """The Service as the informer shows it (hand-set = used but not recorded)."""
        return replace(
            self.info,
            recorded=self.recorded,
            hand_set=tuple(sorted(self.manual - set(self.recorded), key=int)),
        )

    @property
    def key(self) -> str:
        return self.info.annotations.get("external-ip-sharing-key", "")


@dataclass
class Api:
    claims: dict[IPAddress, Claim] = field(default_factory=dict)
    services: dict[str, Svc] = field(default_factory=dict)

    def claim_info(self, ip: IPAddress) -> ClaimInfo:
        c = self.claims[ip]
        return ClaimInfo(ip, c.pool, tuple(sorted(c.services)), True, c.key)


class AllocationMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.api = Api()
        self.book = self._fresh_book()
        self.inflight: list[tuple[str, AllocationPlan, ServiceInfo | None]] = []
        self.counter = 0
        self.edited: set[str] = set()
        """Services changed after creation: a key or port edit may leave a group on two
        IPs for good (nothing held is taken away to merge them)."""

    def _fresh_book(self) -> AllocationBook:
        book = AllocationBook()
        book.set_pools([POOL])
        for ip in self.api.claims if hasattr(self, "api") else ():
            book.claim_seen(self.api.claim_info(ip))
        for key, svc in self.api.services.items() if hasattr(self, "api") else ():
            book.service_seen(svc.view())
            book.reserve_recorded(key, svc.recorded)
        return book

    # --- what users do ------------------------------------------------------------------
    @rule(
        name=st.sampled_from(NAMES),
        literal=st.none() | st.sampled_from(LITERALS),
        key=st.sampled_from(["", "k1", "k2"]),
        ports=PORTS,
        local=st.booleans(),
        app=st.sampled_from(["a", "b"]),
    )
    def put_service(
        self,
        name: str,
        literal: IPAddress | None,
        key: str,
        ports: frozenset[tuple[str, int]],
        local: bool,
        app: str,
    ) -> None:
        annotations = {"external-ip": str(literal) if literal else "auto"}
        if key:
            annotations["external-ip-sharing-key"] = key
        old = self.api.services.get(name)
        if old is not None:
            self.edited.add(name)
        self.counter += 1
        created = old.info.created if old else f"{self.counter:06d}"
        info = ServiceInfo(
            key=name,
            namespace="default",
            annotations=annotations,
            ports=ports,
            local_traffic=local,
            selector=(("app", app),),
            created=created,
        )
        svc = Svc(info, old.manual if old else frozenset(), old.recorded if old else ())
        self.api.services[name] = svc
        self.book.service_seen(svc.view())

    @precondition(lambda self: self.api.services)
    @rule(data=st.data(), ip=st.sampled_from([ip_address("192.0.2.20"), *LITERALS]))
    def set_by_hand(self, data: st.DataObject, ip: IPAddress) -> None:
        """A user writes an IP into spec.externalIPs (not while the allocator hands it out)."""
        if ip in self.api.claims or any(
            ip in {a.ip for a in p.acquire} for _, p, _ in self.inflight
        ):
            return
        if any(ip in s.recorded for s in self.api.services.values()):
            return
        name = data.draw(st.sampled_from(sorted(self.api.services)))
        svc = self.api.services[name]
        svc.manual = svc.manual ^ {ip}
        self.book.service_seen(svc.view())

    @precondition(lambda self: self.api.services)
    @rule(data=st.data())
    def delete_service(self, data: st.DataObject) -> None:
        name = data.draw(st.sampled_from(sorted(self.api.services)))
        del self.api.services[name]
        self.edited.discard(name)
        self.book.service_gone(name)

    # --- what the allocator does --------------------------------------------------------
    @rule(name=st.sampled_from(NAMES))
    def plan(self, name: str) -> None:
        """A worker decides now and carries it out later (other workers go meanwhile)."""
        svc = self.api.services.get(name)
        info = svc.view() if svc else None
        self.inflight.append((name, self.book.plan(name, info), info))

    @precondition(lambda self: self.inflight)
    @rule(data=st.data())
    def carry_out(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.inflight) - 1))
        self._apply(*self.inflight.pop(i))

    @rule()
    def restart(self) -> None:
        """The allocator dies (work in flight is lost) and a new one rebuilds from the API."""
        self.inflight.clear()
        self.book = self._fresh_book()

    @rule()
    def converge(self) -> None:
        while self.inflight:
            self._apply(*self.inflight.pop(0))
        for _ in range(12):
            changed = False
            keys = set(self.api.services) | {
                s for c in self.api.claims.values() for s in c.services
            }
            for name in sorted(keys):
                svc = self.api.services.get(name)
                plan = self.book.plan(name, svc.view() if svc else None)
                changed |= bool(plan.acquire or plan.release or plan.deferred or plan.rekey)
                self._apply(name, plan, svc.view() if svc else None)
            if not changed:
                break
        else:
            raise AssertionError("reconciling never settles")
        self._check_settled()

    def _apply(self, name: str, plan: AllocationPlan, info: ServiceInfo | None) -> None:
        book, api = self.book, self.api
        if plan.deferred or plan.hands_off:
            for acq in plan.acquire:
                if not acq.join:
                    book.settle(acq.ip, name, None)
            return
        key = info.annotations.get("external-ip-sharing-key", "").strip() if info else ""
        acquired: list[IPAddress] = []
        for acq in plan.acquire:
            claim = api.claims.get(acq.ip)
            if acq.join:
                if claim is not None and key and claim.key == key and claim.services:
                    claim.services.add(name)
                    acquired.append(acq.ip)
                if claim is not None:
                    book.claim_seen(api.claim_info(acq.ip))
                continue
            if claim is None:
                api.claims[acq.ip] = Claim(acq.pool, {name}, key)
                acquired.append(acq.ip)
                book.claim_seen(api.claim_info(acq.ip))
            else:  # AlreadyExists: ours only if it lists us
                book.claim_seen(api.claim_info(acq.ip))
                if name in claim.services:
                    acquired.append(acq.ip)
                else:
                    book.settle(acq.ip, name, None)
        for ip, new_key in plan.rekey:
            claim = api.claims.get(ip)
            if claim is not None and claim.services == {name}:
                claim.key = new_key
                book.claim_seen(api.claim_info(ip))
        svc = api.services.get(name)
        if svc is not None and info is not None:
            svc.recorded = tuple(sorted({*plan.keep, *acquired}, key=int))
            # an IP set by hand that the allocator now records is one entry of
            # spec.externalIPs, and it is the allocator's: released later, it goes entirely
            svc.manual = svc.manual - set(svc.recorded)
            book.service_seen(svc.view())
        for ip in plan.release:
            claim = api.claims.get(ip)
            if claim is None or name not in claim.services:
                continue
            claim.services.discard(name)
            if claim.services:
                book.claim_seen(api.claim_info(ip))
            else:
                del api.claims[ip]
                book.claim_gone(ip)

    # --- what must hold -----------------------------------------------------------------
    @invariant()
    def an_ip_is_recorded_on_two_services_only_through_one_shared_claim(self) -> None:
        for ip, holders in self._recorded().items():
            if len(holders) > 1:
                claim = self.api.claims.get(ip)
                assert claim is not None and claim.key, f"{ip} on {holders} without a shared claim"
                assert set(holders) <= claim.services, f"{ip} on {holders}, not on its claim"

    @invariant()
    def the_books_reservations_agree_with_its_allocator(self) -> None:
        """What the book's equivalence arguments rest on (docs/testing.md, session 17): the
        pool's allocator holds exactly the IPs claimed, pending or set by hand in it (so
        rebuilding it in `set_pools` changes nothing), no claimed IP is also pending, and
        every keyed reservation is a pending one."""
        book = self.book
        in_use = {*book._claims, *book._pending, *book._hand_set}
        expected = sorted(i for i in in_use if POOL.pool is not None and POOL.pool.contains(i))
        assert list(book._allocators["p"].used_addresses()) == expected
        assert not set(book._claims) & set(book._pending)
        assert set(book._pending_shared) <= set(book._pending)

    def _recorded(self) -> dict[IPAddress, list[str]]:
        out: dict[IPAddress, list[str]] = {}
        for name, svc in self.api.services.items():
            for ip in svc.recorded:
                out.setdefault(ip, []).append(name)
        return out

    def _check_settled(self) -> None:
        services = self.api.services
        users: dict[IPAddress, set[str]] = {}
        for name, svc in services.items():
            for ip in {*svc.recorded, *svc.manual}:
                users.setdefault(ip, set()).add(name)
        for ip, names in users.items():
            group = sorted(names)
            for i, a in enumerate(group):
                for b in group[i + 1 :]:
                    sa, sb = services[a], services[b]
                    why = f"{ip} on {a} and {b}"
                    if ip not in sa.recorded and ip not in sb.recorded:
                        continue  # a user set it by hand on both: not the allocator's doing
                    assert ip in sa.recorded and ip in sb.recorded, f"{why}, one by hand"
                    assert sa.key and sa.key == sb.key, f"{why} without one key"
                    assert clash(sa.info, sb.info) is None, f"{why}: {clash(sa.info, sb.info)}"
        for name, svc in services.items():
            literal = svc.info.annotations["external-ip"]
            if literal == "auto":
                assert len(svc.recorded) == 1, f"{name} (auto) holds {svc.recorded}"
                continue
            ip = ip_address(literal)
            blocked = any(  # set by hand elsewhere, or given to one it may not share with
                ip in o.manual
                or (
                    ip in o.recorded
                    and (not svc.key or o.key != svc.key or clash(svc.info, o.info) is not None)
                )
                for other, o in services.items()
                if other != name
            )
            assert blocked or svc.recorded == (ip,), f"{name} wants {ip}, holds {svc.recorded}"
        for key in {s.key for s in services.values() if s.key}:
            group = [s for n, s in services.items() if s.key == key]
            if any(n in self.edited for n, s in services.items() if s.key == key):
                continue
            compatible = all(
                clash(a.info, b.info) is None for a in group for b in group if a is not b
            )
            if compatible and all(s.info.annotations["external-ip"] == "auto" for s in group):
                held = {s.recorded for s in group}
                assert len(held) == 1, f"key {key}: compatible Services hold {held}"
        for ip, claim in self.api.claims.items():
            for name in claim.services:
                assert name in services and ip in services[name].recorded, f"{ip}: {name}"
        for ip, names in self._recorded().items():
            assert ip in self.api.claims and set(names) <= self.api.claims[ip].services


AllocationMachine.TestCase.settings = settings(
    max_examples=300,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestAllocationMachine = AllocationMachine.TestCase
