"""The allocator's claim-first reservation (`ServiceReconciler`), one reconcile pass at a time.

docs/allocator.md, "The record: IpClaims": creating the IpClaim (named after the IP) is the
reservation; a Service of a sharing key joins the key's claim instead; AlreadyExists means
someone else holds the IP unless the claim found is ours (made by the allocator, listing
this Service). These tests run one pass of `reconcile` on the in-memory API
(tests/unit/kube/kube_fakes.py) with the allocator's caches filled by hand, so a claim can
be in the API and not yet in the cache (a lagging watch, or a claim the allocator made just
before it restarted), and check what the pass wrote, what it returned, what the book now
records and the log line of the decision. tests/integration/test_allocator_reservation.py tells the
same stories against the API emulator and a running allocator.
"""

from __future__ import annotations

from datetime import UTC, datetime
from ipaddress import ip_address
from typing import Any, cast

import pytest
import structlog
from kube.kube_fakes import FakeApi

from eipctl.allocator.services import ServiceReconciler
from eipctl.allocator.state import Caches, Term
from eipctl.core.allocation import AllocationBook
from eipctl.core.allocation_inputs import ClaimInfo
from eipctl.core.claims import allocator_claim
from eipctl.core.naming import claim_name_for
from eipctl.kube.client import IPCLAIMPOOLS, IPCLAIMS, SERVICES, Obj, ResourceRef, object_key
from eipctl.kube.errors import AlreadyExists
from eipctl.kube.events import EventRecorder
from eipctl.kube.workqueue import DONE, Result, WorkQueue, requeue_after
from eipctl.kube.writer import SerializedWriter, WriterSettings
from eipctl.plugin.snapshot import Snapshot
from eipctl.plugin.why import explain

FIRST_FREE = "198.51.100.1"  # the lowest address of pool "p" (network address excluded)
NEXT_FREE = "198.51.100.2"
CLAIM = claim_name_for(ip_address(FIRST_FREE))
WEB, API = "default/web", "default/api"


class Cache:
    """Stands in for an informer: what the allocator's watch has delivered so far."""

    def __init__(self) -> None:
        self.by_key: dict[str, Obj] = {}

    def get(self, key: str) -> Obj | None:
        return self.by_key.get(key)

    def keys(self) -> list[str]:
        return list(self.by_key)

    def objects(self) -> list[Obj]:
        return list(self.by_key.values())

    def __len__(self) -> int:
        return len(self.by_key)


class Events:
    """Stands in for the EventRecorder: the Events posted, as (type, reason, message)."""

    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str]] = []

    def emit(self, involved: Obj, type_: str, reason: str, message: str) -> None:
        self.posted.append((type_, reason, message))

    def tell(self, involved: Obj, type_: str, reason: str, message: str, **_: object) -> None:
        """The Event `EventRecorder.tell` posts (its log line is tested in kube/)."""
        self.emit(involved, type_, reason, message)


class Cluster:
    """The in-memory API and the allocator's caches of it; `start` begins a leadership term."""

    def __init__(self, api: FakeApi | None = None) -> None:
        self.api = api or FakeApi()
        self.caches = Caches(*(cast(Any, Cache()) for _ in range(4)))
        self.events = Events()

    def add(self, ref: ResourceRef, obj: Obj, *, seen: bool = True) -> Obj:
        """Store `obj` in the API; `seen`: the allocator's watch has delivered it too."""
        stored = self.api.put(ref, obj)
        if seen:
            cache = {SERVICES: self.caches.services, IPCLAIMS: self.caches.claims}.get(
                ref, self.caches.pools
            )
            cast(Cache, cache).by_key[object_key(stored)] = stored
        return stored

    async def start(self) -> tuple[ServiceReconciler, Term]:
        """A term rebuilt from the caches, as the allocator does when it starts leading."""
        writer = SerializedWriter(self.api, WriterSettings(backoff_initial=0.001))
        term = Term(
            caches=self.caches,
            book=AllocationBook(),
            queue=WorkQueue("test"),
            writer=writer,
            events=cast(EventRecorder, self.events),
        )
        await term.rebuild()
        return ServiceReconciler(term, cast(Any, self.api)), term

    def claim(self) -> Obj:
        return self.api.objects[("ipclaims", CLAIM)]

    def ips_of(self, key: str) -> list[str]:
        return list(self.api.objects[("services", key)]["spec"].get("externalIPs") or [])


def pool(**spec: Any) -> Obj:
    return {"metadata": {"name": "p"}, "spec": {"cidr": "198.51.100.0/29", **spec}}


def service(name: str, *, port: int = 80, sharing_key: str = "") -> Obj:
    annotations = {"external-ip": "auto"}
    if sharing_key:
        annotations["external-ip-sharing-key"] = sharing_key
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {"type": "ClusterIP", "ports": [{"port": port, "protocol": "TCP"}]},
    }


