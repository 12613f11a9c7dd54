"""One IpClaim per external IP in use: claims for hand-set IPs, and removal of orphans.

Keys are claim names (one per IP). For each, the reconciler compares the Services that use
the IP (`ServiceIndex`) with the claim in the cache:

- no claim, some Service hand-set the IP in ``spec.externalIPs``: create the claim if an
  ``allowManual`` pool holds the IP (its prefix length and ``eipctl.io/pool`` label), or if
  ``--claim-unpooled-external-ips`` is set (``--default-prefix-length``, 128 for IPv6, no pool
  label); otherwise refuse, with a Warning Event on the Service (CVE-2020-8554: editing a
  Service must not be enough to make eipctl announce an address).
- a claim no Service uses: delete it once it has been unused for ``--orphan-grace-period`` on
  our clock (the allocator creates its claim before it patches the Service), with a
  resourceVersion precondition so a claim changed meanwhile is looked at again.
- a claim the scheduler made (label ``eipctl.io/origin: manual``): keep ``spec.services``
  equal to the Services that hand-set its IP; delete it if its IP is no longer admitted
  (the pool stopped allowing hand-set IPs or went away, and the flag is off).

IPs the allocator handed out are listed in the Service annotation ``eipctl.io/allocated-ips``;
they are the allocator's and never get a claim from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Protocol

import structlog

from eipctl.core.claims import (
    IP,
    NODE_NAME,
    SERVICES,
    is_node_bound,
    manual_claim,
    reference,
    spec_of,
)
from eipctl.core.fields import Obj, labels_of
from eipctl.core.naming import (
    ANNOTATION_ALLOCATED_IPS,
    LABEL_ORIGIN,
    ORIGIN_MANUAL,
    IPAddress,
    claim_name_for,
    ip_for_claim_name,
)
from eipctl.kube import events
from eipctl.kube.client import IPCLAIMS, object_key
from eipctl.kube.errors import AlreadyExists, Conflict, NotFound
from eipctl.kube.events import EventType
from eipctl.kube.workqueue import DONE, Result, requeue_after
from eipctl.kube.writer import SerializedWriter
from eipctl.scheduler.claims import set_services
from eipctl.scheduler.view import PoolView, PoolViews

log = structlog.get_logger(__name__)


class Cache(Protocol):
    def get(self, key: str) -> Obj | None: ...
    def objects(self) -> list[Obj]: ...


class Recorder(Protocol):
    def emit(self, involved: Obj, type_: EventType, reason: str, message: str) -> None: ...
    def tell(
        self, involved: Obj, type_: EventType, reason: str, message: str, **fields: object
    ) -> None: ...


@dataclass(frozen=True)
class ServiceIps:
    """The external IPs of one Service, as claim names."""

    used: frozenset[str]
    """Every IP it uses: spec.externalIPs and status.loadBalancer.ingress."""
    manual: frozenset[str]
    """spec.externalIPs entries set by hand (not listed in eipctl.io/allocated-ips)."""
    invalid: tuple[str, ...] = ()


def _names(ips: Iterable[object]) -> tuple[set[str], list[str]]:
    names: set[str] = set()
    invalid: list[str] = []
    for ip in ips:
        try:
            names.add(claim_name_for(str(ip).strip()))
        except ValueError:
            invalid.append(str(ip))
    return names, invalid


def service_ips(svc: Obj) -> ServiceIps:
    spec = svc.get("spec") or {}
    annotations = (svc.get("metadata") or {}).get("annotations") or {}
    external, invalid = _names(spec.get("externalIPs") or [])
    ingress = (((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress")) or []
    lb, _ = _names(i.get("ip") for i in ingress if isinstance(i, dict) and i.get("ip"))
    allocated_text = str(annotations.get(ANNOTATION_ALLOCATED_IPS) or "")
    allocated, _ = _names(p for p in allocated_text.split(",") if p.strip())
    return ServiceIps(
        used=frozenset(external | lb),
        manual=frozenset(external - allocated),
        invalid=tuple(invalid),
    )


class ServiceIndex:
    """Claim name -> the Services ("namespace/name") that use its IP / hand-set it."""

    def __init__(self) -> None:
        self._by_service: dict[str, ServiceIps] = {}
        self._used: dict[str, set[str]] = {}
        self._manual: dict[str, set[str]] = {}

    def update(self, key: str, svc: Obj | None) -> set[str]:
        """Record the Service's current IPs (None: deleted); returns the claim names touched."""
        old = self._by_service.pop(key, None)
        new = service_ips(svc) if svc is not None else None
        if new is not None and (new.used or new.manual):
            self._by_service[key] = new
        touched: set[str] = set()
        for attr, table in (("used", self._used), ("manual", self._manual)):
            before: frozenset[str] = getattr(old, attr) if old else frozenset()
            after: frozenset[str] = getattr(new, attr) if new else frozenset()
            for name in before - after:
                table[name].discard(key)
                if not table[name]:
                    del table[name]
            for name in after - before:
                table.setdefault(name, set()).add(key)
            touched |= before ^ after
        return touched

    def using(self, name: str) -> frozenset[str]:
        return frozenset(self._used.get(name, ()))

    def manual(self, name: str) -> frozenset[str]:
        return frozenset(self._manual.get(name, ()))

    def names(self) -> set[str]:
        return set(self._used)

    def manual_names(self) -> set[str]:
        return set(self._manual)