def claim_for(holder: str, sharing_key: str = "", ip: str = FIRST_FREE) -> Obj:
    """The claim an allocator (this one before a restart, or another replica) made."""
    return allocator_claim(
        ip_address(ip), pool="p", prefix_length=None, service=holder, sharing_key=sharing_key
    )


def sharing_key_of(claim: Obj) -> str | None:
    """The sharing key annotation of a claim as stored (None: absent)."""
    return (claim["metadata"].get("annotations") or {}).get("eipctl.io/sharing-key")


def logged(logs: list[dict[str, Any]], event: str) -> dict[str, Any]:
    """The one log entry of `event`."""
    entries = [e for e in logs if e.get("event") == event]
    assert len(entries) == 1, logs
    return entries[0]


async def reconcile(reconciler: ServiceReconciler, key: str) -> tuple[Result, list[Any]]:
    with structlog.testing.capture_logs() as logs:
        result = await reconciler.reconcile(key)
    return result, logs


# --- a new claim ----------------------------------------------------------------------------
async def test_a_new_claim_reserves_the_ip_and_the_first_pass_gives_it_to_the_service() -> None:
    """The create is the reservation: the claim lists the Service, the book records it as
    held at once, and the same pass writes the IP to the Service and is done."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool())
    cluster.add(SERVICES, service("web"))
    reconciler, term = await cluster.start()

    result, logs = await reconcile(reconciler, WEB)

    assert result == DONE
    assert cluster.ips_of(WEB) == [FIRST_FREE]
    assert cluster.claim()["spec"]["services"] == [WEB]
    assert term.book.held_by(WEB) == [
        ClaimInfo(ip=ip_address(FIRST_FREE), pool="p", services=(WEB,), owned=True)
    ]
    assert logged(logs, "claim.created") == {
        "event": "claim.created",
        "log_level": "info",
        "service": WEB,
        "ip": FIRST_FREE,
        "pool": "p",
        "claim": CLAIM,
    }


async def test_a_new_claim_takes_its_prefix_length_from_the_pool() -> None:
    """The pool's prefixLength is written on the claim (the controller adds the address
    with it); without one a claim gets /32."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(prefixLength=24))
    cluster.add(SERVICES, service("web"))
    reconciler, _ = await cluster.start()

    await reconciler.reconcile(WEB)

    assert cluster.claim()["spec"]["prefixLength"] == 24


async def test_a_pool_gone_from_the_book_mid_pass_still_gets_its_claim_with_the_default_mask(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pass planned the IP, then (while an earlier write of the same pass awaited) the
    pool left the book: the create still goes out with the default mask (/32), rather than
    failing on the missing pool; the pool's own reconcile releases the claim if the pool is
    really gone."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(prefixLength=24))
    cluster.add(SERVICES, service("web"))
    reconciler, term = await cluster.start()
    monkeypatch.setattr(term.book, "pool", lambda name: None)

    result, _ = await reconcile(reconciler, WEB)

    assert result == DONE
    assert cluster.ips_of(WEB) == [FIRST_FREE]
    assert cluster.claim()["spec"]["prefixLength"] == 32  # not the vanished pool's 24


@pytest.mark.parametrize(("annotation", "written"), [("  blue ", "blue"), ("", None)])
async def test_a_new_claim_carries_the_services_sharing_key_and_none_without_one(
    annotation: str, written: str | None
) -> None:
    """The claim of a Service with a sharing key records the key (trimmed), so others of
    the key can join it; a Service without one makes a claim without the annotation."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool())
    cluster.add(SERVICES, service("web", sharing_key=annotation))
    reconciler, term = await cluster.start()

    await reconciler.reconcile(WEB)

    assert sharing_key_of(cluster.claim()) == written
    claim = term.book.claim(ip_address(FIRST_FREE))
    assert claim is not None and claim.sharing_key == annotation.strip()


# --- joining a shared claim -------------------------------------------------------------
def shared_cluster(claim_in_api: Obj | None) -> Cluster:
    """web holds FIRST_FREE under key "blue" (as the cache shows); api, of the same key on
    another port, may join it. `claim_in_api`: the claim as the API holds it now (None:
    deleted), which the allocator's cache has not caught up with."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool())
    cluster.add(SERVICES, service("web", sharing_key="blue"))
    cluster.add(SERVICES, service("api", port=443, sharing_key="blue"))
    cluster.add(IPCLAIMS, claim_for(WEB, "blue"))
    if claim_in_api is None:
        cluster.api.remove(IPCLAIMS, CLAIM)
    else:
        cluster.api.put(IPCLAIMS, claim_in_api)
    return cluster


async def test_a_service_joins_the_claim_of_its_sharing_key() -> None:
    """Joining adds the Service to the claim's holders (the others stay), the book records
    the joined claim as held by it, and the pass gives it the shared IP."""
    cluster = shared_cluster(claim_for(WEB, "blue"))
    reconciler, term = await cluster.start()

    result, logs = await reconcile(reconciler, API)

    assert result == DONE
    assert cluster.ips_of(API) == [FIRST_FREE]
    assert cluster.claim()["spec"]["services"] == [API, WEB]
    assert sharing_key_of(cluster.claim()) == "blue"
    assert term.book.held_by(API) == [
        ClaimInfo(
            ip=ip_address(FIRST_FREE),
            pool="p",
            services=(API, WEB),
            owned=True,
            sharing_key="blue",
        )
    ]
    assert logged(logs, "claim.joined") == {
        "event": "claim.joined",
        "log_level": "info",
        "service": API,
        "ip": FIRST_FREE,
        "claim": CLAIM,
    }


@pytest.mark.parametrize(
    ("claim_in_api", "error"),
    [
        (claim_for(WEB, "green"), f"claim {CLAIM} is not shared with key 'blue'"),
        (None, "NotFound"),
    ],
    ids=["rekeyed", "deleted"],
)
async def test_a_refused_join_is_not_reported_as_success(
    claim_in_api: Obj | None, error: str
) -> None:
    """The claim changed since the cache saw it (its holder re-keyed it, or released it):
    the join is refused, the Service gets no IP from it, the claim is left as it is, and
    the Service is looked at again at once."""
    cluster = shared_cluster(claim_in_api)
    reconciler, _ = await cluster.start()

    result, logs = await reconcile(reconciler, API)

    assert result == requeue_after(0)
    assert cluster.ips_of(API) == []
    if claim_in_api is not None:
        assert cluster.claim()["spec"]["services"] == [WEB]
    entry = logged(logs, "claim.join_refused")
    assert entry == {
        "event": "claim.join_refused",
        "log_level": "info",
        "service": API,
        "ip": FIRST_FREE,
        "error": entry["error"],
    }
    assert error in entry["error"]


# --- the name is taken ----------------------------------------------------------------------
async def test_our_own_claim_found_on_create_is_adopted_not_replaced() -> None:
    """The allocator created web's claim, then restarted before writing the Service; its
    claim cache has not delivered the claim yet, so it plans the same IP again. The create
    finds the name taken by a claim that is ours (the allocator's, listing web): web gets
    that IP in this pass, the claim is not rewritten, and the book records it."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool())
    cluster.add(SERVICES, service("web"))
    before = cluster.add(IPCLAIMS, claim_for(WEB), seen=False)
    reconciler, term = await cluster.start()

    result, logs = await reconcile(reconciler, WEB)

    assert result == DONE
    assert cluster.ips_of(WEB) == [FIRST_FREE]
    assert cluster.claim() == before
    assert [c.ip for c in term.book.held_by(WEB)] == [ip_address(FIRST_FREE)]
    assert logged(logs, "claim.taken") == {
        "event": "claim.taken",
        "log_level": "info",
        "service": WEB,
        "ip": FIRST_FREE,
        "claim": CLAIM,
        "ours": True,
    }


class ReleasedAfterRefusal(FakeApi):
    """A create that finds the name taken, after which the holder deletes that claim at once
    (before the allocator's GET of it)."""

    async def create(self, ref: ResourceRef, obj: Obj, namespace: str | None = None) -> Obj:
        try:
            return await super().create(ref, obj, namespace)
        except AlreadyExists:
            self.remove(ref, object_key(obj))
            raise


async def test_a_taken_name_whose_claim_is_gone_on_the_get_is_not_ours() -> None:
    """AlreadyExists, then the claim is deleted before it can be read: the IP was someone
    else's when the create ran, so this pass gives nothing and frees its reservation; the
    next pass creates the claim, now free, for the Service."""
    cluster = Cluster(ReleasedAfterRefusal())
    cluster.add(IPCLAIMPOOLS, pool())
    cluster.add(SERVICES, service("web"))
    cluster.add(IPCLAIMS, claim_for("default/other"), seen=False)
    reconciler, term = await cluster.start()

    result = await reconciler.reconcile(WEB)

    assert result == requeue_after(0)
    assert cluster.ips_of(WEB) == []
    assert term.book.pending_for(ip_address(FIRST_FREE)) is None
    assert term.book.held_by(WEB) == []

    assert await reconciler.reconcile(WEB) == DONE
    assert cluster.ips_of(WEB) == [FIRST_FREE]
    assert cluster.claim()["spec"]["services"] == [WEB]


async def test_a_claim_of_another_service_found_on_create_is_not_taken() -> None:
    """The name is taken by the allocator's claim for another Service (another replica
    reserved it): this pass gives web nothing, the claim is recorded as the other's, and
    the next pass picks the next free IP."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool())
    cluster.add(SERVICES, service("web"))
    before = cluster.add(IPCLAIMS, claim_for("default/other"), seen=False)
    reconciler, term = await cluster.start()

    result, logs = await reconcile(reconciler, WEB)

    assert result == requeue_after(0)
    assert cluster.ips_of(WEB) == []
    assert cluster.claim() == before
    claim = term.book.claim(ip_address(FIRST_FREE))
    assert claim is not None and claim.services == ("default/other",)
    assert logged(logs, "claim.taken")["ours"] is False

    assert await reconciler.reconcile(WEB) == DONE
    assert cluster.ips_of(WEB) == [NEXT_FREE]


# --- why a Service gets nothing ----------------------------------------------------------
async def test_a_pool_that_refuses_the_namespace_is_named_as_the_cause_as_why_names_it() -> None:
    """#33: a Service pinned to a Ready pool whose namespaceSelector refuses it was told
    "pool p is not Ready or does not admit it". The Event names the one real cause, in the
    words `kubectl eipctl why` uses (both read `core.admission`)."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool(namespaceSelector={"matchLabels": {"team": "a"}}))
    namespace = {"metadata": {"name": "default", "labels": {"team": "b"}}}
    cast(Cache, cluster.caches.namespaces).by_key["default"] = namespace
    pinned = service("web")
    pinned["metadata"]["annotations"]["external-ip-pool"] = "p"
    cluster.add(SERVICES, pinned)
    reconciler, _ = await cluster.start()

    await reconcile(reconciler, WEB)

    message = (
        "no pool can give an IP: pool p's namespaceSelector team=a does not match namespace "
        "default's labels (team=b)"
    )
    assert cluster.events.posted == [("Warning", "NoPool", message)]
    snapshot = Snapshot(
        services=[pinned],
        pools=[cluster.api.objects[("ipclaimpools", "p")]],
        namespace_labels={"default": {"team": "b"}},
    )
    found = explain(snapshot, "default", "web", datetime.now(UTC))
    assert found is not None and found.cause == "NoPool"
    assert found.reason.startswith(message)


# --- why an IP was taken back ------------------------------------------------------------
async def test_a_load_balancer_switched_to_cluster_ip_is_released_as_such() -> None:
    """#33: a class-based LoadBalancer switched to ClusterIP had its IP released "annotation
    removed", an annotation it never had. The Released Event says what happened; a Service
    whose annotation did go still says so."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool())
    lb = service("lb")
    lb["metadata"]["annotations"] = {}
    lb["spec"] |= {"type": "LoadBalancer", "loadBalancerClass": "eipctl.io/external-ip"}
    cluster.add(SERVICES, lb)
    cluster.add(SERVICES, service("web", port=443))
    reconciler, _ = await cluster.start()
    for key in ("default/lb", WEB):
        await reconcile(reconciler, key)
    switched = cluster.api.objects[("services", "default/lb")]
    switched["spec"]["type"] = "ClusterIP"
    del switched["spec"]["loadBalancerClass"]
    cluster.add(SERVICES, switched)
    unannotated = cluster.api.objects[("services", WEB)]
    del unannotated["metadata"]["annotations"]["external-ip"]
    cluster.add(SERVICES, unannotated)
    cluster.events.posted.clear()

    for key in ("default/lb", WEB):
        await reconcile(reconciler, key)

    assert cluster.events.posted == [
        (
            "Normal",
            "Released",
            f"released {FIRST_FREE} (pool p): no longer a LoadBalancer (now type ClusterIP) "
            "and no external-ip annotation",
        ),
        ("Normal", "Released", f"released {NEXT_FREE} (pool p): annotation removed"),
    ]


async def test_a_released_service_keeps_no_eipctl_annotation() -> None:
    """#33: `eipctl.io/write-id` (the writer's stamp) stayed on a Service after its IP was
    released; with the IP gone, no annotation of eipctl's is left on it."""
    cluster = Cluster()
    cluster.add(IPCLAIMPOOLS, pool())
    cluster.add(SERVICES, service("web"))
    reconciler, _ = await cluster.start()
    await reconcile(reconciler, WEB)
    held = cluster.api.objects[("services", WEB)]
    assert "eipctl.io/write-id" in held["metadata"]["annotations"]  # while it holds the IP
    del held["metadata"]["annotations"]["external-ip"]
    cluster.add(SERVICES, held)

    await reconcile(reconciler, WEB)

    released = cluster.api.objects[("services", WEB)]
    assert cluster.ips_of(WEB) == []
    assert released["metadata"]["annotations"] == {}