class ServiceClaims:
    """Reconciles one claim name at a time; see the module docstring."""

    def __init__(
        self,
        *,
        index: ServiceIndex,
        claims: Cache,
        services: Cache,
        pools: Cache,
        writer: SerializedWriter,
        recorder: Recorder,
        clock: Callable[[], float],
        claim_unpooled: bool,
        default_prefix_length: int,
        orphan_grace_period: float,
    ) -> None:
        self.index = index
        self.claims = claims
        self.services = services
        self.pools = pools
        self.writer = writer
        self.recorder = recorder
        self.clock = clock
        self.claim_unpooled = claim_unpooled
        self.default_prefix_length = default_prefix_length
        self.grace = orphan_grace_period
        self._pool_views = PoolViews()
        self._unused_since: dict[str, float] = {}
        self._refused: set[tuple[str, str]] = set()

    async def reconcile(self, name: str) -> Result:
        claim = self.claims.get(name)
        if claim is None:
            self._unused_since.pop(name, None)
            return await self._ensure_claim(name)
        if is_node_bound(claim):
            return DONE  # bound to a node for good (policy all's copies, node IPs): not ours
        if not _named_after_its_ip(claim, name):
            # not one of ours to judge (hand-made, or a scheme we do not know): never delete it
            log.warning("claim.not_named_after_ip", claim=name, ip=spec_of(claim).get(IP))
            return DONE
        using = self.index.using(name)
        if using:
            self._unused_since.pop(name, None)
            return await self._sync_services(name, claim)
        return await self._collect_orphan(name, claim)

    # --- hand-set IPs ---------------------------------------------------------------------
    async def _ensure_claim(self, name: str) -> Result:
        manual = sorted(self.index.manual(name))
        if not manual:
            return DONE
        ip = ip_for_claim_name(name)
        pool = self._pool_views.manual_pool_for(self._pool_views.build(self.pools.objects()), ip)
        if pool is None and not self.claim_unpooled:
            self._refuse(name, str(ip), manual)
            return DONE
        prefix = self._prefix(pool, ip)
        body = manual_claim(
            ip, pool=pool.name if pool else None, prefix_length=prefix, services=manual
        )
        try:
            await self.writer.create(IPCLAIMS, body)
        except AlreadyExists:
            log.info("manual_claim.exists", claim=name, ip=str(ip))
            return DONE
        log.info(
            "manual_claim.created",
            claim=name,
            ip=str(ip),
            pool=pool.name if pool else None,
            prefix_length=prefix,
            services=manual,
        )
        for key in manual:
            involved = self._service(key)
            if involved is not None:
                self.recorder.emit(
                    involved, "Normal", "ExternalIPClaimed", f"claimed {ip}/{prefix}"
                )
        for key in manual:
            self._refused.discard((key, name))
        return DONE

    def _prefix(self, pool: PoolView | None, ip: IPAddress) -> int:
        if pool is not None:
            return pool.prefix_for(ip)
        if ip.version == 6:
            return 128
        return min(self.default_prefix_length, 32)

    def _refuse(self, name: str, ip: str, services: list[str]) -> None:
        for key in services:
            if (key, name) in self._refused:
                continue
            self._refused.add((key, name))
            message = (
                f"{ip} is in no IpClaimPool with allowManual: true; eipctl will not announce it "
                "(set allowManual on a pool holding it, or --claim-unpooled-external-ips)"
            )
            involved = self._service(key)
            if involved is None:  # not cached: no Service to post on, the log is the record
                log.warning("manual_ip.refused", claim=name, ip=ip, service=key)
            else:
                self.recorder.tell(
                    involved, "Warning", "ExternalIPRefused", message, claim=name, ip=ip
                )

    def _service(self, key: str) -> Obj | None:
        """Service ``key`` as the involved object of an Event; None when it is not cached."""
        svc = self.services.get(key)
        return None if svc is None else events.reference("v1", "Service", svc)

    async def _sync_services(self, name: str, claim: Obj) -> Result:
        if labels_of(claim).get(LABEL_ORIGIN) != ORIGIN_MANUAL:
            return DONE  # the allocator's claim: it keeps spec.services itself
        manual = sorted(self.index.manual(name))
        ip = ip_for_claim_name(name)
        views = self._pool_views.build(self.pools.objects())
        if self._pool_views.manual_pool_for(views, ip) is None and not self.claim_unpooled:
            return await self._revoke(name, claim, manual)
        current = sorted(spec_of(claim).get(SERVICES) or [])
        if not manual or manual == current:
            return DONE
        try:
            await self.writer.update(IPCLAIMS, name, set_services(manual))
        except NotFound:
            return DONE
        log.info("manual_claim.services", claim=name, services=manual)
        return DONE

    async def _revoke(self, name: str, claim: Obj, services: list[str]) -> Result:
        """The pool no longer allows hand-set IPs (or is gone, or the flag was turned off)."""
        rv = (claim.get("metadata") or {}).get("resourceVersion")
        try:
            deleted = await self.writer.delete(IPCLAIMS, name, resource_version=rv)
        except Conflict:
            return requeue_after(0.1)
        if deleted:
            ip = spec_of(claim).get(IP)
            log.warning("manual_claim.revoked", claim=name, ip=ip, services=services)
            for key in services:
                self._refused.discard((key, name))
            self._refuse(name, str(ip), services)
        return DONE

    # --- orphans --------------------------------------------------------------------------
    async def _collect_orphan(self, name: str, claim: Obj) -> Result:
        now = self.clock()
        since = self._unused_since.setdefault(name, now)
        left = self.grace - (now - since)
        if left > 0:
            return requeue_after(left)
        rv = (claim.get("metadata") or {}).get("resourceVersion")
        try:
            deleted = await self.writer.delete(IPCLAIMS, name, resource_version=rv)
        except Conflict:
            return requeue_after(0.1)  # changed meanwhile: look again
        self._unused_since.pop(name, None)
        if deleted:
            spec = spec_of(claim)
            self.recorder.tell(
                reference(claim),
                "Normal",
                "OrphanDeleted",
                f"no Service uses {spec.get(IP)} for {self.grace:g}s",
                ip=spec.get(IP),
                node=spec.get(NODE_NAME),
                unused_for=round(now - since, 3),
            )
        return DONE

    def all_keys(self) -> set[str]:
        """Every claim name worth a look at the start of a term (full reconcile)."""
        return self.index.names() | {object_key(c) for c in self.claims.objects()}


def _named_after_its_ip(claim: Obj, name: str) -> bool:
    try:
        return claim_name_for(str(spec_of(claim).get(IP) or "")) == name
    except ValueError:
        return False
